"""The piece-at-a-time reader of long Slurm replies (``bot.vertex.paced``) reads exactly what
one whole decode reads, wherever the pieces split the bytes, and says why when it cannot."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.vertex.paced import HEAD, read_slurm_bytes
from handlers.domain.errors import MalformedReplyError

# Escapes of every kind, a surrogate pair written as escapes and as raw UTF-8, backslashes
# before quotes, and numbers that a cut would shorten.
DOCUMENT: dict[str, Any] = {
    "meta": {"plugin": {"data_parser": "data_parser/v0.0.42"}, "Slurm": {"release": "24.11.1"}},
    "jobs": [
        {"job_id": 4_294_967_294, "name": 'tab\there "quoted" \\ back\\slash\\', "x": -1.5e-7},
        {"job_id": 7, "name": "caf\u00e9 \U0001f680 \u2028 \\u00e9 literal", "tres": [1, 22, 333]},
        {"job_id": 12345678901234567890, "comment": '/\\\\\\"/', "empty": {}},
    ],
    "warnings": [],
    "last": 1234567,
}


def _reply(body: str, status: int = 200, status_first: bool = True) -> bytes:
    members = [f'"status": {status}', f'"body": {json.dumps(body, ensure_ascii=False)}']
    text = "{\n  " + ",\n  ".join(members if status_first else members[::-1]) + "\n}\n"
    return text.encode()


def _keep(job: Any) -> Any:
    return ("kept", job["job_id"])


@pytest.mark.parametrize("size", [*range(1, 24), 97, 4096])
async def test_every_cut_reads_as_one_whole_decode(size: int) -> None:
    body = json.dumps(DOCUMENT, indent=2, ensure_ascii=size % 2 == 0)
    for raw in (_reply(body), _reply(body, status_first=False)):
        answer = await read_slurm_bytes(raw, {"jobs": _keep}, size)
        expected = json.loads(body)
        expected["jobs"] = [_keep(job) for job in expected["jobs"]]
        assert (answer.status, answer.document, answer.problem) == (200, expected, "")


async def test_a_long_member_that_is_no_list_costs_a_few_decodes_not_one_a_piece() -> None:
    body = json.dumps({"big": ["x" * 50] * 20_000, "jobs": []})
    answer = await read_slurm_bytes(_reply(body), {"jobs": _keep}, 64)
    assert answer.document == json.loads(body)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("Unable to find requested URL endpoint\n", "expected '{' at character 0"),
        ('{"jobs": [{"job_id": 1}', "expected ',' or ']' at character 23"),
        ('{"jobs": [] } trailing', "extra data at character 14"),
        ('{"jobs": [{"job_id": 1,}]}', "a list element at character 10 is not valid JSON"),
        ("[1, 2]", "expected '{' at character 0"),
    ],
)
async def test_a_body_that_is_not_the_object_says_where_and_keeps_the_status(
    body: str, problem: str
) -> None:
    for status_first in (True, False):
        answer = await read_slurm_bytes(_reply(body, 404, status_first), {"jobs": _keep}, 5)
        assert (answer.status, answer.document, answer.problem) == (404, None, problem)
        assert answer.text == body


async def test_an_empty_body_is_an_empty_document_and_a_long_one_keeps_its_head() -> None:
    # proto3 JSON leaves an empty string out, and a zero status with it
    answer = await read_slurm_bytes(b"{}", {}, 1)
    assert (answer.status, answer.document, answer.text) == (0, {}, "")
    text = "Authentication failure\n" + "x" * (3 * HEAD)
    answer = await read_slurm_bytes(_reply(text, 401), {}, 100)
    assert (answer.status, answer.document, answer.text) == (401, None, text[:HEAD])


@pytest.mark.parametrize(
    "raw",
    [
        b'{"status": 200, "body": "{}"',  # cut short
        b'{"status": 200, "body": "{}"} extra',
        b'{"status": "200", "body": "{}"}',
        b'{"status": 200, "body": 5}',
        b'{"status": 200, "body": "\xff{}"}',  # not UTF-8
        b'{"status": 200, "body": "tab\there"}',  # a control character inside a string
        b"[]",
    ],
)
async def test_an_envelope_that_is_not_the_control_planes_is_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedReplyError) as caught:
        await read_slurm_bytes(raw, {}, 3)
    assert str(caught.value).startswith("the control plane sent a Slurm reply that")
