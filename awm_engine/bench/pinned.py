"""Official benchmark packages installed ``--no-deps`` at a pinned version (``make bfcl``, ``make mcpu``): is the
package there, at that version, with the few packages its scoring code imports."""
from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Mapping


def problem(dist: str, version: str, extras: Mapping[str, str], hint: str, what: str | None = None) -> str | None:
    """Why ``dist==version`` (plus ``extras``: import name -> distribution) cannot be used (None when it can)."""
    try:
        installed = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return f"{what or dist} is not installed: {hint}"
    if installed != version:
        return f"{dist} {installed} is installed, awm scores with {version}: {hint}"
    missing = sorted(d for name, d in extras.items() if importlib.util.find_spec(name) is None)
    if missing:
        return f"{dist} is installed but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: {hint}"
    return None
