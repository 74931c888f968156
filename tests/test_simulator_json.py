"""The simulator writes slurmrestd's JSON as ``json.dumps(indent=2)`` would, byte for byte,
whether a value is written afresh or its kept text is reused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.controlplane import pretty
from bot.sandbox.controlplane.slurm import _objects, _parser

CAPTURES = Path(__file__).parent / "fixtures" / "slurmrestd"


def _bodies() -> list[Any]:
    found = []
    for path in sorted(CAPTURES.glob("*.json")):
        body = json.loads(path.read_text())["body"]
        if body.lstrip().startswith("{"):
            found.append(json.loads(body))
    return found


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": {}, "b": [], "c": [{}], "d": [[]]},
        {"f": 1.5e-7, "g": -0.0, "h": 10**20, "t": True, "n": None, "s": "caf\u00e9 \U0001f680"},
        {3: "int key", True: 0, None: 1, 2.5: 2, "quote": 'a "b" \\ c', "ctl": "\t\n\u2028"},
        [1, [2, [3, {"x": [4]}]]],
        *_bodies(),
    ],
)
def test_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert pretty.dumps(value) == json.dumps(value, indent=2)


def test_kept_template_text_is_reused_at_each_depth_and_stays_right() -> None:
    pretty.freeze(_objects().values())
    template = _parser("v0.0.42")["pending"]
    # the same template value at two depths, twice each: written once a depth, then reused
    for _ in range(2):
        document = {"jobs": [dict(template, job_id=1), dict(template, job_id=2)], "t": template}
        assert pretty.dumps(document) == json.dumps(document, indent=2)
