"""The Slack app manifests' usage hint for ``/cluster``, made from the registry: every
subcommand, as its usage line reads without its optional parts. ``make manifests`` writes it
into ``docs/deploy/slack/``; a test holds the files to it, so a new subcommand is in the
hint Slack shows."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from handlers.capabilities import REGISTRY
from handlers.registry import Registry

MANIFESTS = ("manifest.yaml", "manifest-socket-mode.yaml")
HINT = re.compile(r'^(\s*usage_hint: )".*"$', re.M)


def short(usage: str) -> str:
    """``/cluster resize CLUSTER POOL N   (or MIN:MAX)`` as ``resize CLUSTER POOL N``:
    the optional ``[...]`` and the ``(...)`` asides left out."""
    words = usage.removeprefix("/cluster ")
    while True:
        shorter = re.sub(r"\s*\[[^\[\]]*\]", "", words)
        if shorter == words:
            break
        words = shorter
    return " ".join(re.sub(r"\([^()]*\)", "", words).split())


def usage_hint(registry: Registry = REGISTRY) -> str:
    return " | ".join(short(entry.usage) for entry in registry.commands)


def write(folder: Path, registry: Registry = REGISTRY) -> list[Path]:
    """The manifests in ``folder`` with their usage hint made again; the ones changed."""
    changed = []
    for name in MANIFESTS:
        path = folder / name
        text = path.read_text()
        made = HINT.sub(lambda m: f'{m.group(1)}"{usage_hint(registry)}"', text)
        if made != text:
            path.write_text(made)
            changed.append(path)
    return changed


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/deploy/slack")
    for path in write(folder):
        print(f"wrote {path}")
