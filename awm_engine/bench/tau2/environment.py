"""A τ² domain environment in this process: the agent's toolkit over the domain database and, for telecom, the
user's toolkit over the phone, with τ²-bench's call semantics (spec §3, §4):

- ``get_response(name, arguments, requestor)``: the tool message's content and whether it is an error (any
  exception becomes ``Error: <text>``); a successful call is followed by ``sync_tools``;
- ``make_tool_call``: the call alone (no sync, exceptions propagate) — the gold replay uses it;
- ``run_env_function_call``: any public method a task names (set-up, assertion), followed by ``sync_tools``;
- ``set_state``: initialization data (deep-merged into the databases) and initialization actions, in order;
- ``db_hash`` / ``user_db_hash``: SHA-256 of the canonical JSON of each database.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from awm_engine.bench.tau2.airline import AirlineTools
from awm_engine.bench.tau2.models import updated_model
from awm_engine.bench.tau2.retail import RetailTools
from awm_engine.bench.tau2.tasks import EnvAssertion, EnvFunctionCall, Task
from awm_engine.bench.tau2.telecom import TelecomTools, TelecomUserTools, sync
from awm_engine.bench.tau2.toolkit import Toolkit, to_json_str

TOOLKITS: dict[str, type[Toolkit]] = {"airline": AirlineTools, "retail": RetailTools, "telecom": TelecomTools}


@dataclass
class Response:
    content: str
    error: bool


class Tau2Env:
    def __init__(self, domain: str, db: BaseModel, user_db: BaseModel | None = None):
        if domain not in TOOLKITS:
            raise ValueError(f"unknown τ² domain {domain!r}")
        self.domain = domain
        self.tools: Toolkit = TOOLKITS[domain](db)
        self.user_tools: TelecomUserTools | None = TelecomUserTools(user_db) if domain == "telecom" else None
        self.sync_tools()

    # -- tools ----------------------------------------------------------------------------------------
    def toolkit(self, requestor: str) -> Toolkit:
        if requestor == "user":
            if self.user_tools is None:
                raise ValueError("User tools not available")
            return self.user_tools
        if requestor == "assistant":
            return self.tools
        raise ValueError(f"Invalid requestor: {requestor}")

    def has_tool(self, name: Any) -> bool:
        return self.tools.has_tool(name) or (self.user_tools is not None and self.user_tools.has_tool(name))

    def is_mutating_tool(self, name: str) -> bool:
        for toolkit in (self.tools, self.user_tools):
            if toolkit is not None and toolkit.has_tool(name):
                return toolkit.tool_infos()[name].mutates_state
        return True

    def sync_tools(self) -> None:
        if self.domain == "telecom":
            sync(self.tools, self.user_tools)

    def make_tool_call(self, name: str, requestor: str = "assistant", **arguments: Any) -> Any:
        """The call alone: no sync, exceptions propagate."""
        return self.toolkit(requestor).use_tool(name, **arguments)

    def get_response(self, name: Any, arguments: Any, requestor: str = "assistant") -> Response:
        """A tool message: the serialized result, or ``Error: <exception>``; a call that succeeded is synced."""
        try:
            if not isinstance(arguments, dict):
                raise TypeError(f"the arguments of {name} must be an object, not {type(arguments).__name__}")
            result = self.make_tool_call(name, requestor, **arguments)
            self.sync_tools()
        except Exception as exc:  # noqa: BLE001 - every failure is the tool's error message
            return Response(f"Error: {exc}", True)
        try:
            return Response(to_json_str(result), False)
        except Exception as exc:  # noqa: BLE001
            return Response(f"Error: {exc}", True)

    def schemas(self, requestor: str = "assistant") -> list[dict[str, Any]]:
        toolkit = self.tools if requestor == "assistant" else self.user_tools
        return toolkit.schemas() if toolkit is not None else []

    # -- functions tasks name -------------------------------------------------------------------------
    def run_env_function_call(self, call: EnvFunctionCall) -> Any:
        toolkit = self.toolkit(call.env_type)
        name = call.func_name
        func = getattr(type(toolkit), name, None) if isinstance(name, str) and not name.startswith("_") else None
        if func is None or not callable(func):
            raise ValueError(f"Function {name} not found in {call.env_type} tools")
        result = getattr(toolkit, name)(**call.arguments)
        self.sync_tools()
        return result

    def run_env_assertion(self, assertion: EnvAssertion) -> bool:
        result = self.run_env_function_call(assertion)
        if not isinstance(result, bool):
            raise ValueError(f"Function {assertion.func_name} returned {type(result)} instead of bool")
        return result == assertion.assert_value

    def set_state(self, task: Task | None) -> None:
        """Apply the task's initial state: its data deep-merged into the databases, then its actions in order
        (each followed by ``sync_tools``). Raises when the task cannot be set up."""
        state = task.initial_state if task is not None else None
        if state is None:
            return
        data = state.initialization_data
        if data is not None:
            if data.agent_data is not None:
                self.tools.db = updated_model(self.tools.db, data.agent_data)
            if data.user_data is not None:
                toolkit = self.toolkit("user")
                toolkit.db = updated_model(toolkit.db, data.user_data)
        for action in state.initialization_actions or []:
            self.run_env_function_call(action)
        self.sync_tools()

    # -- state ----------------------------------------------------------------------------------------
    def db_hash(self) -> str | None:
        return self.tools.get_db_hash()

    def user_db_hash(self) -> str | None:
        return self.user_tools.get_db_hash() if self.user_tools is not None else None

    def databases(self) -> dict[str, BaseModel]:
        """The databases by name: ``db`` and, for telecom, ``user_db``."""
        out = {"db": self.tools.db}
        if self.user_tools is not None:
            out["user_db"] = self.user_tools.db
        return out


def build_env(domain_data, task: Task | None = None) -> Tau2Env:
    """A fresh environment of a ``data.DomainData`` with ``task``'s initial state applied."""
    env = Tau2Env(domain_data.name, domain_data.fresh_db(), domain_data.fresh_user_db())
    env.set_state(task)
    return env
