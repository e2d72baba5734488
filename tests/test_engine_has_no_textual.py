"""The engine must stay usable without the TUI: no module under awm_engine imports Textual."""
import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "awm_engine"


def test_no_textual_import_in_source():
    offenders = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "textual" or n.startswith("textual.") or n.startswith("awm_tui") for n in names):
                offenders.append(f"{path}:{node.lineno}")
    assert not offenders, offenders


def test_importing_every_engine_module_loads_no_textual():
    modules = sorted("awm_engine." + ".".join(p.relative_to(ENGINE).with_suffix("").parts)
                     for p in ENGINE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
