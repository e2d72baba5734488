"""Turn a FastAPI app's OpenAPI document into MCP tool definitions, and tool arguments into HTTP requests.

The rules reproduce what fastapi-mcp 0.4.0 does for AWM environments (spec/awm-format.md §4.3):
tool name = operationId; description = summary (or "METHOD path") + description + the first 2xx
response with an example; input schema = path, query and header parameters plus the *flattened*
fields of the JSON request body. Calls put path parameters in the URL, query/header parameters in
their places, and every remaining argument in the JSON body (dropped for GET and DELETE).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from awm_engine.data import codeinfo

HTTP_METHODS = ("get", "post", "put", "delete", "patch")
_DISPLAY_DROP = ("allOf", "anyOf", "oneOf", "nullable", "discriminator", "readOnly", "writeOnly", "xml", "externalDocs")


@dataclass
class ToolSpec:
    """One MCP tool derived from one HTTP route."""

    name: str
    description: str
    input_schema: dict[str, Any]
    method: str
    path: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""

    def to_mcp(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    @property
    def required(self) -> list[str]:
        return list(self.input_schema.get("required", []))

    @property
    def properties(self) -> dict[str, Any]:
        return self.input_schema.get("properties", {})


def inline_refs(node: Any, document: dict[str, Any]) -> Any:
    """Replace every ``#/components/schemas/X`` reference with a copy of X (one level per visit, recursively)."""
    if isinstance(node, list):
        return [inline_refs(item, document) if isinstance(item, dict) else item for item in node]
    if not isinstance(node, dict):
        return node
    out = dict(node)
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        target = document.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[-1])
        if target is not None:
            del out["$ref"]
            out.update(dict(target))
    return {key: inline_refs(value, document) if isinstance(value, (dict, list)) else value for key, value in out.items()}


def _display_schema(schema: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k not in _DISPLAY_DROP}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _display_schema(v) if isinstance(v, dict) else v for k, v in out["properties"].items()}
    if out.get("type") == "array" and isinstance(out.get("items"), dict):
        out["items"] = _display_schema(out["items"])
    return out


def example_for(schema: Any) -> Any:
    """A placeholder value shaped like ``schema`` (strings use their title)."""
    if not isinstance(schema, dict) or not schema:
        return None
    kind = schema.get("type")
    if kind == "object":
        result = {}
        for name, sub in schema.get("properties", {}).items():
            value = example_for(sub)
            if value is not None:
                result[name] = value
        return result
    if kind == "array":
        item = example_for(schema["items"]) if "items" in schema else None
        return [item] if item is not None else []
    if kind == "string":
        return {"date-time": "2023-01-01T00:00:00Z", "date": "2023-01-01", "email": "user@example.com",
                "uri": "https://example.com"}.get(schema.get("format"), schema.get("title", "string"))
    return {"integer": 1, "number": 1.0, "boolean": True}.get(kind)


def _first_type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        kinds = [s.get("type") for s in schema["anyOf"] if s.get("type") and s.get("type") != "null"]
        return kinds[0] if kinds else "string"
    return schema.get("type", "string")


def _responses_text(responses: dict[str, Any]) -> str:
    success_code = next((str(c) for c in range(200, 300) if str(c) in responses), None)
    chosen = {success_code: responses[success_code]} if success_code else responses
    text = "\n\n### Responses:\n"
    for code, data in chosen.items():
        text += f"\n**{code}**: {data.get('description', '')}"
        if success_code is not None and data == responses[success_code]:
            text += " (Success Response)"
        for content_type, content in data.get("content", {}).items():
            if "schema" not in content:
                continue
            text += f"\nContent-Type: {content_type}"
            example = None
            if "examples" in content:
                example = next((e["value"] for e in content["examples"].values() if "value" in e), None)
            elif "example" in content:
                example = content["example"]
            if not example:
                example = example_for(_display_schema(content["schema"]))
            if example:
                text += "\n\n**Example Response:**\n```json\n" + json.dumps(example, indent=2) + "\n```"
    return text


def _property(param_name: str, schema: dict[str, Any], description: str, type_default: str) -> dict[str, Any]:
    prop = dict(schema)
    prop["title"] = param_name
    if description:
        prop["description"] = description
    if "type" not in prop:
        prop["type"] = type_default
    return prop


def tools_from_openapi(document: dict[str, Any]) -> list[ToolSpec]:
    """Every operation with an operationId and an HTTP method, in document order."""
    resolved = inline_refs(document, document)
    tools: list[ToolSpec] = []
    for path, item in resolved.get("paths", {}).items():
        for method, op in item.items():
            if method not in HTTP_METHODS or not op.get("operationId"):
                continue
            name = op["operationId"]
            summary = op.get("summary", "")
            description = summary or f"{method.upper()} {path}"
            if op.get("description"):
                description += "\n\n" + op["description"]
            if op.get("responses"):
                description += _responses_text(op["responses"])
            properties: dict[str, Any] = {}
            required: list[str] = []
            params = op.get("parameters", [])
            for where in ("path", "query"):
                for p in (p for p in params if p.get("in") == where):
                    schema = p.get("schema", {})
                    prop = _property(p["name"], schema, p.get("description", ""),
                                     schema.get("type", "string") if where == "path" else _first_type(schema))
                    properties[p["name"]] = prop
                    if p.get("required", where == "path"):
                        required.append(p["name"])
            body = op.get("requestBody") or {}
            content = body.get("content") or {}
            if content:
                schema = next(iter(content.values())).get("schema", {})
                for prop_name, prop_schema in schema.get("properties", {}).items():
                    properties[prop_name] = _property(prop_name, prop_schema, "", _first_type(prop_schema))
                    if prop_name in schema.get("required", []):
                        required.append(prop_name)
            input_schema: dict[str, Any] = {"type": "object", "properties": properties, "title": f"{name}Arguments"}
            if required:
                input_schema["required"] = required
            tools.append(ToolSpec(name=name, description=description, input_schema=input_schema,
                                  method=method, path=path, parameters=params, summary=summary))
    return tools


def input_schema_error(schema: Any) -> str | None:
    """Why ``schema`` is not valid JSON Schema, in the words the reference gives for every call to such a tool.

    The reference's MCP server (mcp's low-level ``call_tool``, under fastapi-mcp) runs
    ``jsonschema.validate(arguments, inputSchema)``, which first checks the schema itself against its
    metaschema (``check_schema``); the ``SchemaError`` is caught by the generic handler and its ``str()``
    becomes the error result. None when the schema is valid. E.g. ``Path(..., examples={"example": {"value":
    15}})`` gives ``{'example': {'value': 15}} is not of type 'array'`` followed by where it failed.
    """
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except Exception as exc:  # noqa: BLE001 - SchemaError, or anything else: the reference shows str(exc)
        return str(exc)
    return None


def static_schema_errors(code: str | None) -> dict[str, str]:
    """Tools whose input schema is not valid JSON Schema, found without running the code (from literal
    ``examples=`` / ``json_schema_extra=`` of their parameters): tool name -> ``input_schema_error`` text.
    A loaded environment's own schemas (``awm env test``) are the exact answer."""
    try:
        extras = codeinfo.static_schema_extras(code or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    return {name: error for name, schema in extras.items() if (error := input_schema_error(schema)) is not None}


def schema_problem_note(error: str) -> str:
    """One line for front ends that flag such a tool."""
    first = error.strip().split("\n", 1)[0] if error.strip() else "?"
    return f"input schema is not valid JSON Schema: {first}; uncallable under the reference"


@dataclass
class HttpCall:
    method: str
    path: str
    query: dict[str, Any]
    headers: dict[str, Any]
    body: Any


def http_call_for(tool: ToolSpec, arguments: dict[str, Any] | None) -> HttpCall:
    """Map tool arguments onto an HTTP request the way fastapi-mcp 0.4.0 does."""
    args = copy.copy(arguments) if arguments else {}
    path = tool.path
    query: dict[str, Any] = {}
    headers: dict[str, Any] = {}
    for p in tool.parameters:
        name = p.get("name")
        if name not in args:
            continue
        if p.get("in") == "path":
            path = path.replace("{" + name + "}", str(args.pop(name)))
        elif p.get("in") == "query":
            query[name] = args.pop(name)
        elif p.get("in") == "header":
            headers[name] = args.pop(name)
    body = args or None
    if tool.method in ("get", "delete"):
        body = None
    return HttpCall(method=tool.method, path=path, query=query, headers=headers, body=body)
