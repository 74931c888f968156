"""A module a page of the docs shows, written where its first line says and imported, so that
a worked example is the code its test runs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def module_from_page(
    first_line: str, name: str, where: Path, page: Path = ARCHITECTURE
) -> ModuleType:
    """The one ```python block of ``page`` starting with ``first_line``, imported as ``name``
    (left in ``sys.modules`` for the caller to pop)."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    [source] = [b for b in blocks if b.startswith(first_line + "\n")]
    path = where / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
