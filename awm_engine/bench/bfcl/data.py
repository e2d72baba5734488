"""The wheel's prompt entries and possible answers, read with the wheel's own loaders.

For generation the function docs carry BFCL's language hint (and Java/JavaScript parameter types rewritten
to ``string``), multi-turn entries get their function docs from ``multi_turn_func_doc/`` with the
``missed_function`` docs held out; for scoring (the sandboxed checker) the docs stay as in the file, as
BFCL's evaluator reads them. Prompt entries and possible answers are paired by line index, as BFCL does.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

from awm_engine.bench.bfcl import wheel
from awm_engine.bench.bfcl.categories import CATEGORIES, Category


@dataclass
class Entry:
    category: Category
    index: int  # line index in the wheel's file
    prompt: dict[str, Any]  # id, question, function (with the language hint), multi-turn fields
    ground_truth: Any  # the possible answer's ground_truth (None for irrelevance/relevance)

    @property
    def id(self) -> str:
        return self.prompt["id"]


@functools.cache
def _load(category: str, hinted: bool) -> tuple[tuple[dict, Any], ...]:
    utils = wheel.load("utils")
    cat = CATEGORIES[category]
    prompts = utils.load_dataset_entry(cat.wheel, include_prereq=False, include_language_specific_hint=hinted)
    answers = utils.load_ground_truth_entry(cat.wheel) if cat.kind in ("ast", "multi_turn") else None
    return tuple((p, answers[i]["ground_truth"] if answers else None) for i, p in enumerate(prompts))


def entries(category: str, hinted: bool = True) -> list[Entry]:
    """Every entry of a v3 category, in file order (deep copies: callers may change them)."""
    cat = CATEGORIES[category]
    return [Entry(cat, i, copy.deepcopy(p), copy.deepcopy(gt)) for i, (p, gt) in enumerate(_load(category, hinted))]


def prompt_at(category: str, index: int, hinted: bool = True) -> dict[str, Any]:
    """One prompt entry (a copy), by line index."""
    return copy.deepcopy(_load(category, hinted)[index][0])


def select(categories: list[str], limit: int | None = None) -> list[Entry]:
    """The first ``limit`` entries (all without a limit) of each category, in the leaderboard's order."""
    chosen: list[Entry] = []
    for name in categories:
        found = entries(name)
        chosen += found[:limit] if limit is not None else found
    return chosen


def by_id(categories: list[str]) -> dict[str, Entry]:
    return {e.id: e for name in categories for e in entries(name)}
