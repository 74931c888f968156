"""Every named step of every path, found in the code rather than listed by hand: the steps
each owed-work worker declares (``Engine.steps()``, the core built on in-memory ports) and
the crash points the code passes by name (``crash("...")``). Each path of the crash and
fault tests takes the steps of the sources it runs through, so a step added later to a
worker or a module is covered without editing a list; a step no path takes fails
``tests/test_crash_matrix.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CRASH = re.compile(r"""crash\(\s*["']([a-z][a-z0-9-]*)["']\s*\)""")


@dataclass(frozen=True)
class CrashPath:
    """A path of the crash tests: the workers (by kind) and modules whose steps it passes,
    and single steps it passes of a module it otherwise does not."""

    kinds: frozenset[str] = frozenset()
    modules: frozenset[str] = frozenset()
    also: frozenset[str] = frozenset()


PATHS: dict[str, CrashPath] = {
    # /cluster resize, approved: the change sent, followed and told
    "change": CrashPath(
        kinds=frozenset({"change", "follow", "told"}),
        also=frozenset({"after-approval"}),
    ),
    # a node's Resume from a health alert: the alert, the change (it ends as it is sent:
    # the change worker's steps up to the send), its end
    "node": CrashPath(
        kinds=frozenset({"told", "health-alert"}),
        also=frozenset({"after-approval", "after-reread", "before-patch", "after-patch"}),
    ),
    # a form submitted: kept, its card owed and posted
    "submission": CrashPath(
        kinds=frozenset({"card"}),
        modules=frozenset({"handlers/intake.py"}),
        also=frozenset({"after-draft"}),
    ),
    # the pipeline hook's release: asked (its card owed and posted), approved by the
    # policy, sent
    "release": CrashPath(
        kinds=frozenset({"card"}),
        modules=frozenset({"handlers/changes/release.py"}),
        also=frozenset({"after-draft", "after-approval"}),
    ),
    # a schedule's night: off and on, each an approved change with its card and its lines
    "night": CrashPath(
        kinds=frozenset({"card", "message", "night-rollup"}),
        modules=frozenset(
            {
                "handlers/schedules/nights.py",
                "handlers/schedules/asking.py",
                "handlers/schedules/thread.py",
            }
        ),
    ),
    # the weekly digest's firing
    "digest": CrashPath(kinds=frozenset({"digest"})),
    # an idle cluster's alert, from a sweep (which keeps the spend ledger's records too)
    "idle-alert": CrashPath(
        kinds=frozenset({"idle-alert"}),
        modules=frozenset({"handlers/sweep/sweep.py", "handlers/spend/keeper.py"}),
    ),
}


@cache
def worker_steps() -> dict[str, str]:
    """Each step an owed-work worker declares, with the kind of its worker."""
    from bot.store import Store
    from handlers.policy import Policy
    from tests.conftest import ManualClock
    from tests.support.memory import MemoryStore
    from tests.test_services_unit import make_bot

    # every capability: those that keep their own rows are given a database (never opened)
    schedules = Store.from_url("sqlite+aiosqlite:///never-opened.db")
    bot = make_bot(ManualClock(), Policy(), digests=MemoryStore(), schedules=schedules)
    return bot.services.engine.steps()


@cache
def module_steps() -> dict[str, str]:
    """Each step the code passes by name (``crash("...")``), with its module."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "handlers").rglob("*.py")):
        for step in CRASH.findall(path.read_text()):
            found.setdefault(step, str(path.relative_to(ROOT)))
    return found


def steps_of(path: str) -> list[str]:
    """The steps of a path, in a steady order."""
    chosen = PATHS[path]
    taken = {s for s, kind in worker_steps().items() if kind in chosen.kinds}
    taken |= {s for s, module in module_steps().items() if module in chosen.modules}
    taken |= {s for s in every_step() if s in chosen.also}
    return sorted(taken)


def every_step() -> set[str]:
    return set(worker_steps()) | set(module_steps())


def untaken() -> set[str]:
    """Steps that no path takes: each must be taken by one."""
    taken: set[str] = set()
    for path in PATHS:
        taken |= set(steps_of(path))
    return every_step() - taken


def night_steps() -> list[tuple[str, str]]:
    """The night path's steps, each with the night it is passed in: a step named for the
    "off" (``-off-``) or the "on" (``-on-``) in that night alone, any other in both."""
    found = []
    for step in steps_of("night"):
        for night in ("off", "on"):
            other = "on" if night == "off" else "off"
            if f"-{other}-" not in step:
                found.append((night, step))
    return found
