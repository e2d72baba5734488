"""A TRL environment over the Gym-style API: AWM episodes in ``GRPOTrainer(environment_factory=…)``.

Follows the interface of TRL 1.16.0 (``trl.GRPOTrainer``, argument ``environment_factory``): the factory is
called with no arguments and its instances are pooled and reused; ``reset(**row)`` starts an episode from the
dataset row (it returns ``None``: the task is already in the row's ``prompt``); every other public method is
a tool, described to the model from its type hints and docstring; reward functions receive the instances as
``environments``. ``trl_environment(...)`` builds the class: its two tools are AWM's meta-tools,
``list_tools()`` and ``call_tool(tool_name, arguments)``, so the model calls them with its own function-calling
format and each call is stepped through ``SyncAWMEnv`` as the ``<tool_call>`` turn the AWM protocol defines (a
call is one turn of the episode, with its limits and format errors). ``awm_reward(completions, environments)``
ends each episode with the completion's last assistant message as the final answer, verifies it and returns
the rewards (−1.0 for a format error with early termination). TRL keeps the whole conversation, so the
episodes run without a history window.

Nothing here imports TRL: the class only has to have the shape TRL reads.
"""
from __future__ import annotations

import json
from typing import Any

from awm_engine.train.gym import SharedPool, SyncAWMEnv
from awm_engine.train.sessions import catalog_for
from awm_engine.train.tasks import EnvSettings, task_key

TRL_INTERFACE = "TRL 1.16.0"


def _call_text(name: str, arguments: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def _final_text(completion: Any) -> str:
    """The last assistant message's text of a TRL completion (a message list, or plain text)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


class AWMTrlEnvironment:
    """The base of the classes ``trl_environment`` builds (``_settings`` and ``_pool`` are set there)."""

    _settings: EnvSettings = EnvSettings()
    _pool: SharedPool | None = None

    def __init__(self) -> None:
        s = self._settings
        self._env = SyncAWMEnv(catalog_for(s.data_dirs), shared_pool=self._pool,
                               config=s.agent_config(history_window=None), verify=s.verify, out_dir=s.out_dir,
                               base_url=s.base_url)
        self.reward: float | None = None
        self.info: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> None:
        scenario, task_id = task_key(kwargs)
        self.reward, self.info = None, {}
        self._env.reset(scenario, task_id)
        return None

    def list_tools(self) -> str:
        """
        List the tools of the environment with their parameters. Call it first, and only once.

        Returns:
            The available tools, one per entry, with their descriptions and parameters.
        """
        return self._act(_call_text("list_tools", {}))

    def call_tool(self, tool_name: str, arguments: str) -> str:
        """
        Call one tool of the environment.

        Args:
            tool_name: The name of the tool, as list_tools shows it.
            arguments: The tool's arguments as a JSON object in a string, e.g. '{"id": 3}'; '{}' when it has none.

        Returns:
            The tool's response.
        """
        return self._act(_call_text("call_tool", {"tool_name": tool_name, "arguments": arguments}))

    # -- not tools (private): the episode's end ----------------------------------------------------
    def _act(self, text: str) -> str:
        if not self._env.running:
            raise ValueError(f"The episode is over ({self.info.get('stop_reason', 'not started')}); "
                             "give your final answer.")
        _, reward, terminated, truncated, info = self._env.step(text)
        if terminated or truncated:
            self.reward, self.info = reward, info
        return info.get("tool_response") or ("Error: " + "; ".join(e["detail"] for e in info["format_errors"])
                                             if info.get("format_errors") else "")

    def _finish(self, final_answer: str) -> float:
        """End the episode with ``final_answer`` (verified) unless it already ended; the episode's reward."""
        for text in (final_answer, ""):  # a final text that still holds a call is executed; then end empty
            if not self._env.running:
                break
            _, reward, terminated, truncated, info = self._env.step(text)
            if terminated or truncated:
                self.reward, self.info = reward, info
        return float(self.reward or 0.0)


def trl_environment(data_dirs: list[str] | None = None, **settings: Any) -> type:
    """An environment class for ``GRPOTrainer(environment_factory=…)``; ``settings`` are ``EnvSettings``'
    fields (protocol, verify, max_turns, workers, out_dir …). Its instances share one pool of workers."""
    env_settings = EnvSettings(data_dirs=list(data_dirs) if data_dirs else None, **settings)
    return type("AWMEnvironment", (AWMTrlEnvironment,), {"_settings": env_settings,
                                                         "_pool": SharedPool(env_settings.workers)})


def awm_reward(completions: list[Any], environments: list[AWMTrlEnvironment], **kwargs: Any) -> list[float]:
    """A TRL reward function: each episode ends with its completion's final answer and is verified."""
    return [env._finish(_final_text(c)) for c, env in zip(completions, environments)]
