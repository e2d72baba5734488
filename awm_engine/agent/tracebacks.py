"""The traceback behind an environment error, carried from the tool result to the rollout's observation event.

``runtime.episode.ToolResult.traceback`` holds what a handler raised (an unhandled exception behind an HTTP
500, where a timed-out handler was stopped); ``TracedRollout`` records it on the ``Observation`` it emits
(``events.jsonl``), so replays, the TUI and ``awm replay`` can show it under the observation. The model's
messages never contain it: the observation text is untouched.
"""
from __future__ import annotations

from typing import Any

from awm_engine.agent.rollout import Rollout
from awm_engine.data.run_formats import Observation
from awm_engine.runtime.episode import EpisodeHandle, ToolResult


class _TracedEpisode:
    """Forwards everything to an episode and remembers the traceback of its last tool call."""

    def __init__(self, episode: EpisodeHandle):
        self._episode = episode
        self.last_traceback: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._episode, name)

    async def call_tool(self, *args: Any, **kwargs: Any) -> ToolResult:
        result = await self._episode.call_tool(*args, **kwargs)
        self.last_traceback = getattr(result, "traceback", None)
        return result


class TracedRollout(Rollout):
    """A ``Rollout`` whose observations carry the traceback of the tool call behind them."""

    def __init__(self, episode: EpisodeHandle, *args: Any, **kwargs: Any):
        super().__init__(_TracedEpisode(episode), *args, **kwargs)

    async def _execute(self, call) -> Observation:
        self.episode.last_traceback = None
        observation = await super()._execute(call)
        if getattr(observation, "traceback", None) is None:
            observation.traceback = self.episode.last_traceback
        return observation
