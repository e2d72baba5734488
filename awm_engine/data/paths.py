"""Where awm finds its bundled data and keeps its caches."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the awm_engine package


SAMPLE_MARKER = "gen_scenario.jsonl"  # a directory of sample environments holds at least this file


class MissingSampleEnvs(FileNotFoundError):
    """The bundled sample environments are not where they should be (a broken install, or a wrong
    ``AWM_SAMPLE_ENVS``): loading the default data would give an empty catalog."""


def sample_envs_dir() -> Path:
    """The bundled sample environments: ``AWM_SAMPLE_ENVS`` when set; else the package's own copy
    (``awm_engine/sample_envs/`` in an installed wheel, mapped from the repository's ``sample_envs/``), else the
    repository's ``sample_envs/`` (a checkout or an editable install). ``MissingSampleEnvs`` when the directory
    found holds no sample environments: an empty default catalog is an error, never a silent zero."""
    override = os.environ.get("AWM_SAMPLE_ENVS")
    if override:
        path = Path(override)
        if not (path / SAMPLE_MARKER).is_file():
            raise MissingSampleEnvs(f"AWM_SAMPLE_ENVS={override} holds no sample environments (no {SAMPLE_MARKER}): "
                                    "point it at a directory of AWM files, or unset it")
        return path
    candidates = [PACKAGE_ROOT / "sample_envs", PACKAGE_ROOT.parent / "sample_envs"]
    for path in candidates:
        if (path / SAMPLE_MARKER).is_file():
            return path
    raise MissingSampleEnvs(
        "awm's bundled sample environments are missing (looked in " + " and ".join(map(str, candidates)) +
        "): this install of awm is incomplete; reinstall it (pip install awm, or pip install -e . in a checkout), "
        "or give the data directories (--data DIR, Catalog.load([DIR]), AWM_SAMPLE_ENVS)")


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Root of awm's caches (``AWM_CACHE_DIR``, else ``$XDG_CACHE_HOME/awm``, else ``~/.cache/awm``), under
    ``environ`` (default: this process's environment)."""
    env = os.environ if environ is None else environ
    override = env.get("AWM_CACHE_DIR")
    if override:
        return Path(override)
    home = env.get("HOME") if environ is not None else None
    base = env.get("XDG_CACHE_HOME") or str((Path(home) if home else Path.home()) / ".cache")
    return Path(base) / "awm"


def not_a_directory(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read as a directory ("no such directory", "not a directory"), None when it can."""
    p = Path(path)
    if p.is_dir():
        return None
    return "not a directory" if p.exists() or p.is_symlink() else "no such directory"
