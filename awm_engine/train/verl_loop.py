"""A verl agent loop over the Gym-style API: AWM episodes as verl rollouts (``agent_name: awm_agent``).

Follows the interface of verl 0.9.1 (``verl.experimental.agent_loop.agent_loop``): a subclass of
``AgentLoopBase`` registered with ``@register("awm_agent")``, built by verl per sample with
``trainer_config``, ``server_manager``, ``tokenizer`` … plus the keys of its entry in the agent-loop config
file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``) as keyword arguments; ``run(sampling_params,
**dataset_fields)`` returns an ``AgentLoopOutput`` (``prompt_ids``, ``response_ids``, ``response_mask``,
``response_logprobs``, ``reward_score``, ``num_turns``, ``metrics``, ``extra_fields``). Generation is
token-in/token-out through ``server_manager.generate(request_id=…, prompt_ids=…, sampling_params=…)`` (its
``token_ids`` / ``log_probs``).

One ``run`` is one episode: the row's ``scenario`` and ``task_id`` (top level, or in ``extra_info``) name the
task; the episode lives in a session registry keyed by the run's request id (verl releases tool instances after
every call, spec/engine-notes.md B.5) and is released in a ``finally``. Each turn the model's tokens are decoded
and stepped through ``AWMEnv`` (the protocol, format errors and limits of ``awm agent run``); the tool result is
appended as tokens with mask 0. The episode's reward (−1.0 for a format error with early termination) is the
``reward_score``, so verl's reward manager is not consulted. A verl trajectory is one append-only token sequence,
so the model sees the whole history (no window); history-window training uses ``awm train export --window 3``.

Importing this module without verl installed is fine; ``AWMAgentLoop`` is then ``None`` and
``require_verl()`` says how to get it.
"""
from __future__ import annotations

import asyncio
import importlib
from typing import Any
from uuid import uuid4

from awm_engine.train.gym import AWMEnv
from awm_engine.train.sessions import SessionRegistry, catalog_for, pool_for_loop
from awm_engine.train.tasks import AGENT_NAME, EnvSettings, task_key

VERL_INTERFACE = "verl 0.9.1"
SESSIONS = SessionRegistry()  # one per process: verl's agent-loop workers are processes (Ray actors)


def require_verl():
    """verl's agent-loop module. verl is the trainer that imports awm, never a dependency of awm (it brings torch,
    Ray and an inference engine): it is looked up at run time, in the process verl runs."""
    try:
        return importlib.import_module("verl.experimental.agent_loop.agent_loop")
    except ImportError:
        raise ImportError(f"the verl agent loop needs verl ({VERL_INTERFACE}): pip install verl") from None


def _ids(value: Any) -> list[int]:
    """``apply_chat_template(tokenize=True)``'s ids, whichever shape this transformers returns."""
    if isinstance(value, dict) or hasattr(value, "keys"):
        value = value["input_ids"]
    return [int(t) for t in value]


def define_agent_loop(base: type, output_cls: type, metrics_cls: type) -> type:
    """The agent-loop class over verl's ``AgentLoopBase`` (``base``), ``AgentLoopOutput`` and ``AgentLoopMetrics``."""

    class AWMAgentLoop(base):
        """AWM episodes as verl rollouts (see the module's docstring)."""

        def __init__(self, *args: Any, data_dirs: list[str] | None = None, protocol: str = "reference",
                     mode: str = "meta", max_turns: int | None = None, on_format_error: str = "observe",
                     tool_names: str = "reference", system_prompt: str | None = None, verify: str | None = "code",
                     workers: int | None = None, out_dir: str = "outputs/train/verl", base_url: str | None = None,
                     **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.settings = EnvSettings(list(data_dirs) if data_dirs else None, protocol, mode, max_turns,
                                        on_format_error, tool_names, system_prompt, verify, workers, out_dir,
                                        base_url)
            rollout = getattr(self, "rollout_config", None)
            self.response_length = int(getattr(rollout, "response_length", 0) or 0) or None
            self.template_kwargs = dict(getattr(self, "apply_chat_template_kwargs", None) or {})
            # what the chat template puts before any message (its default system prompt): cut from tool results
            self._prefix = _ids(self.tokenizer.apply_chat_template([{}], add_generation_prompt=False, tokenize=True,
                                                                   **self.template_kwargs))

        async def _encode(self, messages: list[dict[str, Any]]) -> list[int]:
            return _ids(await asyncio.to_thread(self.tokenizer.apply_chat_template, messages,
                                                add_generation_prompt=True, tokenize=True, **self.template_kwargs))

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
            scenario, task_id = task_key(kwargs)
            s = self.settings
            env = AWMEnv(catalog_for(s.data_dirs), pool=await pool_for_loop(s.workers),
                         config=s.agent_config(history_window=None), verify=s.verify, out_dir=s.out_dir,
                         base_url=s.base_url)
            request_id = uuid4().hex
            messages, info = await SESSIONS.open(request_id, env, scenario, task_id)
            prompt_ids = await self._encode(messages)
            response_ids: list[int] = []
            mask: list[int] = []
            logprobs: list[float] = []
            have_logprobs = False
            reward, stop, turns = 0.0, None, 0
            try:
                while True:
                    if self.response_length is not None and len(response_ids) >= self.response_length:
                        stop = "response_length"  # out of room: the episode is cut, unverified, reward 0
                        break
                    out = await self.server_manager.generate(request_id=request_id,
                                                             prompt_ids=prompt_ids + response_ids,
                                                             sampling_params=sampling_params)
                    tokens = [int(t) for t in out.token_ids]
                    response_ids += tokens
                    mask += [1] * len(tokens)
                    have_logprobs = have_logprobs or bool(getattr(out, "log_probs", None))
                    logprobs += list(getattr(out, "log_probs", None) or [0.0] * len(tokens))
                    text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                    messages, reward, terminated, truncated, info = await env.step(text)
                    turns += 1
                    if terminated or truncated:
                        stop = info.get("stop_reason")
                        break
                    # the tool result(s) and the next generation prompt, as the chat template renders them
                    rendered = await self._encode(info["new_messages"])
                    observation = rendered[len(self._prefix):] if rendered[:len(self._prefix)] == self._prefix \
                        else rendered
                    response_ids += observation
                    mask += [0] * len(observation)
                    logprobs += [0.0] * len(observation)
            finally:
                await SESSIONS.release(request_id)
            n = self.response_length or len(response_ids)
            return output_cls(
                prompt_ids=prompt_ids, response_ids=response_ids[:n], response_mask=mask[:n],
                response_logprobs=logprobs[:n] if have_logprobs else None, reward_score=float(reward),
                num_turns=2 * turns + 1, metrics=metrics_cls(),
                extra_fields={"awm": {"scenario": scenario, "task_id": task_id, "stop_reason": stop,
                                      "label": info.get("label"), "has_verdict": info.get("has_verdict"),
                                      "run_dir": info.get("run_dir"), "turns": turns,
                                      "settings": s.to_dict()}})

    AWMAgentLoop.__name__ = AWMAgentLoop.__qualname__ = "AWMAgentLoop"
    return AWMAgentLoop


def register_agent_loop(registry: dict[str, Any], cls: type, name: str = AGENT_NAME) -> dict[str, Any]:
    """Put ``cls`` in verl's agent-loop registry under ``name`` without overwriting a configured entry.

    verl's ``register`` decorator sets ``registry[name] = {"_target_": …}`` unconditionally. verl reads the
    agent-loop config file (``agent_loop_config_path``) into the same registry, and this module may be imported
    (by hydra's ``instantiate`` of the ``_target_``) after that: a plain ``register`` would then replace the yaml's
    keys (``data_dirs``, ``on_format_error``, ``workers`` …) with the defaults from the second rollout on. So an
    existing entry is kept as it is (its ``_target_`` is set only if it has none); only a missing entry is added.
    Returns the entry."""
    target = f"{cls.__module__}.{cls.__qualname__}"
    entry = registry.get(name)
    if entry is None:
        entry = registry[name] = {"_target_": target}
    elif "_target_" not in entry:
        entry["_target_"] = target
    return entry


try:
    _verl = require_verl()
except ImportError:
    AWMAgentLoop = None
else:
    AWMAgentLoop = define_agent_loop(_verl.AgentLoopBase, _verl.AgentLoopOutput, _verl.AgentLoopMetrics)
    register_agent_loop(_verl._agent_loop_registry, AWMAgentLoop)
