"""The 17 scored categories of BFCLv3, their groups, and where their data sits in the ``bfcl-eval`` wheel.

The wheel is BFCL v4: its files are named ``BFCL_v4_<name>.json`` and three v3 categories were renamed
(simple → simple_python, java → simple_java, javascript → simple_javascript); awm uses the v3 names and
reads the wheel's files. Non-Live and Live content equals v3-final apart from about ten bug fixes (and two
live_relevance entries re-labelled as live_irrelevance: 884/16 instead of 882/18); Multi-Turn data and
backends were revised in v4, so multi-turn scores are not strictly comparable with v3-era numbers.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    name: str  # the v3 name
    wheel: str  # the wheel's (v4) category name: its file is BFCL_v4_<wheel>.json
    group: str  # non_live | live | multi_turn
    kind: str  # ast | irrelevance | relevance | multi_turn
    size: int  # entries in the wheel's file
    language: str = "python"  # python | java | javascript


CATEGORIES: dict[str, Category] = {c.name: c for c in (
    Category("simple", "simple_python", "non_live", "ast", 400),
    Category("java", "simple_java", "non_live", "ast", 100, "java"),
    Category("javascript", "simple_javascript", "non_live", "ast", 50, "javascript"),
    Category("multiple", "multiple", "non_live", "ast", 200),
    Category("parallel", "parallel", "non_live", "ast", 200),
    Category("parallel_multiple", "parallel_multiple", "non_live", "ast", 200),
    Category("irrelevance", "irrelevance", "non_live", "irrelevance", 240),
    Category("live_simple", "live_simple", "live", "ast", 258),
    Category("live_multiple", "live_multiple", "live", "ast", 1053),
    Category("live_parallel", "live_parallel", "live", "ast", 16),
    Category("live_parallel_multiple", "live_parallel_multiple", "live", "ast", 24),
    Category("live_irrelevance", "live_irrelevance", "live", "irrelevance", 884),
    Category("live_relevance", "live_relevance", "live", "relevance", 16),
    Category("multi_turn_base", "multi_turn_base", "multi_turn", "multi_turn", 200),
    Category("multi_turn_miss_func", "multi_turn_miss_func", "multi_turn", "multi_turn", 200),
    Category("multi_turn_miss_param", "multi_turn_miss_param", "multi_turn", "multi_turn", 200),
    Category("multi_turn_long_context", "multi_turn_long_context", "multi_turn", "multi_turn", 200),
)}
GROUP_NAMES = {"non_live": "Non-Live", "live": "Live", "multi_turn": "Multi-Turn"}
GROUPS: dict[str, list[str]] = {g: [c.name for c in CATEGORIES.values() if c.group == g] for g in GROUP_NAMES}
GROUPS["all"] = list(CATEGORIES)
BY_WHEEL_NAME = {c.wheel: c for c in CATEGORIES.values()}
DATA_NOTE = ("data: the bfcl-eval wheel's v3 categories (Non-Live and Live = v3-final plus ~10 bug fixes, "
             "live_irrelevance 884 / live_relevance 16 instead of 882 / 18; Multi-Turn data and backends revised "
             "in v4, so multi-turn is not strictly comparable with v3-era numbers)")

# Entries no answer can pass, in either mode (the possible answer contradicts the function doc, or the
# Java converter cannot produce what the possible answer holds)
_ANY_LIST = "ArrayList elements typed `any` are converted to strings; the possible answer holds ints and booleans"
UNSATISFIABLE: dict[str, str] = {
    "simple_java_36": _ANY_LIST,
    "simple_java_65": _ANY_LIST,
    "live_simple_106-63-0": "a required array parameter has an empty option list in the possible answer",
    "live_simple_112-68-0": "a required array parameter has an empty option list in the possible answer",
    "live_multiple_862-181-3": "the possible answer requires journey_start_time, which the function doc lacks "
                               "(unexpected when supplied, missing when omitted)",
    "live_multiple_964-207-0": "the possible answer uses `question`; the doc requires `statement`",
}
# ... and in prompt mode only: the Java decoder (tree-sitter) — the Java prompt-mode quirk
_HASHMAP = "the Java decoder drops the body of the double-brace HashMap, so it decodes to an empty map"
_STRING_ARRAY = "String[] elements: quoted they keep their quotes, unquoted they do not parse"
UNSATISFIABLE_PROMPT: dict[str, str] = {
    "simple_java_1": _HASHMAP, "simple_java_67": _HASHMAP, "simple_java_68": _HASHMAP,
    "simple_java_35": _STRING_ARRAY, "simple_java_85": _STRING_ARRAY,
}


def unsatisfiable(mode: str) -> dict[str, str]:
    """The entries no answer can pass in ``mode`` (fc | prompt), with why."""
    return {**UNSATISFIABLE, **(UNSATISFIABLE_PROMPT if mode == "prompt" else {})}


def category_of(entry_id: str) -> Category:
    """The category of a wheel entry id (everything before the last ``_``, as BFCL derives it)."""
    wheel = entry_id.split(":")[0].rsplit("_", 1)[0]
    try:
        return BY_WHEEL_NAME[wheel]
    except KeyError:
        raise ValueError(f"{entry_id!r} is not an entry of a BFCLv3 category") from None


def resolve(categories: list[str] | None = None, group: str | None = None) -> list[str]:
    """The v3 category names selected by ``--categories`` (v3 or wheel names, groups allowed) or ``--group``."""
    if not categories:
        return list(GROUPS[group or "all"])
    chosen: list[str] = []
    for name in (n.strip() for item in categories for n in item.split(",")):
        if not name:
            continue
        names = GROUPS.get(name) or ([name] if name in CATEGORIES else
                                     [BY_WHEEL_NAME[name].name] if name in BY_WHEEL_NAME else None)
        if names is None:
            known = ", ".join(list(CATEGORIES) + list(GROUPS))
            raise ValueError(f"unknown BFCL category {name!r} (known: {known})")
        chosen += [n for n in names if n not in chosen]
    return [c for c in CATEGORIES if c in chosen]  # the leaderboard's order
