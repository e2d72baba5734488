"""Environment code and verifiers run with the semantics of the reference: their annotations are evaluated when
defined (the reference runs an environment as a file of its own and ``exec``s a verifier's text from a module
without ``from __future__ import annotations``). awm's own modules have that import; a ``compile`` that inherited
it made every environment and verifier run with annotations left as strings, so code the reference rejects at
import (an annotation naming something undefined) loaded and scored here."""
from __future__ import annotations

import sqlite3

import pytest

from awm_engine.data import codeinfo
from awm_engine.data.records import Verifier
from awm_engine.runtime import envcode
from awm_engine.runtime.inprocess import LoadedEnv
from awm_engine.verify.verification import run_verifier

APP = "from fastapi import FastAPI\napp = FastAPI()\n"
ANNOTATED = APP + "def helper(x: int, y: 'str') -> float:\n    return 1.0\n"
UNDEFINED = APP + "def helper(x: Dict[str, int]) -> None:\n    return None\n"  # Dict never imported


def _both_ways(code: str, db: str):
    """exec_module from the text and from the tree LoadedEnv parses once."""
    yield envcode.exec_module(code, "k", db)[0]
    yield envcode.exec_module(code, "k", db, codeinfo.parse(envcode.rewrite_code(code, db)))[0]


def test_environment_annotations_are_evaluated_when_defined(tmp_path):
    for module in _both_ways(ANNOTATED, str(tmp_path / "m.db")):
        assert module.helper.__annotations__ == {"x": int, "y": "str", "return": float}


def test_an_environment_whose_annotation_names_nothing_fails_at_import_as_under_the_reference(tmp_path):
    db = str(tmp_path / "m.db")
    tree = codeinfo.parse(envcode.rewrite_code(UNDEFINED, db))
    for load in (lambda: envcode.exec_module(UNDEFINED, "k", db), lambda: envcode.exec_module(UNDEFINED, "k", db, tree)):
        with pytest.raises(envcode.EnvCodeError, match=r"failed at import \(line \d+: def helper.*NameError: name 'Dict'"):
            load()
    template = tmp_path / "t.db"
    sqlite3.connect(template).close()
    with pytest.raises(envcode.EnvCodeError, match="NameError: name 'Dict' is not defined"):
        LoadedEnv("k", UNDEFINED, template, tmp_path / "env")


def test_a_tree_compiles_to_what_its_text_compiles_to(tmp_path):
    from awm_engine.data.catalog import Catalog

    for scenario in Catalog.load():
        source = envcode.rewrite_code(scenario.code, str(tmp_path / "m.db"))
        from_text = compile(source, "<f>", "exec", dont_inherit=True)
        from_tree = codeinfo.compile_tree(codeinfo.parse(source), "<f>")
        assert from_text == from_tree and list(from_text.co_positions()) == list(from_tree.co_positions())


@pytest.fixture
def dbs(tmp_path):
    paths = []
    for name in ("initial.db", "final.db"):
        conn = sqlite3.connect(tmp_path / name)
        conn.execute("CREATE TABLE t (id INTEGER)")
        conn.commit()
        conn.close()
        paths.append(tmp_path / name)
    return paths


@pytest.mark.parametrize("mode, head", [
    ("sql", "def verify_task(initial_db_path: str, final_db_path: str) -> Dict[str, Any]:"),
    ("code", "def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: Optional[str] = None)"
             " -> dict:"),
])
def test_a_verifier_whose_annotation_names_nothing_is_a_judge_error_as_under_the_reference(dbs, mode, head):
    outcome = run_verifier(Verifier("s", 0, mode, head + "\n    return {'result': 'complete'}\n", None), *dbs)
    assert outcome.label == "judge_error"
    assert "is not defined" in outcome.result["error_message"]


def test_a_verifier_sees_its_annotations_as_objects(dbs):
    code = ("def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str = '') -> dict:\n"
            "    return {'result': 'complete', 'kinds': [str(v) for v in verify_task_completion.__annotations__.values()]}\n")
    outcome = run_verifier(Verifier("s", 0, "code", code, None), *dbs)
    assert outcome.label == "complete"
    assert outcome.result["raw_result"]["kinds"] == ["<class 'str'>"] * 3 + ["<class 'dict'>"]
