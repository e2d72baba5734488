"""Static facts about a generated server module, read from its source without running it."""
from __future__ import annotations

import ast
import re
import threading
from typing import Any

from awm_engine.data.records import Tool, ToolParam

HTTP_METHODS = ("get", "post", "put", "patch", "delete")
_ROUTE_DECORATOR = re.compile(r"^[ \t]*@\w+\.(?:get|post|put|patch|delete)\(", re.MULTILINE)
_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


def count_routes(code: str) -> int:
    """Number of route decorators (``@app.get(`` …); cheap enough to run over 1,000 environments."""
    return len(_ROUTE_DECORATOR.findall(code or ""))


_ROUTE_WITH_PATH = re.compile(r"^[ \t]*@\w+\.(get|post|put|patch|delete)\(\s*(?:path\s*=\s*)?(['\"])(.*?)\2",
                              re.MULTILINE)


def count_mcp_tools(code: str) -> int:
    """Number of tools an MCP client sees: routes with the same method and path collapse into one (as with
    fastapi-mcp); a route whose path is not a literal counts on its own."""
    literal = {(m.group(1), m.group(3)) for m in _ROUTE_WITH_PATH.finditer(code or "")}
    return len(literal) + count_routes(code) - len(_ROUTE_WITH_PATH.findall(code or ""))


def _const(node: ast.AST | None):
    return node.value if isinstance(node, ast.Constant) else None


def _fastapi_default_id(func_name: str, path: str, method: str) -> str:
    return re.sub(r"\W", "_", f"{func_name}{path}") + f"_{method}"


def _is_required(default: ast.AST | None) -> bool:
    if default is None:
        return True
    if isinstance(default, ast.Call):
        first = default.args[0] if default.args else None
        if isinstance(first, ast.Constant) and first.value is Ellipsis:
            return True
        kw = {k.arg: k.value for k in default.keywords}
        if "default" in kw:
            return isinstance(kw["default"], ast.Constant) and kw["default"].value is Ellipsis
        return not default.args and "default_factory" not in kw
    return False


def _call_name(node: ast.AST | None) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return ""


def _description(node: ast.AST | None) -> str:
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "description" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
    return ""


def _model_fields(cls: ast.ClassDef) -> list[ToolParam]:
    fields = []
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.target.id == "model_config":
                continue
            fields.append(ToolParam(stmt.target.id, "body", ast.unparse(stmt.annotation),
                                    _is_required(stmt.value), _description(stmt.value)))
    return fields


def _routes(tree: ast.Module):
    """Each route of the module: (handler node, method, path, decorator keywords, tool name, [(param, default)])."""
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                    and deco.func.attr in HTTP_METHODS):
                continue
            method = deco.func.attr
            path = _const(deco.args[0]) if deco.args else None
            kw = {k.arg: k.value for k in deco.keywords}
            path = path if isinstance(path, str) else _const(kw.get("path")) or ""
            if kw.get("include_in_schema") is not None and _const(kw["include_in_schema"]) is False:
                continue
            name = _const(kw.get("operation_id")) or _fastapi_default_id(node.name, path, method)
            path_names = set(_PATH_PARAM.findall(path))
            params: list[tuple[ToolParam, ast.AST | None]] = []
            args = node.args.args
            defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
            for arg, default in zip(args, defaults):
                annotation = ast.unparse(arg.annotation) if arg.annotation else "Any"
                kind = _call_name(default)
                model = classes.get(annotation)
                if model is not None and kind not in ("Query", "Path"):
                    params.extend((field, None) for field in _model_fields(model))
                    continue
                location = "path" if arg.arg in path_names or kind == "Path" else "body" if kind == "Body" else "query"
                params.append((ToolParam(arg.arg, location, annotation, _is_required(default), _description(default)),
                               default))
            yield node, method, path, kw, str(name), params


def static_tools(code: str) -> list[Tool]:
    """Routes of the module in source order with their parameters (path, query, flattened body)."""
    tools: list[Tool] = []
    for node, method, path, kw, name, params in _routes(parse_or_empty(code)):
        tools.append(Tool(name=name, method=method.upper(), path=path,
                          summary=str(_const(kw.get("summary")) or ""),
                          description=str(_const(kw.get("description")) or ""),
                          params=[p for p, _ in params], handler=node.name, lineno=node.lineno))
    tools.sort(key=lambda t: t.lineno)
    last: dict[tuple[str, str], Tool] = {}
    for tool in tools:
        last[(tool.method, tool.path)] = tool
    for tool in tools:
        winner = last[(tool.method, tool.path)]
        if winner is not tool:
            tool.shadowed_by = winner.name
    return tools


_UNKNOWN = object()  # a keyword value that is not a literal


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def static_schema_extras(code: str) -> dict[str, dict[str, Any]]:
    """Per tool, the part of its MCP input schema that FastAPI copies unchecked from the source: literal
    ``examples=`` and ``json_schema_extra=`` of path and query parameters (``Path(..., examples={...})``).
    Each value is a partial input schema ``{"type": "object", "properties": {param: {...}}}`` (path parameters
    first, then query, as in the tool's input schema); tools without such keywords are left out."""
    out: dict[str, dict[str, Any]] = {}
    for _node, _method, _path, _kw, name, params in _routes(parse_or_empty(code)):
        properties: dict[str, Any] = {}
        for where in ("path", "query"):
            for param, default in params:
                if param.location != where or not isinstance(default, ast.Call):
                    continue
                keywords = {k.arg: _literal(k.value) for k in default.keywords if k.arg}
                prop: dict[str, Any] = {}
                extra = keywords.get("json_schema_extra")
                if isinstance(extra, dict):
                    prop.update(extra)
                if "examples" in keywords and keywords["examples"] is not _UNKNOWN and keywords["examples"] is not None:
                    prop["examples"] = keywords["examples"]
                if prop:
                    properties[param.name] = prop
        if properties:
            out[name] = {"type": "object", "properties": properties}
    return out


def handler_source(code: str, tool: Tool) -> str:
    """The source of a tool's handler, decorators included."""
    tree = parse_or_empty(code)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == tool.lineno:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            return "\n".join(code.splitlines()[start - 1:node.end_lineno])
    return ""


_PARSE_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time: concurrent parses in one process fail now and then on CPython 3.11
    (``SystemError: AST constructor recursion depth mismatch``)."""
    with _PARSE_LOCK:
        return ast.parse(source)


def compile_tree(tree: ast.Module, filename: str) -> Any:
    """``compile`` of a parsed module, under the same lock as ``parse`` (converting a tree back takes the same
    per-interpreter state that concurrent parses trip over). Equal to compiling the text the tree came from, with no
    ``__future__`` feature of this module's inherited (``dont_inherit``)."""
    with _PARSE_LOCK:
        return compile(tree, filename, "exec", dont_inherit=True)


def parse_or_empty(source: str) -> ast.Module:
    """The module's syntax tree, or an empty module when the code does not parse (its load reports why)."""
    try:
        return parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ast.Module(body=[], type_ignores=[])
