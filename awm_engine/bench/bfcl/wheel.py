"""The ``bfcl-eval`` wheel: is it installed, and importing it the way awm needs.

``make bfcl`` installs ``bfcl-eval`` without its (very heavy) dependency list plus the few packages the
checkers, decoders and multi-turn backends need. Two things make the wheel importable without the rest:

- ``BFCL_PROJECT_ROOT`` points at a directory awm owns (importing the wheel's ``eval_config`` creates
  ``result/``, ``score/`` and ``.file_locks/`` there; its default is site-packages);
- a stub ``bfcl_eval.constants.model_config`` is registered before import: the real module imports every
  provider SDK, and the checkers only read ``MODEL_CONFIG_MAPPING[name].underscore_to_dot`` from it.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from awm_engine.bench import pinned
from awm_engine.data.paths import cache_dir

BFCL_EVAL_VERSION = "2026.3.23"
# import name -> distribution: what the checkers, the decoders and the v3 multi-turn backends need
EXTRAS = {"mpmath": "mpmath", "filelock": "filelock", "tree_sitter": "tree-sitter",
          "tree_sitter_java": "tree-sitter-java", "tree_sitter_javascript": "tree-sitter-javascript",
          "tenacity": "tenacity", "overrides": "overrides", "tqdm": "tqdm", "dotenv": "python-dotenv"}
SETUP_HINT = ("run `make bfcl` (installs bfcl-eval==" + BFCL_EVAL_VERSION + " without its dependencies, and "
              "the few packages its checkers need, from constraints.txt)")

# the names awm scores under: FC mode sends names with '.' replaced by '_' (OpenAI function names cannot
# hold dots), so the checker compares with underscores; prompt mode keeps the dotted names
MODEL_NAMES = {"fc": "awm-bfcl-fc", "prompt": "awm-bfcl-prompt"}


class BfclMissing(RuntimeError):
    """The wheel (or one of its extras) is not installed, or is another version."""


@dataclass(frozen=True)
class _ModelConfig:
    model_name: str
    is_fc_model: bool
    underscore_to_dot: bool


def project_root() -> Path:
    """The ``BFCL_PROJECT_ROOT`` awm gives the wheel (its lock files and empty result/score folders)."""
    return cache_dir() / "bfcl"


def problem() -> str | None:
    """Why BFCL cannot run here (None when it can)."""
    return pinned.problem("bfcl-eval", BFCL_EVAL_VERSION, EXTRAS, SETUP_HINT, "BFCL")


def require() -> None:
    if (reason := problem()) is not None:
        raise BfclMissing(reason)


def _stub(name: str, **attrs) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        module.__doc__ = "awm's stand-in (awm_engine.bench.bfcl.wheel)"
        sys.modules[name] = module


def prepare(root: Path | str | None = None, checker: bool = False) -> None:
    """Make ``import bfcl_eval…`` work: the project root, the stub model config and (``checker``: in the
    sandboxed host only) a stand-in for ``eval_runner_helper``, whose leaderboard code needs numpy and pandas
    and which ``eval_runner`` star-imports (its per-entry scoring functions use none of it)."""
    global _prepared
    if _prepared and (not checker or "bfcl_eval.eval_checker.eval_runner_helper" in sys.modules):
        return
    require()
    if "bfcl_eval.constants.eval_config" not in sys.modules:
        root = Path(root or os.environ.get("AWM_BFCL_PROJECT_ROOT") or project_root())
        root.mkdir(parents=True, exist_ok=True)
        os.environ["BFCL_PROJECT_ROOT"] = str(root)
    mapping = {name: _ModelConfig(name, mode == "fc", mode == "fc") for mode, name in MODEL_NAMES.items()}
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING=mapping)
    if checker:
        _stub("bfcl_eval.eval_checker.eval_runner_helper")
    _prepared = True


_prepared = False


def load(module: str, checker: bool = False) -> types.ModuleType:
    """``bfcl_eval.<module>``, imported after ``prepare``."""
    prepare(checker=checker)
    return importlib.import_module(f"bfcl_eval.{module}")
