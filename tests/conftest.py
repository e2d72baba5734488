from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("AWM_SHARED_DIR", ROOT.parent / "shared"))
AWM_REAL = SHARED / "data" / "awm-real"
SAMPLE_ENVS = ROOT / "sample_envs"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache directory (indexes and templates never leak between tests) and sees no
    user configuration."""
    monkeypatch.setenv("AWM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    # never read the developer's own endpoints, judge or keymap, nor their API endpoint variables
    monkeypatch.setenv("AWM_CONFIG", str(tmp_path_factory.mktemp("config") / "none.toml"))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AWM_JUDGE_MODEL", "AWM_MODEL", "AWM_VERIFIER_HOST"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def awm_real() -> Path:
    if not (AWM_REAL / "gen_envs.jsonl").is_file():
        pytest.skip(f"real AWM data not found at {AWM_REAL} (../shared is absent)")
    return AWM_REAL


@pytest.fixture
def awm_real_copy(awm_real, tmp_path) -> Path:
    """A writable copy of the real data (../shared is read-only in CI)."""
    dst = tmp_path / "awm-real"
    shutil.copytree(awm_real, dst)
    return dst
