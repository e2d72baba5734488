"""The engine's layering is enforced on every import statement (module level and inside functions)."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from awm_engine.layers import FORBIDDEN_EVERYWHERE, LAYERS, may_import

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "awm_engine"
TOP_LEVEL_ALLOWED = {"__init__.py", "layers.py"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every (line, absolute module) imported by ``path``; relative imports resolved."""
    mod = module_name(path, root)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # ``from awm_engine import data`` / ``from . import x`` name subpackages too
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names if a.name != "*"]
    return out


def violations(root: Path) -> list[str]:
    engine = root / "awm_engine"
    found = []
    for path in sorted(engine.rglob("*.py")):
        rel = path.relative_to(engine)
        if len(rel.parts) == 1:
            if rel.name not in TOP_LEVEL_ALLOWED:
                found.append(f"awm_engine/{rel}: modules belong in a capability subpackage ({', '.join(LAYERS)})")
            continue
        layer = rel.parts[0]
        if layer not in LAYERS:
            found.append(f"awm_engine/{rel}: subpackage {layer!r} has no place in awm_engine.layers.LAYERS")
            continue
        seen: set[tuple[int, str]] = set()
        for line, target in imports_of(path, root):
            parts = target.split(".")
            if parts[0] in FORBIDDEN_EVERYWHERE and (line, parts[0]) not in seen:
                seen.add((line, parts[0]))
                found.append(f"awm_engine/{rel}:{line} imports {target} (the engine never imports {parts[0]})")
            if parts[0] == "awm_engine" and len(parts) > 1 and parts[1] in LAYERS and not may_import(layer, parts[1]):
                if (line, parts[1]) not in seen:
                    seen.add((line, parts[1]))
                    found.append(f"awm_engine/{rel}:{line} ({layer}) imports {target} ({parts[1]} is a higher layer)")
    return found


def test_engine_layering_holds():
    assert violations(ROOT) == []


def test_every_subpackage_has_a_layer_and_says_what_it_holds():
    for sub in sorted(p for p in ENGINE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert sub.name in LAYERS, sub.name
        doc = ast.get_docstring(ast.parse((sub / "__init__.py").read_text()))
        assert doc and "May import" in doc, f"{sub.name}/__init__.py needs a docstring saying what it may import"


@pytest.mark.parametrize("layer, line, expect", [
    ("data", "from awm_engine.runtime.pool import EnvPool", "runtime is a higher layer"),
    ("runtime", "from ..eval import batch", "eval is a higher layer"),
    ("db", "def f():\n    from awm_engine.cli.common import stdout", "cli is a higher layer"),
    ("verify", "import textual.app", "never imports textual"),
    ("agent", "from awm_tui.app import AwmApp", "never imports awm_tui"),
])
def test_a_deliberate_violation_is_caught(tmp_path, layer, line, expect):
    pkg = tmp_path / "awm_engine" / layer
    pkg.mkdir(parents=True)
    (tmp_path / "awm_engine" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text('"""x. May import: nothing."""\n')
    (pkg / "bad.py").write_text(textwrap.dedent(line) + "\n")
    found = violations(tmp_path)
    assert len(found) == 1 and expect in found[0], found


def test_allowed_imports_pass(tmp_path):
    pkg = tmp_path / "awm_engine" / "eval"
    pkg.mkdir(parents=True)
    (tmp_path / "awm_engine" / "__init__.py").write_text("")
    (pkg / "ok.py").write_text("from awm_engine.data.catalog import Catalog\nfrom ..verify import judge\n"
                               "from . import results\n")
    assert violations(tmp_path) == []


def test_a_stray_top_level_module_is_caught(tmp_path):
    (tmp_path / "awm_engine").mkdir()
    (tmp_path / "awm_engine" / "__init__.py").write_text("")
    (tmp_path / "awm_engine" / "helpers.py").write_text("")
    assert "belong in a capability subpackage" in violations(tmp_path)[0]

