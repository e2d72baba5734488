"""Scenario-name normalization: the join key of every AWM artifact (spec/awm-format.md §1.1)."""
from __future__ import annotations

import re

_NOT_KEY_CHAR = re.compile(r"[^a-z0-9_]")
_UNDERSCORES = re.compile(r"_+")


def normalize_scenario_name(name: str) -> str:
    """Lowercase, map every char outside [a-z0-9_] to '_', collapse runs of '_', strip '_' then spaces."""
    key = _NOT_KEY_CHAR.sub("_", name.lower())
    key = _UNDERSCORES.sub("_", key)
    return key.strip("_").strip()
