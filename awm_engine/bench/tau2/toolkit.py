"""Toolkits: a domain's tools as methods, each marked with its kind (read, write, generic) and awm's own schema.

What τ²-bench fixes and these reproduce (spec §3): the tool names and parameters; arguments reach the method
unvalidated (raw JSON values, as keyword arguments: an unknown or missing argument is Python's own
``TypeError``); any exception becomes the tool message ``Error: <exception text>`` (an error that counts towards
``max_errors``); an unknown tool is ``Error: Tool '<name>' not found.``; results serialize as ``to_json_str``
says. Only *write* tools mutate state and are replayed by the evaluator. The descriptions and schemas are awm's
own text.
"""
from __future__ import annotations

import ast
import datetime
import json
import math
import operator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from pydantic import BaseModel

from awm_engine.bench.tau2.models import db_hash


class ToolType(str, Enum):
    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"


@dataclass(frozen=True)
class ToolInfo:
    name: str
    kind: ToolType
    description: str
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> JSON schema (with description)
    required: tuple[str, ...] | None = None  # None: every parameter

    @property
    def mutates_state(self) -> bool:
        return self.kind == ToolType.WRITE

    def input_schema(self) -> dict[str, Any]:
        required = list(self.parameters) if self.required is None else list(self.required)
        return {"type": "object", "properties": dict(self.parameters), "required": required}

    def to_mcp(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema()}


TOOL_ATTR = "__tau2_tool__"


def tool(kind: ToolType, description: str, required: tuple[str, ...] | None = None, **parameters: dict[str, Any]):
    """Mark a method as a tool (its name is the method's name)."""

    def mark(func: Callable) -> Callable:
        setattr(func, TOOL_ATTR, ToolInfo(func.__name__, kind, description, parameters, required))
        return func

    return mark


def string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def integer(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


def number(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def array(description: str, items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "description": description, "items": items}


def obj(description: str, properties: dict[str, dict[str, Any]], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": properties,
            "required": list(properties) if required is None else required}


class Toolkit:
    """Base of every domain toolkit: ``db`` is its pydantic database."""

    def __init__(self, db: BaseModel | None):
        self.db = db

    @classmethod
    def tool_infos(cls) -> dict[str, ToolInfo]:
        infos: dict[str, ToolInfo] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                info = getattr(member, TOOL_ATTR, None)
                if info is not None:
                    infos[name] = info
        return dict(sorted(infos.items()))

    def has_tool(self, name: str) -> bool:
        return isinstance(name, str) and name in self.tool_infos()

    def tool_type(self, name: str) -> ToolType:
        return self.tool_infos()[name].kind

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if not self.has_tool(tool_name):
            raise ValueError(f"Tool '{tool_name}' not found.")
        return getattr(self, tool_name)(**kwargs)

    def schemas(self) -> list[dict[str, Any]]:
        return [info.to_mcp() for info in self.tool_infos().values()]

    def get_db_hash(self) -> str | None:
        return db_hash(self.db)


def to_json_str(resp: Any) -> str:
    """A tool's result as the tool message's content (τ²'s rules): a string as it is; otherwise models become
    ``model_dump()``, bare int/float/bool become strings (so they come out JSON-quoted), lists, tuples and dicts
    are processed recursively, dates become ISO text; then ``json.dumps(…, default=str)``."""

    def process(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(warnings=False)
        if isinstance(value, str) or value is None:
            return value
        if isinstance(value, (int, float, bool)):
            return str(value)
        if isinstance(value, list):
            return [process(v) for v in value]
        if isinstance(value, tuple):
            return tuple(process(v) for v in value)
        if isinstance(value, dict):
            return {k: process(v) for k, v in value.items()}
        if isinstance(value, (datetime.datetime, datetime.date)):
            return value.isoformat()
        raise ValueError(f"Unsupported type: {type(value)}")

    if isinstance(resp, str):
        return resp
    return json.dumps(process(resp), default=str)


# -- calculate: arithmetic on the characters 0-9 + - * / ( ) . and space ---------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_POWER_BITS = 100_000  # a power past this is refused (τ²'s eval would compute it for as long as it takes)


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and isinstance(left, (int, float)):
            size = abs(right) * math.log2(abs(left)) if abs(left) > 1 else 0
            if size > MAX_POWER_BITS:
                raise OverflowError("result too large")
        return _BINARY[type(node.op)](left, right)
    raise ValueError("Invalid expression")


def calculate_expression(expression: Any) -> str:
    """``calculate``: the result rounded to 2 decimals, as a string (τ² evaluates with Python's ``eval`` after the
    character check; the same grammar is evaluated here without ``eval``)."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    tree = compile(expression, "<string>", "eval", ast.PyCF_ONLY_AST)
    return str(round(float(_evaluate(tree)), 2))


CALCULATE_DESCRIPTION = ("Evaluate an arithmetic expression and return the result rounded to two decimal places. "
                         "Only digits, + - * /, parentheses, the decimal point and spaces are accepted.")
CALCULATE_PARAMS = {"expression": string("The arithmetic expression, for example '(120 + 35.5) * 2'.")}

TRANSFER_DESCRIPTION = ("Hand the conversation over to a human agent, with a summary of the customer's issue. "
                        "Use it only when the customer asks for a human, or when the policy and the tools at hand "
                        "cannot resolve the issue.")
TRANSFER_PARAMS = {"summary": string("A short summary of the customer's issue for the human agent.")}
