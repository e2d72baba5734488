"""Example arguments for a tool, read from its JSON input schema (health checks, play forms, doctors).

Generated schemas are untrusted: ``examples`` may be a list (JSON Schema) or an OpenAPI-style mapping
``{"name": {"value": ...}}``, ``properties`` may be missing or not a mapping; nothing here raises.
"""
from __future__ import annotations

from typing import Any

PLACEHOLDERS = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}, "string": "string"}


def property_type(prop: Any) -> str:
    """The property's JSON type, looking through ``anyOf`` (``null`` skipped); ``string`` when unknown."""
    if not isinstance(prop, dict):
        return "string"
    kind = prop.get("type")
    if isinstance(kind, str) and kind != "null" and not prop.get("anyOf"):
        return kind
    options = prop.get("anyOf")
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and isinstance(option.get("type"), str) and option["type"] != "null":
            return option["type"]
    return kind if isinstance(kind, str) else "string"


_MISSING = object()


def first_example(prop: Any) -> Any:
    """The property's first example (list or OpenAPI mapping), else its ``example``; ``_MISSING`` if none."""
    if not isinstance(prop, dict):
        return _MISSING
    examples = prop.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if isinstance(examples, dict) and examples:
        first = next(iter(examples.values()))
        return first.get("value", first) if isinstance(first, dict) else first
    if "example" in prop:
        return prop["example"]
    return _MISSING


def schema_properties(schema: Any) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def required_names(schema: Any) -> set[str]:
    required = schema.get("required") if isinstance(schema, dict) else None
    return {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()


def example_arguments(schema: Any) -> dict[str, Any]:
    """Arguments from a tool's input schema: each property's example or default, placeholders for required rest."""
    args: dict[str, Any] = {}
    required = required_names(schema)
    for name, prop in schema_properties(schema).items():
        example = first_example(prop)
        if example is not _MISSING:
            args[name] = example
        elif isinstance(prop, dict) and prop.get("default") is not None:
            args[name] = prop["default"]
        elif name in required:
            args[name] = PLACEHOLDERS.get(property_type(prop), "string")
    return args
