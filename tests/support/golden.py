"""Golden files: what a renderer draws, kept as JSON and reviewed in diffs.

Regenerate after an intended change with: UPDATE_GOLDEN=1 make test, then review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def assert_golden(path: Path, drawn: Any) -> None:
    """``drawn`` is what ``path`` holds (written first when asked to, or when it is new)."""
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(json.dumps(drawn, indent=2, ensure_ascii=False) + "\n")
    assert drawn == json.loads(path.read_text()), f"{path.stem} differs from {path}"
