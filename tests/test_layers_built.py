"""The layout the design asks for, where a process has to show it: a core that loads no
adapter, a service that never loads the local stand-ins, an image without them, and the
design card's top level as git lists it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = (
    "sqlalchemy",
    "aiohttp",
    "slack_sdk",
    "slack_bolt",
    "google",
    "apscheduler",
    "alembic",
    "prometheus_client",
    "asyncpg",
    "aiosqlite",
    "matplotlib",
)


def loaded_after(code: str, cwd: Path = ROOT) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout.splitlines()[-1]))


def test_the_core_loads_no_adapter_library() -> None:
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "handlers").rglob("*.py")
    )
    assert len(modules) > 40 and "handlers.sweep.sweep" in modules
    loaded = loaded_after("\n".join(f"import {m}" for m in modules))
    assert [m for m in loaded if m.split(".")[0] in ADAPTERS] == []
    # the core owns its vocabulary (handlers/domain/): nothing of bot/ is loaded
    assert [m for m in loaded if m.split(".")[0] == "bot"] == []


def test_the_service_never_loads_the_stand_ins() -> None:
    loaded = loaded_after("import bot.serve, bot.app, bot.cli, bot.sweep_once")
    assert [m for m in loaded if m.startswith("bot.sandbox")] == []
    # nor matplotlib, until a chart is drawn: a start is not slowed by it, nor its logs
    assert [m for m in loaded if m.startswith("matplotlib")] == []


def built_wheel(tmp_path: Path, *, stand_ins: bool) -> tuple[Path, list[str]]:
    """A copy of the packages (building writes build/ beside the sources), without the
    stand-ins as the Dockerfile's build stage does, or with them as `pip install .` does; the
    copy and the names in its wheel."""
    tree = tmp_path / "src"
    tree.mkdir()
    for name in ("bot", "handlers"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    if not stand_ins:
        shutil.rmtree(tree / "bot" / "sandbox")
    build = subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"),
            *("-w", str(tmp_path / "out"), str(tree)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = (tmp_path / "out").glob("clusterbot-*.whl")
    return tree, zipfile.ZipFile(wheel).namelist()


def test_a_plain_install_carries_every_file_the_demo_serves(tmp_path: Path) -> None:
    """`pip install .` (not editable) builds this wheel: every file of the packages that is
    not Python (the page, its icon, its emoji font and licence, the fixtures) is in it."""
    _tree, names = built_wheel(tmp_path, stand_ins=True)
    data = [
        str(p.relative_to(ROOT))
        for package in ("bot", "handlers")
        for p in (ROOT / package).rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert "bot/sandbox/slack/static/favicon.svg" in data
    assert [d for d in data if d not in names] == []


def test_the_image_leaves_the_stand_ins_out(tmp_path: Path) -> None:
    """The wheel built as the Dockerfile builds it: no sandbox, the migrations in; and its
    command says in one line that the demo is not there."""
    tree, names = built_wheel(tmp_path, stand_ins=False)
    assert not [n for n in names if n.startswith("bot/sandbox")]
    assert "bot/store/migrations/versions/0001_release_3.py" in names
    assert "bot/store/migrations/script.py.mako" in names
    # Run the stripped tree as the image would: this checkout's editable install (a finder
    # that maps bot.* back here) is taken out of the way first.
    as_in_the_image = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path "
        "if '__editable__' not in getattr(f, '__module__', '')]\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        "from bot.cli import main\n"
        "sys.exit(main(['demo']))\n"
    )
    demo = subprocess.run(
        [sys.executable, "-c", as_in_the_image], capture_output=True, text=True, timeout=60
    )
    assert demo.returncode == 2
    assert demo.stderr.strip().startswith(
        "clusterbot demo: the local stand-ins are not installed here"
    )
    assert "Traceback" not in demo.stderr


# The design card's top level, and the files beside it; everything else lives under one.
TOP_LEVEL = {"pyproject.toml", "bot", "handlers", "tests", "Dockerfile", "app.yaml"}
BESIDE = {"README.md", "Makefile", "docs", "benchmarks", ".ci", ".gitignore", ".dockerignore"}


def test_the_top_level_is_the_design_cards() -> None:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not listed:  # not a checkout (an unpacked archive): the folders are what there is
        listed = [p.name for p in ROOT.iterdir() if p.name not in (".git", ".venv")]
    top = {path.split("/")[0] for path in listed}
    assert top <= TOP_LEVEL | BESIDE, sorted(top - TOP_LEVEL - BESIDE)
    assert top >= TOP_LEVEL
