"""Keeping generated scenarios diverse: a candidate too similar to one already kept is rejected.

With an embedding endpoint the similarity is the cosine of embeddings (threshold 0.85, the reference's); without
one it is a lexical fallback: cosine of word and word-pair counts of name + description (threshold 0.6). A name
that normalizes to a kept one is always a duplicate.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from awm_engine.data.names import normalize_scenario_name

EMBEDDING_THRESHOLD = 0.85
LEXICAL_THRESHOLD = 0.6
STOPWORDS = set("""a an and are as at be by can for from has have in into is it its of on or that the their them
this to users user with where which who will while your you they can also allow allows manage manages platform
service app application online""".split())


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 1]


def lexical_vector(scenario: dict[str, Any]) -> Counter:
    words = _words(f"{scenario.get('name', '')} {scenario.get('description', '')}")
    return Counter(words) + Counter(f"{a} {b}" for a, b in zip(words, words[1:]))


def cosine(a, b) -> float:
    if isinstance(a, Counter):
        dot = sum(v * b.get(k, 0) for k, v in a.items())
        na = math.sqrt(sum(v * v for v in a.values()))
        nb = math.sqrt(sum(v * v for v in b.values()))
    else:
        dot = sum(x * y for x, y in zip(a, b))
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


@dataclass
class Verdict:
    keep: bool
    similarity: float = 0.0
    closest: str | None = None
    reason: str | None = None


class DiversityFilter:
    """``await check(candidate)`` → a verdict; ``add`` records a kept scenario. ``embed`` (texts → vectors) turns
    on the embedding method."""

    def __init__(self, embed=None, threshold: float | None = None):
        self.embed = embed
        self.method = "embedding" if embed else "lexical"
        self.threshold = threshold or (EMBEDDING_THRESHOLD if embed else LEXICAL_THRESHOLD)
        self.kept: list[tuple[str, Any]] = []
        self.names: set[str] = set()

    async def vector(self, scenario: dict[str, Any]):
        if self.embed is None:
            return lexical_vector(scenario)
        text = f"{scenario.get('name', '')}: {scenario.get('description', '')}"
        return (await self.embed([text]))[0]

    async def check(self, scenario: dict[str, Any]) -> tuple[Verdict, Any]:
        key = normalize_scenario_name(str(scenario.get("name", "")))
        if not key:
            return Verdict(False, reason="the name is empty once normalized"), None
        if key in self.names:
            return Verdict(False, 1.0, key, f"the name {key} is taken"), None
        vector = await self.vector(scenario)
        best, closest = 0.0, None
        for name, other in self.kept:
            similarity = cosine(vector, other)
            if similarity > best:
                best, closest = similarity, name
        if best > self.threshold:
            return Verdict(False, best, closest, f"{self.method} similarity {best:.2f} to {closest} is above "
                                                 f"{self.threshold:.2f}"), vector
        return Verdict(True, best, closest), vector

    def add(self, scenario: dict[str, Any], vector: Any) -> None:
        key = normalize_scenario_name(str(scenario.get("name", "")))
        self.names.add(key)
        if vector is not None:
            self.kept.append((key, vector))

    async def admit(self, scenario: dict[str, Any]) -> None:
        """Record a scenario that is kept regardless (a seed, or one from an earlier run)."""
        try:
            vector = await self.vector(scenario)
        except Exception:  # noqa: BLE001 - an embedding failure leaves only the name check for this one
            vector = None
        self.add(scenario, vector)
