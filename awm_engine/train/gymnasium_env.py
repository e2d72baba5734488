"""A real ``gymnasium.Env`` over awm's episodes (``AWMGymEnv``; registered as ``awm/AWM-v0``).

It is the blocking ``SyncAWMEnv`` (``awm_engine.train.gym``: the same episode lifecycle as ``awm agent run``)
behind Gymnasium's interface; the async ``AWMEnv`` API is unchanged. Needs gymnasium (awm's ``train`` extra).

* **spaces** — ``observation_space`` and ``action_space`` are ``AnyText``: Gymnasium's ``Text`` space whose
  ``contains`` accepts any string (any Unicode character) of the allowed length, since tool results and model
  turns are arbitrary text; ``sample`` draws from printable ASCII (``Text``'s own sampling) and at most
  ``sample_length`` characters, so a sampled action is a short final answer.
* **reset(seed=…, options={"scenario": …, "task": …})** — seeds ``np_random`` (``super().reset``) and starts the
  episode of that scenario and task (an index). What ``options`` leaves out comes from the constructor's
  ``scenario``/``task``, and what those leave out is drawn with ``np_random`` among the catalog's tasks: the
  same seed starts the same task. ``options["run_dir"]`` chooses the run directory.
* **observation** — a string. ``observation="text"`` (default): what the environment said last — the task
  after ``reset``, the tool result after a step ("" at the end of the episode); ``observation="chat"``: the
  whole chat the model is to answer (history window applied) as JSON. Either way ``info["messages"]`` holds
  that chat as messages, as an OpenAI-compatible endpoint would receive them.
* **action** — a string: the assistant turn's text (meta mode: a ``<tool_call>…</tool_call>`` or the final
  answer). In native mode a string that is a JSON object with ``tool_calls`` (``{"content": …, "tool_calls":
  [{"id", "name", "arguments"}]}``) is that structured turn.
* **step** — ``(observation, reward, terminated, truncated, info)``: reward 0.0 until the end, then the verified
  reward (−1.0 for a format error with early termination); ``terminated`` on a final answer, a format error or a
  failure, ``truncated`` on ``max_turns`` or the episode timeout. After the end ``step`` raises
  ``EpisodeNotRunning`` until the next ``reset`` (no autoreset).
* **info** — only what the same seed and actions reproduce (``check_env`` compares it): ``scenario``,
  ``task_id``, ``task``, ``turn``, ``messages``, ``tools`` (after reset), ``tool_response``, ``format_errors``,
  and at the end ``stop_reason``, ``reward``, ``label``, ``has_verdict``, ``final_answer``. Where the episode is
  recorded is ``env.run_dir``; its verification report ``env.verification``.
* **render** — ``render_mode="ansi"``: the chat so far as text.
"""
from __future__ import annotations

import copy
import json
import string
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

from awm_engine.data.catalog import Catalog
from awm_engine.train.gym import EpisodeNotRunning, LoopThread, SharedPool, SyncAWMEnv

ENV_ID = "awm/AWM-v0"
OBSERVATIONS = ("text", "chat")
MAX_OBSERVATION = 2**31 - 1
SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"

__all__ = ["AWMGymEnv", "AnyText", "ENV_ID", "EpisodeNotRunning"]


class AnyText(spaces.Text):
    """``Text`` whose ``contains`` accepts any character (the charset is only what ``sample`` draws from) and whose
    ``sample`` draws at most ``sample_length`` characters (a length mask picks another)."""

    def __init__(self, max_length: int, *, min_length: int = 0, sample_length: int = 64,
                 charset: str = SAMPLE_CHARSET, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=charset, seed=seed)
        self.sample_length = max(min_length, min(sample_length, max_length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask=None, probability=None) -> str:
        chosen = mask if mask is not None else probability
        if chosen is None or chosen[0] is None:
            length = int(self.np_random.integers(self.min_length, self.sample_length + 1))
            chosen = (length, chosen[1] if chosen is not None else None)
            if mask is not None:
                mask = chosen
            elif probability is not None:
                probability = chosen
            else:
                mask = (length, None)
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length}, sample_length={self.sample_length})"

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, AnyText) and self.min_length == other.min_length
                and self.max_length == other.max_length and self.sample_length == other.sample_length)


def _text_action(action: Any, mode: str) -> Any:
    """A string action as the turn ``AWMEnv.step`` takes (native mode: a JSON turn with ``tool_calls``)."""
    if mode == "native" and isinstance(action, str) and action.lstrip().startswith("{"):
        try:
            parsed = json.loads(action)
        except ValueError:
            return action
        if isinstance(parsed, dict) and isinstance(parsed.get("tool_calls"), list):
            return parsed
    return action


class AWMGymEnv(gymnasium.Env):
    """One awm episode at a time as a Gymnasium environment (see the module's description).

    ``catalog``: the environments (default ``Catalog.load()``); ``scenario``/``task``: the defaults ``reset`` uses
    when its options name none; ``observation``: "text" or "chat"; ``max_action_length``: the action space's
    longest turn (characters); ``shared_pool``: an ``EnvPool`` holder shared with other environments (default: one
    of its own, closed by ``close``); the rest (``config``, ``verify``, ``judge``, ``rewards``, ``out_dir``,
    ``meta``, ``base_url``) as ``AWMEnv`` takes them."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, catalog: Catalog | None = None, *, scenario: str | None = None, task: int | None = None,
                 observation: str = "text", max_action_length: int = 65536, render_mode: str | None = None,
                 shared_pool: SharedPool | None = None, loop: LoopThread | None = None, **env_kwargs: Any):
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation is one of {', '.join(OBSERVATIONS)}, not {observation!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode is one of {self.metadata['render_modes']} or None, not {render_mode!r}")
        self.catalog = catalog or Catalog.load()
        self.tasks = [(s.key, t) for s in self.catalog for t in range(len(s.tasks))]
        if not self.tasks:
            raise ValueError("the catalog holds no tasks: nothing to reset to (check the data directories)")
        if scenario is not None:
            self.catalog.get(scenario)  # an unknown scenario is an error now, not at the first reset
        self.scenario, self.task = scenario, task
        self.observation = observation
        self.render_mode = render_mode
        self.observation_space = AnyText(MAX_OBSERVATION)
        self.action_space = AnyText(max_action_length, min_length=0)
        self._own_pool = shared_pool is None
        self._shared_pool = shared_pool or SharedPool(workers=1)
        self._env = SyncAWMEnv(self.catalog, loop=loop, shared_pool=self._shared_pool, **env_kwargs)
        self._messages: list[dict[str, Any]] = []
        self._closed = False
        self.run_dir: Path | None = None
        self.verification: dict[str, Any] | None = None

    # -- choosing the task ----------------------------------------------------------------------------
    def _choose(self, options: dict[str, Any]) -> tuple[str, int]:
        scenario = options.get("scenario", self.scenario)
        task = options.get("task", self.task)
        if scenario is None:
            candidates = [st for st in self.tasks if task is None or st[1] == task]
            if not candidates:
                raise ValueError(f"no scenario of the catalog has a task {task}")
            return candidates[int(self.np_random.integers(len(candidates)))]
        key = self.catalog.get(scenario).key
        if task is None:
            return key, int(self.np_random.integers(len(self.catalog.get(key).tasks)))
        if isinstance(task, bool) or not isinstance(task, int):
            raise TypeError(f"options['task'] is a task index (an int), not {task!r}")
        return key, task

    # -- the Gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        scenario, task = self._choose(options)
        messages, info = self._env.reset(scenario, task, run_dir=options.get("run_dir"))
        self.run_dir = Path(info["run_dir"])
        self.verification = None
        self._messages = messages
        text = (messages[-1].get("content") or "") if messages else ""
        out = {"scenario": info["scenario"], "task_id": info["task_id"], "task": info["task"], "turn": 1,
               "tools": info["tools"], "messages": messages}
        return self._observe(text), copy.deepcopy(out)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        messages, reward, terminated, truncated, info = self._env.step(_text_action(action, self._env.env.config.mode))
        self._messages = messages
        ended = terminated or truncated
        out = {"turn": info["turn"], "messages": messages, "tool_response": info.get("tool_response"),
               "format_errors": info.get("format_errors", [])}
        if ended:
            self.verification = info.get("verification")
            out.update({k: info.get(k) for k in ("stop_reason", "reward", "label", "has_verdict", "final_answer")})
            text = ""
        else:
            text = "\n\n".join(m.get("content") or "" for m in info.get("new_messages") or [])
        return self._observe(text), float(reward), bool(terminated), bool(truncated), copy.deepcopy(out)

    def _observe(self, text: str) -> str:
        if self.observation == "chat":
            return json.dumps(self._messages, ensure_ascii=False)
        return text

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(f"[{m.get('role')}] {m.get('content') or ''}" for m in self._messages)

    def close(self) -> None:
        """End a running episode (unverified) and, when the pool is this environment's own, its worker.
        Closing twice is allowed."""
        if self._closed:
            return
        self._closed = True
        self._env.close()
        if self._own_pool:
            self._env.loop.run(self._shared_pool.close())


def _register() -> None:
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=AWMGymEnv, nondeterministic=False)


_register()
