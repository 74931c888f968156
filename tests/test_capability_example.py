"""The capability worked example of docs/ARCHITECTURE.md is true: in a scratch copy of the
project, its package (with the labels kind and the label form of the page's other examples)
and its one entry in the list are written exactly as the page says, and there the new
subcommand, click, kind, form and periodic job run through the same dispatcher, the
manifests take its usage, and the layering, click and manifest tests pass with it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

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
    text = text.replace("\nCAPABILITIES", f"{importing}\n\nCAPABILITIES", 1)
    text = text.replace("\n)\nREGISTRY", f"\n{naming}\n)\nREGISTRY", 1)
    listed.write_text(text)
    for git in (["init", "-q"], ["add", "-A"]):  # a checkout, as someone adding it has
        subprocess.run(["git", *git], cwd=tree, check=True, capture_output=True)
    return tree


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=600
    )


def test_the_example_capability_plugs_in_with_its_package_and_one_entry(tmp_path: Path) -> None:
    tree = _scratch(tmp_path)
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

    made = _run(tree, "-m", "bot.manifest", "docs/deploy/slack")
    assert made.returncode == 0, made.stderr
    assert "| pools CLUSTER" in (tree / "docs/deploy/slack/manifest.yaml").read_text()
    checks = ("tests/test_layers.py", "tests/test_clicks.py", "tests/test_deploy.py")
    suite = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *checks)
    assert suite.returncode == 0, suite.stdout[-3000:]
