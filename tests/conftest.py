from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _this_folder_is_the_tests_package() -> None:
    """Tests import their helpers as ``tests.X``: ``tests`` must be this folder (a namespace package). An installed
    wheel may ship a regular package of that name, which Python's import system prefers to a namespace package
    wherever it is on the path: verl 0.9.1's wheel (the trainer extra, ``make trainers``) ships its own test suite as
    a top-level ``tests``. So the package is bound to this folder before any test module is imported."""
    here = str(Path(__file__).resolve().parent)
    if list(getattr(sys.modules.get("tests"), "__path__", None) or []) == [here]:
        return
    spec = importlib.machinery.ModuleSpec("tests", None, is_package=True)
    spec.submodule_search_locations = [here]
    sys.modules["tests"] = importlib.util.module_from_spec(spec)


_this_folder_is_the_tests_package()
SHARED = Path(os.environ.get("AWM_SHARED_DIR", ROOT.parent / "shared"))
AWM_REAL = SHARED / "data" / "awm-real"
SAMPLE_ENVS = ROOT / "sample_envs"


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_in_the_temporary_directory():
    """The run fails loudly if the test process, or an awm process it started that has exited, left one of awm's
    marked directories (pool, replay, ray pool; a view only from an exited child: this process's own goes at its
    exit) in the temporary directory. The markers name the owning process and its parent, so what other processes
    sharing the directory (another test run) leave is not counted."""
    yield
    import tempfile

    from awm_engine.sandbox import owned

    me, left = str(os.getpid()), []
    for path in sorted(Path(tempfile.gettempdir()).glob("awm_*")):
        owner = owned.owner_of(path) if path.name.startswith(owned.PREFIXES) and not path.is_symlink() else None
        if owner is None:
            continue
        if owner["pid"] == me and not path.name.startswith("awm_view_"):
            left.append(str(path))
        elif owner.get("ppid") == me and owned.is_dead(owner):
            left.append(f"{path} (of pid {owner['pid']}, exited)")
    assert not left, "the test run left awm directories in the temporary directory:\n" + "\n".join(left)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache directory (indexes and templates never leak between tests) and sees no
    user configuration."""
    monkeypatch.setenv("AWM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    # never read the developer's own endpoints, judge or keymap, nor their API endpoint variables
    monkeypatch.setenv("AWM_CONFIG", str(tmp_path_factory.mktemp("config") / "none.toml"))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AWM_JUDGE_MODEL", "AWM_MODEL", "AWM_VERIFIER_HOST"):
        monkeypatch.delenv(var, raising=False)
    # no warm service outliving the test that started it (tests/test_warm.py turns it on, in a directory of its own)
    monkeypatch.setenv("AWM_WARM", "0")


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
