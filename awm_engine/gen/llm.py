"""The generation model client: any OpenAI-compatible endpoint, with usage accounting per stage and scenario.

A failed request never raises into a stage: it comes back as a ``Reply`` with ``error`` set (after the client's
own retries), so the stage counts it as a failed attempt and goes on.
"""
from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from awm_engine.gen.records import Usage


@dataclass
class Reply:
    text: str
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    seconds: float = 0.0


class GenClient:
    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", temperature: float = 1.0,
                 max_requests: int = 16, timeout: float = 600.0, retries: int = 2, waits: int = 5,
                 first_wait: float = 2.0):
        from openai import AsyncOpenAI

        self.base_url = base_url
        # an endpoint that is rate-limited, overloaded or unreachable is waited for (2, 4, 8 … s, ``waits`` times)
        # before the request counts as a failed attempt: a busy provider must not use up a stage's retries
        self.waits = max(0, waits)
        self.first_wait = first_wait
        self.model = model
        self.temperature = temperature
        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout,
                                  max_retries=retries)
        self.limit = asyncio.Semaphore(max(1, max_requests))
        # (stage, scenario) -> tokens used
        self.usage: dict[tuple[str, str], Usage] = defaultdict(Usage)

    async def chat(self, messages: list[dict[str, Any]], stage: str, scenario: str, max_tokens: int = 16000) -> Reply:
        import openai

        started = time.perf_counter()
        for wait in range(self.waits + 1):
            try:
                async with self.limit:
                    response = await self.client.chat.completions.create(
                        model=self.model, messages=messages, temperature=self.temperature, max_tokens=max_tokens)
                break
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as exc:
                if wait < self.waits:
                    await asyncio.sleep(min(60.0, self.first_wait * 2 ** wait))
                    continue
                return Reply("", error=f"request to {self.base_url} failed (after {self.waits} waits): "
                                       f"{type(exc).__name__}: {str(exc)[:300]}", seconds=time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - an endpoint failure is one failed attempt, never a crash
                return Reply("", error=f"request to {self.base_url} failed: {type(exc).__name__}: {str(exc)[:300]}",
                             seconds=time.perf_counter() - started)
        usage = Usage(requests=1)
        if getattr(response, "usage", None) is not None:
            usage.prompt_tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
            usage.completion_tokens = int(getattr(response.usage, "completion_tokens", 0) or 0)
        self.usage[(stage, scenario)].add(usage)
        choices = getattr(response, "choices", None) or []
        if not choices:
            return Reply("", usage=usage, error="the reply has no choices", seconds=time.perf_counter() - started)
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        return Reply(text if isinstance(text, str) else str(text), getattr(choice, "finish_reason", None), usage,
                     seconds=time.perf_counter() - started)

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        async with self.limit:
            response = await self.client.embeddings.create(model=model, input=texts)
        return [list(d.embedding) for d in response.data]

    async def close(self) -> None:
        await self.client.close()
