"""Generated environment code: the reference's line rewrites, a fit check for shared loading, and exec.

The reference launches ``full_code`` after two line-based rewrites (spec/awm-format.md §4.2): every
line containing ``create_engine(`` becomes ``<prefix>create_engine('sqlite:///<db>', connect_args=…)``
and every line containing ``uvicorn.run(app`` becomes a fixed 4-space-indented startup block that
mounts fastapi-mcp. awm applies the same rewrites so the released code behaves identically —
including the environments the rewrite breaks (a multi-line ``create_engine(`` call leaves a syntax
error, as it did for the reference).
"""
from __future__ import annotations

import ast
import itertools
import linecache
import sys
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

from awm_engine.data import codeinfo

PRELUDE = ["import warnings", "warnings.filterwarnings('ignore', category=DeprecationWarning)"]


def rewrite_code(code: str, db_path: str, host: str = "127.0.0.1", port: int = 8001) -> str:
    """The reference's patch of ``full_code`` for a server on ``db_path`` (line numbers shift by +2)."""
    out = list(PRELUDE)
    for line in code.split("\n"):
        if "create_engine(" in line:
            prefix = line[: line.index("create_engine(")]
            out.append(f"{prefix}create_engine('sqlite:///{db_path}', connect_args={{'check_same_thread': False}})")
        elif "uvicorn.run(app" in line:
            out.extend("    " + s for s in (
                "import os",
                f"host = os.environ.get('HOST', '{host}')",
                f"port = os.environ.get('PORT', {port})",
                "print(f'Server starting on port={port}')",
                "from fastapi_mcp import FastApiMCP",
                "mcp = FastApiMCP(app)",
                "mcp.mount_http()",
                "print(f'MCP server enabled, please visit http://{host}:{port}/mcp for the MCP service')",
                "uvicorn.run(app, host=host, port=int(port))",
            ))
        else:
            out.append(line)
    return "\n".join(out)


@dataclass
class CodeFit:
    """Whether one loaded module can serve many episodes by routing its session factory."""

    fits: bool
    engine_name: str | None = None
    session_name: str | None = None
    reasons: list[str] = field(default_factory=list)


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return ""


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class _Tree:
    """One breadth-first pass over a module (``ast.walk``'s order): each node's position, the outermost ``def``
    around it (or itself) and whether it lies in a function's body (a def's or a lambda's); the checks below read
    these instead of walking the module again for every function (a large module took a second)."""

    def __init__(self, tree: ast.AST):
        # ``ast.walk``'s order, without its generators: children are read from ``_fields`` here (a load's analysis
        # is on the path of every server's start)
        node_type, functions, defs = ast.AST, _FUNCTIONS, (ast.FunctionDef, ast.AsyncFunctionDef)
        order: list[ast.AST] = [tree]
        index: dict[int, int] = {id(tree): 0}
        outer_def: dict[int, ast.AST | None] = {}
        in_body: dict[int, bool] = {id(tree): False}
        above: dict[int, ast.AST | None] = {id(tree): None}  # the outermost def strictly above each node
        at = 0
        while at < len(order):
            node = order[at]
            at += 1
            here = id(node)
            outer = above[here]
            if outer is None and isinstance(node, defs):
                outer = node
            outer_def[here] = outer
            body_ids: set[int] | tuple = ()
            if isinstance(node, functions):
                body_ids = {id(b) for b in (node.body if isinstance(node.body, list) else [node.body])}
            inside = in_body[here]
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, node_type):
                    value = (value,)
                elif not isinstance(value, list):
                    continue
                for child in value:
                    if isinstance(child, node_type):
                        key = id(child)
                        above[key] = outer
                        in_body[key] = inside or key in body_ids
                        index[key] = len(order)
                        order.append(child)
        self.order, self.index, self.outer_def, self.in_body = order, index, outer_def, in_body

    def subtree(self, node: ast.AST) -> set[int]:
        out, todo = set(), [node]
        while todo:
            n = todo.pop()
            out.add(id(n))
            todo.extend(ast.iter_child_nodes(n))
        return out


def analyze_fit(tree: ast.Module) -> CodeFit:
    """Shared loading needs: one module-level ``E = create_engine(...)``, one ``S = sessionmaker(bind=E)``,
    ``E`` used nowhere else but ``create_all``, and ``S`` only called inside functions."""
    reasons: list[str] = []
    engines = [n.targets[0].id for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name) and _call_name(n.value) == "create_engine"]
    makers = [n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and _call_name(n.value) == "sessionmaker"]
    if len(engines) != 1:
        return CodeFit(False, reasons=[f"expected one module-level create_engine assignment, found {len(engines)}"])
    if len(makers) != 1:
        return CodeFit(False, reasons=[f"expected one module-level sessionmaker assignment, found {len(makers)}"])
    engine, session = engines[0], makers[0].targets[0].id
    walked = _Tree(tree)
    allowed = walked.subtree(makers[0].value)
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "create_all":
            allowed |= walked.subtree(stmt.value)
    for node in walked.order:
        if isinstance(node, ast.Global) and (engine in node.names or session in node.names):
            reasons.append(f"line {node.lineno}: 'global' rebinds {engine} or {session}")
    for node in walked.order:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id == engine and id(node) not in allowed:
                reasons.append(f"line {node.lineno}: uses the engine '{engine}' directly")
            elif node.id == session and not walked.in_body[id(node)]:
                reasons.append(f"line {node.lineno}: uses '{session}' at import time")
        elif isinstance(node, ast.Attribute) and node.attr in ("engine", "bind") and \
                isinstance(node.value, ast.Name) and node.value.id == session:
            reasons.append(f"line {node.lineno}: reads {session}.{node.attr}")
    reasons += _shared_mutable_state(tree, walked)
    return CodeFit(not reasons, engine, session, reasons)


_MUTABLE_CALLS = {"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "Counter", "bytearray"}
_MUTATORS = {"append", "extend", "insert", "update", "add", "pop", "popitem", "remove", "discard", "clear",
             "setdefault", "sort", "reverse", "appendleft", "extendleft", "rotate", "__setitem__", "__delitem__"}


def _shared_mutable_state(tree: ast.Module, walked: _Tree | None = None) -> list[str]:
    """Module-level containers that handlers change: on the shared path every episode would see them, so
    such code runs isolated (its module executed again for each episode). Each name is reported at its first
    change in the first function (module order, outer functions first) that contains one."""
    walked = walked or _Tree(tree)
    mutable: dict[str, int] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or \
                _call_name(value) in _MUTABLE_CALLS:
            for target in targets:
                if isinstance(target, ast.Name):
                    mutable[target.id] = node.lineno
    first: dict[str, tuple[tuple[int, int], str]] = {}  # name -> (outermost def's position, node's), why

    def note(name: str, key: tuple[int, int], why: str) -> None:
        if name not in first or key < first[name][0]:
            first[name] = (key, why)

    for node in walked.order:
        outer = walked.outer_def[id(node)]
        if outer is None:
            continue
        key = (walked.index[id(outer)], walked.index[id(node)])
        name = None
        if isinstance(node, ast.Global):
            for n in node.names:
                note(n, key, f"line {node.lineno}: 'global {n}' in a function: module state shared between episodes")
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Name):
            name = node.func.value.id
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and isinstance(node.value, ast.Name):
            name = node.value.id
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        if name in mutable:
            note(name, key, f"line {node.lineno}: changes the module-level '{name}' (line {mutable[name]}): "
                            "state shared between episodes")
    found = {name: why for name, (key, why) in sorted(first.items(), key=lambda item: item[1][0])}
    return [why for name, why in found.items() if name in mutable or why.startswith("line") and "global" in why]


class EnvCodeError(Exception):
    """The environment's code cannot be loaded (syntax error, import error, no FastAPI app)."""


_counter = itertools.count()


def exec_module(code: str, scenario_key: str, db_path: str, tree: ast.Module | None = None) -> tuple[types.ModuleType, str]:
    """Rewrite for ``db_path`` and execute as a fresh module; returns (module, rewritten source). ``tree``: the
    rewritten source already parsed (``codeinfo.parse``), compiled as it is instead of parsing the text again."""
    source = rewrite_code(code, db_path)
    name = f"awm_env_{scenario_key}_{next(_counter)}"
    try:
        if tree is not None:
            compiled = codeinfo.compile_tree(tree, f"<{scenario_key}/server_code.py>")
        else:
            # dont_inherit: this module's ``from __future__ import annotations`` must not reach the environment's
            # code (the reference runs it as a file of its own: annotations evaluated when defined)
            compiled = compile(source, f"<{scenario_key}/server_code.py>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise EnvCodeError(f"syntax error in generated code (after the reference rewrite) at line "
                           f"{exc.lineno}: {exc.msg}") from None
    module = types.ModuleType(name)
    module.__dict__["__file__"] = f"<{scenario_key}/server_code.py>"
    sys.modules[name] = module
    # tracebacks through the generated code show its lines (an entry without mtime is never evicted)
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compiled, module.__dict__)
    except BaseException as exc:  # generated code may raise anything at import time
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        where, lines = "", source.splitlines()
        frame = exc.__traceback__
        while frame is not None:  # the innermost line of the generated code that was running
            if frame.tb_frame.f_code.co_filename == module.__file__ and 0 < frame.tb_lineno <= len(lines):
                where = f" (line {frame.tb_lineno}: {lines[frame.tb_lineno - 1].strip()[:160]})"
            frame = frame.tb_next
        raise EnvCodeError(f"generated code failed at import{where}: {type(exc).__name__}: {exc}") from None
    app = module.__dict__.get("app")
    if app is None or not hasattr(app, "openapi"):
        sys.modules.pop(name, None)
        raise EnvCodeError("generated code defines no FastAPI 'app'")
    return module, source


def forget_module(module: types.ModuleType) -> None:
    sys.modules.pop(module.__name__, None)


def session_factory_kwargs(factory: Any) -> dict[str, Any]:
    """The configuration of a ``sessionmaker`` (everything but its bind)."""
    kw = dict(getattr(factory, "kw", {}))
    kw.pop("bind", None)
    if getattr(factory, "class_", None) is not None:
        kw["class_"] = factory.class_
    return kw
