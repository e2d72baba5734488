"""The bundled sample environments: in sync with their sources, complete, and solvable."""
import importlib.util
import json

import pytest
from conftest import SAMPLE_ENVS

from awm_engine.data.catalog import Catalog

spec = importlib.util.spec_from_file_location("sample_build", SAMPLE_ENVS / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)
spec = importlib.util.spec_from_file_location("sample_check", SAMPLE_ENVS / "check.py")
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

ENV_DIRS = sorted(p.name for p in (SAMPLE_ENVS / "src").iterdir() if (p / "scenario.json").exists())


def test_jsonl_files_are_built_from_the_sources():
    for fname, text in build.render().items():
        assert (SAMPLE_ENVS / fname).read_text() == text, f"{fname} is stale: run python sample_envs/build.py"


def test_five_complete_environments_in_different_domains():
    catalog = Catalog.load()
    assert len(catalog) == len(ENV_DIRS) >= 5
    assert catalog.issues == []
    for s in catalog:
        assert s.table_count >= 8 and s.insert_count >= 40 and s.tool_count >= 15, s.key
        assert len(s.tasks) == 10
        assert s.verifier_coverage("sql") == 10 and s.verifier_coverage("code") == 10
        assert sorted(s.solution_refs) == list(range(10))
        assert s.verifier(0, "sql").function_name == "verify_task"
        assert s.verifier(0, "code").function_name == "verify_task_completion"
        meta = s.verifier(0, "code").meta
        assert {"reasoning", "verification_strategy", "key_checks", "python_code", "function_name"} <= set(meta)


@pytest.mark.parametrize("env_dir", ENV_DIRS)
def test_reference_solutions_complete_every_task(env_dir):
    """Builds the DB with zero failures, runs each solution through the routes, and both verifiers agree."""
    assert check.check_env(SAMPLE_ENVS / "src" / env_dir) == []


def test_reference_solutions_file_shape():
    rows = [json.loads(line) for line in (SAMPLE_ENVS / "reference_solutions.jsonl").read_text().splitlines()]
    assert len(rows) == 10 * len(ENV_DIRS)
    for row in rows:
        assert set(row) == {"scenario", "task_idx", "task", "calls", "final_answer"}
        assert all(set(c) == {"tool", "arguments"} for c in row["calls"])
