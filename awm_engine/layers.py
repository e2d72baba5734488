"""The engine's layering: each subpackage may import only itself and the layers below it.

``data ← sandbox ← db ← runtime ← agent ← verify ← eval ← (bench | gen | train) ← cli``. Nothing in
the engine imports ``awm_tui`` or Textual. ``tests/test_layering.py`` enforces this on every import
statement, including those inside functions.
"""
from __future__ import annotations

# rank of each subpackage; a module may import subpackages of lower or equal rank (equal: itself only)
LAYERS: dict[str, int] = {
    "data": 0,
    "sandbox": 1,
    "db": 2,
    "runtime": 3,
    "agent": 4,
    "verify": 5,
    "eval": 6,
    "bench": 7,
    "gen": 7,
    "train": 7,
    "cli": 8,
}

FORBIDDEN_EVERYWHERE = ("awm_tui", "textual")


def may_import(importer: str, imported: str) -> bool:
    """Whether subpackage ``importer`` may import subpackage ``imported`` (both names from LAYERS)."""
    if importer == imported:
        return True
    return LAYERS[imported] < LAYERS[importer]
