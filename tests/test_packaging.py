"""Every third-party module the code imports is declared in pyproject.toml, and the set-up installs the
tested versions from constraints.txt."""
from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"sqlite_utils": "sqlite-utils", "json_repair": "json-repair", "yaml": "pyyaml", "dotenv": "python-dotenv"}


def imported_top_level(packages: list[str]) -> set[str]:
    names = set()
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):  # (a file beside it, imported by path: runtime/lean_front.py's)
                    names |= {a.name.split(".")[0] for a in node.names
                              if not (path.parent / f"{a.name.split('.')[0]}.py").is_file()}
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


# -- the sample environments ship with the package (issue 28, item 6) -------------------------------------------

def source_packages() -> set[str]:
    """The packages of the source tree (directories holding an ``__init__.py``)."""
    return {".".join(p.parent.relative_to(ROOT).parts) for top in ("awm_engine", "awm_tui")
            for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts}


def test_the_package_list_is_the_source_tree_plus_the_sample_envs():
    setuptools_cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools_cfg["packages"])
    assert listed - {"awm_engine.sample_envs"} == source_packages(), (
        "pyproject.toml's [tool.setuptools] packages must list every package of the source tree (a package missing "
        f"there is missing from the wheel): {sorted(source_packages() ^ (listed - {'awm_engine.sample_envs'}))}")
    assert setuptools_cfg["package-dir"] == {"awm_engine.sample_envs": "sample_envs"}
    assert "*.jsonl" in setuptools_cfg["package-data"]["awm_engine.sample_envs"]


def test_missing_default_data_is_an_error_never_an_empty_catalog(tmp_path, monkeypatch, capsys):
    from awm_engine.cli import main as awm
    from awm_engine.data import paths
    from awm_engine.data.catalog import Catalog
    from awm_engine.train.tasks import NoTaskRows, task_rows

    monkeypatch.setattr(paths, "PACKAGE_ROOT", tmp_path / "site-packages" / "awm_engine")  # an install without them
    with pytest.raises(paths.MissingSampleEnvs, match="sample environments are missing.*--data DIR"):
        Catalog.load()
    assert awm(["catalog", "list"]) == 2
    assert "bundled sample environments are missing" in capsys.readouterr().err
    monkeypatch.setenv("AWM_SAMPLE_ENVS", str(tmp_path))  # an override pointing at no AWM files
    with pytest.raises(paths.MissingSampleEnvs, match="AWM_SAMPLE_ENVS=.*holds no sample environments"):
        Catalog.load()
    monkeypatch.delenv("AWM_SAMPLE_ENVS")
    monkeypatch.setattr(paths, "PACKAGE_ROOT", ROOT / "awm_engine")
    assert paths.sample_envs_dir() == ROOT / "sample_envs"  # a checkout: the repository's copy
    with pytest.raises(NoTaskRows, match="holds no scenarios"):  # the GRPO example's data step on no data
        task_rows(Catalog.load([tmp_path]))
    with pytest.raises(NoTaskRows, match="has task 99"):
        task_rows(Catalog.load(), ["maple_library_lending"], [99])
    assert awm(["train", "tasks", "--scenario", "maple_library_lending", "--task", "99",
                "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "no task rows" in capsys.readouterr().err and not (tmp_path / "t.jsonl").exists()


GRPO_DATA_STEP = """
from awm_engine.data.catalog import Catalog
from awm_engine.train.tasks import task_rows
import awm_engine
rows = task_rows(Catalog.load())
print(f"task rows: {len(rows)}")
print(awm_engine.__file__)
"""


@pytest.mark.timeout(600)
def test_a_wheel_installed_in_a_fresh_venv_lists_the_sample_scenarios(tmp_path):
    """Build a wheel from the repository's tracked files, install it (``--no-deps``) into a fresh venv that borrows
    the dependencies from this one's site-packages (a ``.pth`` line: the editable install's finder is not
    loaded from there), and run ``awm catalog list`` and the README's GRPO data step outside the repository."""
    import shutil
    import subprocess
    import sysconfig

    from awm_engine.data.catalog import Catalog

    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout  # the working tree, as a checkout of it
    for rel in tracked.decode().split("\0"):
        if rel and not rel.startswith(("tests/", "benchmarks/", "assets/")) and (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True)
    if build.returncode and "No matching distribution found for setuptools" in build.stderr:
        pytest.skip("building a wheel needs setuptools>=77 from the package index, which is unreachable")
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("awm-*.whl"))

    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "awm_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("AWM_SAMPLE_ENVS", "PYTHONPATH")}

    listed = subprocess.run([str(venv / "bin" / "awm"), "catalog", "list", "--json"], cwd=outside, env=env,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    expected = sorted(s.key for s in Catalog.load())
    assert len(expected) == 5 and all(key in listed.stdout for key in expected)
    step = subprocess.run([str(python), "-c", GRPO_DATA_STEP], cwd=outside, env=env, capture_output=True, text=True)
    assert step.returncode == 0, step.stderr
    count, where = step.stdout.splitlines()
    assert count == "task rows: 50" and where.startswith(purelib)  # the wheel's awm, not the checkout's

    shutil.rmtree(Path(purelib) / "awm_engine" / "sample_envs")  # a broken install: an error, not 0 scenarios
    broken = subprocess.run([str(venv / "bin" / "awm"), "catalog", "list"], cwd=outside, env=env,
                            capture_output=True, text=True)
    assert broken.returncode == 2 and "bundled sample environments are missing" in broken.stderr
    assert "Traceback" not in broken.stderr
    step = subprocess.run([str(python), "-c", GRPO_DATA_STEP], cwd=outside, env=env, capture_output=True, text=True)
    assert step.returncode != 0 and "MissingSampleEnvs" in step.stderr and "task rows: 0" not in step.stdout
