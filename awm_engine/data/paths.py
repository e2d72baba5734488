"""Where awm finds its bundled data and keeps its caches."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the awm_engine package


def sample_envs_dir() -> Path:
    """The bundled sample environments (``AWM_SAMPLE_ENVS`` overrides)."""
    override = os.environ.get("AWM_SAMPLE_ENVS")
    if override:
        return Path(override)
    return PACKAGE_ROOT.parent / "sample_envs"


def cache_dir() -> Path:
    """Root of awm's caches (``AWM_CACHE_DIR``, else ``$XDG_CACHE_HOME/awm``, else ``~/.cache/awm``)."""
    override = os.environ.get("AWM_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "awm"
