"""The capability worked example of docs/ARCHITECTURE.md is true: in a scratch copy of the
project, its package (with the labels kind and the label form of the page's other examples)
and its one entry in the list are written exactly as the page says, and there the new
subcommand, click, kind, form and periodic job run through the same dispatcher, the demo
answers the new subcommand and schedules its job, the manifests take its usage, and the quick
suite (lint, types, the pure and in-memory tests, the layering, click and manifest tests
among them) passes with it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
FIRST_LINES = {
    "# handlers/pools/capability.py": "handlers/pools/capability.py",
    "# handlers/changes/labels.py": "handlers/changes/labels.py",
    "# handlers/forms/label.py": "handlers/forms/label.py",
}

# Run in the scratch copy: the capability through the core, on in-memory ports.
PROBE = """
import asyncio, json
from handlers.capabilities import REGISTRY
from handlers.changes.kinds import kind_of
from handlers.policy import Policy
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_services_unit import C1, POLICY, make_bot

async def main():
    bot = make_bot(ManualClock(), Policy.model_validate(POLICY))
    said = {
        "pools": text(await bot.ask("U0ALICE", "pools c1")),
        "help": text(await bot.ask("U0ALICE", "help")),
        "missing": text(await bot.ask("U0ALICE", "pools")),
        "typo": text(await bot.ask("U0ALICE", "pool c1")),
        "refresh": text(await bot.click("U0ALICE", "pools_refresh", C1)),
        "form": text(await bot.click("U0ALICE", "open_form_label", "label")),
    }
    [job] = [j for j in bot.services.jobs if j.name == "pools-count"]
    said["counted"] = await job.run()
    said["every"] = job.seconds
    said["kinds"] = sorted(REGISTRY.kinds)
    said["forms"] = sorted(REGISTRY.forms)
    print(json.dumps(said))

asyncio.run(main())
"""


# Run in the scratch copy: the demo as `clusterbot demo` runs it, asked through its sandbox.
DEMO_PROBE = """
import asyncio, json, tempfile
from pathlib import Path
from tests.support.demo_stack import demo_stack, text_of

async def main():
    with tempfile.TemporaryDirectory() as tmp:
        async with demo_stack(Path(tmp)) as stack:
            said = {
                "pools": text_of(await stack.reply_to("alice", "/cluster pools train01")),
                "help": text_of(await stack.reply_to("alice", "/cluster help")),
                "jobs": sorted(job.id for job in stack.service.jobs.scheduler.get_jobs()),
            }
    print(json.dumps(said))

asyncio.run(main())
"""


LINT = (
    ("ruff", "check", "bot", "handlers", "tests", "benchmarks"),
    ("ruff", "format", "--check", "bot", "handlers", "tests", "benchmarks"),
    ("mypy",),
)


def _blocks() -> dict[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    found = {}
    for first, path in FIRST_LINES.items():
        [source] = [b for b in blocks if b.startswith(first + "\n")]
        found[path] = source
    [entry] = [b for b in blocks if b.startswith("from handlers.pools.capability import POOLS")]
    found["entry"] = entry
    return found


def _scratch(tmp_path: Path) -> Path:
    tree = tmp_path / "project"
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked:  # the project as committed, with what is being changed in it
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, tree / name)
    blocks = _blocks()
    (tree / "handlers" / "pools").mkdir()
    (tree / "handlers" / "pools" / "__init__.py").write_text('"""Node pools."""\n')
    for path, source in blocks.items():
        if path != "entry":
            (tree / path).write_text(source)
    # the one entry: its import beside the others, its name at the end of the list
    listed = tree / "handlers" / "capabilities.py"
    text = listed.read_text()
    importing, naming = (line for line in blocks["entry"].splitlines() if line.strip())
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("from handlers.")]
    imports = sorted([*(lines[i] for i in at), importing])  # in its place, as isort puts it
    lines[at[0] : at[-1] + 1] = imports
    text = "\n".join(lines) + "\n"
    text = text.replace("\n)\nREGISTRY", f"\n{naming}\n)\nREGISTRY", 1)
    listed.write_text(text)
    for git in (["init", "-q"], ["add", "-A"]):  # a checkout, as someone adding it has
        subprocess.run(["git", *git], cwd=tree, check=True, capture_output=True)
    return tree


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=1100
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scratch copy with the example written in, shared by this module's tests."""
    return _scratch(tmp_path_factory.mktemp("example"))


def test_the_example_capability_plugs_in_with_its_package_and_one_entry(tree: Path) -> None:
    probe = _run(tree, "-c", PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    said = json.loads(probe.stdout.splitlines()[-1])
    assert "Node pools of c1" in said["pools"] and "gpu" in said["pools"]
    assert "/cluster pools CLUSTER" in said["help"]
    assert "pools needs CLUSTER" in said["missing"] and "Usage: /cluster pools" in said["missing"]
    assert "did you mean 'pools'" in said["typo"]
    assert "Node pools of c1" in said["refresh"]
    assert "Type /cluster label" in said["form"]  # where forms cannot open, in words
    assert said["counted"] == 2 and said["every"] == 60.0
    assert "labels" in said["kinds"] and "label" in said["forms"]

    demo = _run(tree, "-c", DEMO_PROBE)
    assert demo.returncode == 0, demo.stderr[-3000:]
    shown = json.loads(demo.stdout.splitlines()[-1])
    assert "Node pools of train01" in shown["pools"] and "MIN:MAX" in shown["pools"]
    assert "/cluster pools CLUSTER" in shown["help"]
    assert "pools-count" in shown["jobs"]

    made = _run(tree, "-m", "bot.manifest", "docs/deploy/slack")
    assert made.returncode == 0, made.stderr
    assert "| pools CLUSTER" in (tree / "docs/deploy/slack/manifest.yaml").read_text()
    socket = (tree / "docs/deploy/slack/manifest-socket-mode.yaml").read_text()
    assert "| pools CLUSTER" in socket


@pytest.mark.timeout(1200)  # lint, types and some 700 tests, in a copy nothing is cached for
def test_the_quick_suite_passes_with_the_example_capability(tree: Path) -> None:
    """make quick, in the copy: lint and types, then the pure and in-memory tests (the
    layering, click, kind, form and manifest tests among them) with the capability added."""
    for check in LINT:  # make quick: lint and types, then the quick tests
        linted = _run(tree, "-m", *check)
        assert linted.returncode == 0, (linted.stdout + linted.stderr)[-3000:]
    suite = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--quick")
    assert suite.returncode == 0, (suite.stdout + suite.stderr)[-3000:]
    assert re.search(r"\d+ passed", suite.stdout), suite.stdout[-500:]
