"""Model endpoints: command-line flags, named endpoints in a TOML file, or OPENAI_BASE_URL / OPENAI_API_KEY.

Config file (``AWM_CONFIG``, else ``$XDG_CONFIG_HOME/awm/config.toml``, else ``~/.config/awm/config.toml``)::

    [endpoints.local-qwen]
    base_url = "http://127.0.0.1:8000/v1"
    model = "Qwen/Qwen3-8B"
    api_key_env = "VLLM_API_KEY"     # or api_key = "..."; default: OPENAI_API_KEY, else "EMPTY"
    mode = "meta"                     # meta | native (default for this endpoint)
    temperature = 1.0
    max_tokens = 2048
    system_prompt_file = "prompts/qwen-awm.txt"   # the exact system prompt this model was trained with

    [agent]
    system_prompt_file = "..."        # the default for every endpoint (``--system-prompt FILE`` wins)

    [judge]
    endpoint = "local-qwen"           # the endpoint the LLM judge uses by default
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    pass


@dataclass
class Endpoint:
    base_url: str
    model: str
    api_key: str = "EMPTY"
    name: str | None = None
    mode: str = "meta"
    temperature: float = 1.0
    max_tokens: int = 2048
    timeout: float = 120.0
    max_retries: int = 3
    max_connections: int = 16
    extra_body: dict[str, Any] = field(default_factory=dict)
    system_prompt_file: str | None = None

    def public(self) -> dict[str, Any]:
        """Everything but the key (safe to write into run directories)."""
        return {"name": self.name, "base_url": self.base_url, "model": self.model, "mode": self.mode,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "max_retries": self.max_retries}


def config_path() -> Path:
    if os.environ.get("AWM_CONFIG"):
        return Path(os.environ["AWM_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "awm" / "config.toml"


def load_config(path: Path | None = None) -> dict[str, Any]:
    path = path or config_path()
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def endpoint_names(config: dict[str, Any] | None = None) -> list[str]:
    config = load_config() if config is None else config
    return sorted((config.get("endpoints") or {}).keys())


# the AWM reference agent's OpenAI client: 600 s per request, 2 retries (awm's own default: 120 s, 3)
REFERENCE_CLIENT = {"timeout": 600.0, "max_retries": 2}


def resolve_endpoint(name: str | None = None, base_url: str | None = None, model: str | None = None,
                     api_key: str | None = None, mode: str | None = None, config: dict[str, Any] | None = None,
                     defaults: dict[str, Any] | None = None, **overrides: Any) -> Endpoint:
    """Flags win over the named endpoint, which wins over ``defaults`` (e.g. ``REFERENCE_CLIENT``), which win over
    Endpoint's own; the URL and key fall back to OPENAI_BASE_URL / OPENAI_API_KEY."""
    config = load_config() if config is None else config
    named: dict[str, Any] = {}
    if name:
        named = (config.get("endpoints") or {}).get(name)
        if named is None:
            known = ", ".join(endpoint_names(config)) or "none"
            raise ConfigError(f"no endpoint {name!r} in {config_path()} (known: {known})")
    url = base_url or named.get("base_url") or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise ConfigError("no model endpoint: pass --base-url or --endpoint NAME, or set OPENAI_BASE_URL")
    chosen_model = model or named.get("model") or os.environ.get("AWM_MODEL")
    if not chosen_model:
        raise ConfigError("no model name: pass --model or set 'model' in the endpoint config")
    key = api_key or named.get("api_key")
    if not key and named.get("api_key_env"):
        key = os.environ.get(named["api_key_env"])
    key = key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    fields = dict(defaults or {})
    fields.update({k: named[k] for k in ("temperature", "max_tokens", "timeout", "max_retries", "max_connections",
                                         "extra_body", "system_prompt_file")
                   if k in named})
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return Endpoint(base_url=url, model=chosen_model, api_key=key, name=name, mode=mode or named.get("mode", "meta"),
                    **fields)


def judge_endpoint(config: dict[str, Any] | None = None, **flags: Any) -> Endpoint | None:
    """The judge's endpoint: flags, else ``[judge] endpoint``, else OPENAI_BASE_URL + AWM_JUDGE_MODEL; None if
    nothing is configured (verification then falls back to code mode)."""
    config = load_config() if config is None else config
    name = flags.pop("name", None) or (config.get("judge") or {}).get("endpoint")
    base_url = flags.pop("base_url", None)
    model = flags.pop("model", None) or os.environ.get("AWM_JUDGE_MODEL")
    if not (name or base_url or (os.environ.get("OPENAI_BASE_URL") and model)):
        return None
    return resolve_endpoint(name=name, base_url=base_url, model=model, config=config, **flags)


def read_system_prompt(flag: str | None = None, endpoint: Endpoint | None = None,
                       config: dict[str, Any] | None = None) -> str | None:
    """The custom system prompt: ``--system-prompt FILE``, else the endpoint's ``system_prompt_file``, else
    ``[agent] system_prompt_file``; None means awm's own prompt."""
    config = load_config() if config is None else config
    path = flag or (endpoint.system_prompt_file if endpoint else None) or \
        (config.get("agent") or {}).get("system_prompt_file")
    if not path:
        return None
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the system prompt {path}: {exc}") from None
    if not text.strip():
        raise ConfigError(f"the system prompt {path} is empty")
    return text
