"""The TUI's screens import each other without a cycle (function-level imports included): the row and view types
several screens share live in ``awm_tui/views``, below every screen."""
import ast
from pathlib import Path

SCREENS = Path(__file__).resolve().parent.parent / "awm_tui" / "screens"


def screen_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in SCREENS.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:  # from .other import …
                    deps.add(node.module.split(".")[0])
                elif node.module and node.module.startswith("awm_tui.screens."):
                    deps.add(node.module.split(".")[2])
                elif node.level == 1 and not node.module:  # from . import other
                    deps.update(alias.name for alias in node.names)
        graph[path.stem] = deps - {path.stem}
    return graph


def test_the_screens_import_graph_has_no_cycle():
    graph = screen_imports()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for dep in sorted(graph.get(node, ())):
            if seen.get(dep) == 1:
                raise AssertionError("import cycle: " + " → ".join(path[path.index(dep):] + [node, dep])
                                     if dep in path else f"import cycle: {node} → {dep}")
            if dep not in seen:
                visit(dep, path + [node])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [])


def test_the_shared_views_import_no_screen():
    for path in (SCREENS.parent / "views").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert "screens" not in module, f"{path.name} imports {module}"
