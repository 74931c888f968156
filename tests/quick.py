"""``--quick``: the pure and in-memory tests only, for fast feedback while working
(``make quick``). A test is left out when its module starts processes or a browser or runs
the whole service over loopback (the helpers below, or the ``stack`` fixture), or when it is
PostgreSQL's half of a pair (marked ``postgres``): those are what make the full suite take
minutes. ``make test`` runs everything."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

HEAVY = {
    "subprocess",
    "multiprocessing",
    "tests.support.browser",
    "tests.support.demo_stack",
    "tests.support.private_postgres",
    "tests.support.processes",
    "tests.support.slack_stack",
    "tests.support.slack_testbot",
    "tests.support.scenarios",
    "tests.support.faults",
    "tests.support.fuzz",
    "tests.support.fuzz_surfaces",
}
HEAVY_FIXTURES = {"stack"}


ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def heavy(path: Path) -> bool:
    """Whether a test module imports what starts processes, a browser or a private database,
    itself or through another test module it imports."""
    for node in ast.walk(ast.parse(path.read_text())):
        named: set[str] = set()
        if isinstance(node, ast.Import):
            named = {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            named = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        if named & HEAVY:
            return True
        for name in named:
            other = ROOT / (name.replace(".", "/") + ".py")
            tested = name.startswith("tests.test_") and other != path and other.is_file()
            if tested and heavy(other):
                return True
    return False


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help="run only the pure and in-memory tests (no processes, browser or PostgreSQL)",
    )


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--quick"):
        return
    left = [
        item
        for item in items
        if heavy(Path(str(item.fspath)))
        or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
        or item.get_closest_marker("postgres") is not None  # PostgreSQL's half of a pair
    ]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item not in left]
