"""MCP server definitions: the common ``{"mcpServers": {...}}`` JSON shape and MCP-Universe's ``server_list.json``.

``{"mcpServers": {"name": {"command": …, "args": […], "env": {…}}}}`` (stdio) or
``{"name": {"url": …, "headers": {…}}}`` (streamable HTTP; ``"type": "http"`` / ``"streamable-http"``
optional). ``server_list.json`` maps a name to ``{"stdio": {"command", "args"}, "env": {…}}`` (optional
``http_url`` and ``headers``; its ``sse`` entries need MCP-Universe's gateway and are not used).

``${VAR}`` and ``{{VAR}}`` placeholders in commands, arguments, env values, URLs and headers are filled from
the environment — never with awm's own model credentials (``placeholder_environment``: a servers file, a task file
or an evaluator config is data, and must not be able to hand awm's key to a networked server, to a URL of its
choosing or to the run directory). An unset variable in the command line or the URL stops the server from being started
(``ServerDef.missing``); an env value or header that still needs an unset variable is left out, as MCP-Universe
starts such servers anyway (``ServerDef.unset``: the server may then fail on its own). The variables a server
declares (its ``env``) are the only ones its sandboxed process receives.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class ServerConfigError(ValueError):
    pass


def credential_variables() -> set[str]:
    """The variables awm reads model keys from: ``OPENAI_API_KEY`` (every endpoint's and the judge's fallback),
    ``EMBEDDING_OPENAI_API_KEY`` and each configured endpoint's ``api_key_env``."""
    from awm_engine.agent.endpoints import ConfigError, load_config

    names = {"OPENAI_API_KEY", "EMBEDDING_OPENAI_API_KEY"}
    try:
        endpoints = load_config().get("endpoints") or {}
    except (ConfigError, OSError):
        endpoints = {}
    for named in endpoints.values() if isinstance(endpoints, dict) else []:
        if isinstance(named, dict) and isinstance(named.get("api_key_env"), str):
            names.add(named["api_key_env"])
    return names


def withheld(environ: Mapping[str, str] | None = None) -> tuple[set[str], set[str]]:
    """(names, values) no placeholder is filled with: awm's model credentials (``credential_variables``) and their
    values in ``environ`` (default: the environment), so that the same key under another name is withheld too."""
    environ = os.environ if environ is None else environ
    names = credential_variables()
    return names, {environ[name] for name in names if environ.get(name)} - {"EMPTY"}


def placeholder_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What placeholders in data are filled from: ``environ`` (default: the environment) without what ``withheld``
    names. A placeholder naming a withheld variable stays unset, as an unset variable does."""
    environ = os.environ if environ is None else environ
    names, values = withheld(environ)
    return {k: v for k, v in environ.items() if k not in names and v not in values}


@dataclass
class ServerDef:
    name: str
    transport: str  # stdio | http
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # unset variables of the command line or URL: cannot start
    unset: list[str] = field(default_factory=list)  # unset variables of env values or headers (those left out)
    cwd: str | None = None
    problem: str | None = None  # why the definition itself is unusable (its tasks error saying so)

    def to_dict(self) -> dict[str, Any]:
        """For run metadata: env and header values are never written (they carry keys)."""
        data = asdict(self)
        data["env"] = sorted(self.env)
        data["headers"] = sorted(self.headers)
        return data

    def check_startable(self) -> None:
        if self.problem:
            raise ServerConfigError(f"server {self.name}: {self.problem}")
        if self.transport == "stdio" and not self.command:
            raise ServerConfigError(f"server {self.name}: no command")
        if self.transport == "http" and not self.url:
            raise ServerConfigError(f"server {self.name}: no url")
        if self.missing:
            raise ServerConfigError(f"server {self.name}: unset variable(s) {', '.join(sorted(set(self.missing)))}")


def fill(text: str, env: Mapping[str, str], missing: list[str]) -> str:
    def sub(m: re.Match) -> str:
        var = m.group(1) or m.group(2)
        value = env.get(var)
        if not value:
            missing.append(var)
            return m.group(0)
        return value

    return _VAR.sub(sub, str(text))


def _shape_problem(entry: Any) -> str | None:
    """Why a server entry cannot be read (None when its fields have the types a definition needs)."""
    if not isinstance(entry, dict):
        return f"not an object (a {type(entry).__name__})"
    launch = entry["stdio"] if isinstance(entry.get("stdio"), dict) else entry
    for where, key, kind in ((launch, "command", str), (launch, "args", list), (entry, "env", dict),
                             (entry, "headers", dict), (entry, "url", str), (entry, "http_url", str),
                             (entry, "cwd", str)):
        value = where.get(key)
        if value is not None and not isinstance(value, kind):
            return f"{key} is a {type(value).__name__}, not a{'n' if kind is dict else ''} " + \
                {str: "string", list: "list", dict: "object"}[kind]
    if str(entry.get("type") or entry.get("transport") or "").lower() == "sse":
        return "SSE transport is not supported (use stdio or streamable HTTP)"
    return None


def _server(name: str, entry: dict[str, Any], env: Mapping[str, str]) -> ServerDef:
    problem = _shape_problem(entry)
    if problem is not None:
        return ServerDef(name=name, transport="stdio", problem=problem)
    missing: list[str] = []
    if "stdio" in entry and isinstance(entry["stdio"], dict):  # server_list.json
        launch = entry["stdio"]
    else:
        launch = entry
    url = entry.get("url") or entry.get("http_url") or entry.get("serverUrl")
    kind = str(entry.get("type") or entry.get("transport") or "").lower()
    transport = "http" if (url and not launch.get("command")) or kind in ("http", "streamable-http",
                                                                            "streamable_http") else "stdio"
    unset: list[str] = []

    def optional(values: dict[str, Any]) -> dict[str, str]:
        kept = {}
        for k, v in values.items():
            gaps: list[str] = []
            filled = fill(v, env, gaps)
            if gaps:
                unset.extend(gaps)
            else:
                kept[str(k)] = filled
        return kept

    server = ServerDef(
        name=name, transport=transport,
        command=fill(launch["command"], env, missing) if launch.get("command") else None,
        args=[fill(a, env, missing) for a in launch.get("args") or []],
        env=optional(entry.get("env") or {}),
        url=fill(url, env, missing) if url else None,
        headers=optional(entry.get("headers") or {}),
        cwd=entry.get("cwd"))
    server.missing, server.unset = sorted(set(missing)), sorted(set(unset))
    return server


def parse_servers(data: Any, env: Mapping[str, str] | None = None) -> dict[str, ServerDef]:
    """The file's servers, placeholders filled from ``env`` (default: ``placeholder_environment()``)."""
    env = placeholder_environment() if env is None else env
    if not isinstance(data, dict):
        raise ServerConfigError("a server file is a JSON object")
    entries = data.get("mcpServers", data) if isinstance(data.get("mcpServers", data), dict) else None
    if entries is None:
        raise ServerConfigError("mcpServers is not an object")
    # an unusable entry is kept with its problem: the tasks that need it error saying why, the others run
    return {str(name): _server(str(name), entry, env) for name, entry in entries.items()}


def load_servers(path: Path | str, env: Mapping[str, str] | None = None) -> dict[str, ServerDef]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ServerConfigError(f"cannot read server file {path}: {exc}") from None
    return parse_servers(data, env)
