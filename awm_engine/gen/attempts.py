"""The self-correcting loop every stage shares: ask, run what came back, and on failure ask again with a
summary of every error seen so far — up to ``retries`` more times — keeping the best attempt (spec §3.3, §6.1)."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from awm_engine.gen import prompts
from awm_engine.gen.llm import GenClient, Reply
from awm_engine.gen.parse import BadReply
from awm_engine.gen.records import AttemptEvent, GenConfig

HISTORY_LIMIT = 64_000  # characters of error history given to the summarizer (the reference's cut)
SEPARATOR = "\n" + "=" * 80 + "\n"


@dataclass
class Attempt:
    """What one attempt produced: ``value`` (the artifact, None if unusable), its errors, and ``score`` — the
    stage's error measure (an error ratio, a count of defects); lower is better, and ``ok`` means it passed."""

    value: Any
    errors: list[str] = field(default_factory=list)
    score: float = float("inf")
    ok: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    status: str  # done | kept | failed
    best: Attempt | None
    attempts: int
    chosen: int | None
    last_error: str | None


class GenContext:
    """What the stages share in one run: configuration, model client, output store, and the callbacks that
    report each attempt (progress bars, the TUI)."""

    def __init__(self, config: GenConfig, llm: GenClient, store, on_event: Callable[[dict], None] | None = None,
                 summarize: bool = True):
        self.config = config
        self.llm = llm
        self.store = store
        self.on_event = on_event
        self.summarize = summarize
        self.pool = None  # the environment pool, started on first use by the env stage
        self.pool_lock = asyncio.Lock()

    def report(self, record: dict[str, Any]) -> None:
        self.store.event(record)
        if self.on_event is not None:
            try:
                self.on_event(record)
            except Exception:  # noqa: BLE001 - a display callback never stops generation
                pass


def history_text(errors: list[str]) -> str:
    text = SEPARATOR.join(errors)
    if len(text) > HISTORY_LIMIT:
        text = text[-HISTORY_LIMIT:] + "... (truncated)"
    return text


async def summarize_errors(ctx: GenContext, stage: str, scenario: str, errors: list[str]) -> str:
    """Guidance for the next attempt: the model's summary of the errors, or (when the summary fails or is
    switched off) the most recent errors themselves."""
    text = history_text(errors)
    fallback = text[-6000:]
    if not ctx.summarize:
        return fallback
    reply = await ctx.llm.chat([{"role": "system", "content": prompts.SUMMARY_SYSTEM},
                                {"role": "user", "content": prompts.summary_user(stage, scenario, text)}],
                               stage=stage, scenario=scenario, max_tokens=2000)
    ctx.report({"kind": "summary", "scenario": scenario, "stage": stage, "prompt_tokens": reply.usage.prompt_tokens,
                "completion_tokens": reply.usage.completion_tokens, "ok": not reply.error, "time": time.time()})
    summary = (reply.text or "").strip()
    if reply.error or not summary or reply.finish_reason == "content_filter":
        return fallback
    # the raw messages stay in: the summary may drop the one detail that matters
    return summary + "\n\nThe errors themselves (most recent last):\n" + text[-3000:]


async def run_attempts(ctx: GenContext, stage: str, scenario: str,
                       messages: Callable[[int, int, str | None], list[dict[str, Any]]],
                       evaluate: Callable[[Reply], Awaitable[Attempt]], max_tokens: int = 16000,
                       task: int | None = None, prefer_last: bool = False) -> Outcome:
    """Up to ``retries + 1`` attempts; returns at the first that passes, else the best (lowest score; on a tie
    the first, or the last with ``prefer_last``)."""
    total = ctx.config.retries + 1
    history: list[str] = []
    best: Attempt | None = None
    chosen: int | None = None
    guidance: str | None = None
    for number in range(1, total + 1):
        if history:
            guidance = await summarize_errors(ctx, stage, scenario, history)
        started = time.perf_counter()
        reply = await ctx.llm.chat(messages(number, total, guidance), stage=stage, scenario=scenario,
                                   max_tokens=max_tokens)
        if reply.error:
            attempt = Attempt(None, [reply.error])
        else:
            try:
                attempt = await evaluate(reply)
            except BadReply as exc:
                attempt = Attempt(None, [f"Generation failed: invalid response format: {exc}"])
            except Exception as exc:  # noqa: BLE001 - a check that breaks is one failed attempt
                attempt = Attempt(None, [f"checking the attempt failed: {type(exc).__name__}: {exc}"])
        ctx.report(AttemptEvent(scenario, stage, number, attempt.ok, attempt.errors[:50],
                                None if attempt.score == float("inf") else attempt.score,
                                reply.usage.prompt_tokens, reply.usage.completion_tokens,
                                time.perf_counter() - started, task, time.time()).to_dict())
        for error in attempt.errors:
            if error not in history:
                history.append(error)
        if attempt.value is not None and (best is None or attempt.score < best.score
                                          or (prefer_last and attempt.score <= best.score)):
            best, chosen = attempt, number
        if attempt.ok:
            return Outcome("done", attempt, number, number, None)
    last_error = history[-1] if history else None
    if best is None:
        return Outcome("failed", None, total, None, last_error)
    return Outcome("kept", best, total, chosen, last_error)


def conversation(system: str, stage: str, scenario: str, body: str, task: int | None = None
                 ) -> Callable[[int, int, str | None], list[dict[str, Any]]]:
    """The messages of attempt ``number`` of ``total``: the stage's system prompt, then ``body`` under the
    attempt's header with the guidance from earlier errors (the body is built once, not per attempt)."""
    def messages(number: int, total: int, guidance: str | None) -> list[dict[str, Any]]:
        return [{"role": "system", "content": system},
                {"role": "user", "content": user_message(stage, scenario, number, total, guidance, body, task)}]
    return messages


def user_message(stage: str, scenario: str, number: int, total: int, guidance: str | None, body: str,
                 task: int | None = None) -> str:
    return prompts.header(stage, scenario, number, total, task) + "\n" + body + prompts.guidance_block(guidance)
