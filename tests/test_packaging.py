"""Every third-party module the code imports is declared in pyproject.toml, and the set-up installs the
tested versions from constraints.txt."""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"sqlite_utils": "sqlite-utils", "json_repair": "json-repair", "yaml": "pyyaml", "dotenv": "python-dotenv"}


def imported_top_level(packages: list[str]) -> set[str]:
    names = set()
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"awm_engine", "awm_tui", "__future__"}


def without_dependencies() -> list[str]:
    """Distributions installed with ``pip install --no-deps`` (their own dependency lists are not wanted)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("awm", {}).get(
        "install-without-dependencies", [])


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for group in project["optional-dependencies"].values() for d in group]
    deps += without_dependencies()
    return {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in deps}


def test_every_third_party_import_is_declared():
    missing = {name for name in imported_top_level(["awm_engine", "awm_tui"])
               if DISTRIBUTIONS.get(name, name).lower().replace("_", "-") not in declared()}
    assert missing == set(), f"imported but not declared in pyproject.toml: {sorted(missing)}"


def test_setup_installs_the_pinned_versions():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().replace("_", "-").split()
                if "==" in line)
    for name in declared():
        assert name in {p.lower() for p in pins}, f"{name} has no pinned version in constraints.txt"


def test_packages_without_dependencies_are_installed_so():
    makefile = (ROOT / "Makefile").read_text()
    for name in without_dependencies():
        assert f"--no-deps {name}" in makefile, f"the Makefile must install {name} with --no-deps"
