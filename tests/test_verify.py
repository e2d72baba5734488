"""Verifiers run sandboxed (timeout, memory limit, read-only, no secrets); the judge parses what it gets."""
import asyncio
import sqlite3

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.data.records import Verifier
from awm_engine.verify.judge import parse_judge_output, run_judge
from awm_engine.verify.rewards import RewardConfig
from awm_engine.verify.verification import run_verifier


@pytest.fixture
def dbs(tmp_path):
    paths = []
    for name, rows in (("initial.db", 1), ("final.db", 2)):
        path = tmp_path / name
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])
        conn.commit()
        conn.close()
        paths.append(path)
    return paths


def code_verifier(body: str, mode="code") -> Verifier:
    return Verifier("s", 0, mode, body, None)


COUNT = """
def verify_task_completion(initial_db_path, final_db_path, final_answer=None):
    a = sqlite3.connect(initial_db_path).execute('SELECT COUNT(*) FROM t').fetchone()[0]
    b = sqlite3.connect(final_db_path).execute('SELECT COUNT(*) FROM t').fetchone()[0]
    return {"result": "complete" if b == a + 1 and "yes" in (final_answer or "") else "others"}
"""


def test_code_mode_labels(dbs):
    initial, final = dbs
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
    assert run_verifier(code_verifier(COUNT), initial, final, "no").label == "others"
    odd = run_verifier(code_verifier("def verify_x(initial_db_path, final_db_path):\n    return {'result': 'Complete'}"),
                       initial, final)
    assert odd.label == "others" and odd.result["raw_result"] == {"result": "Complete"}  # case-sensitive, as AWM


def test_function_choice_and_positional_call(dbs):
    initial, final = dbs
    code = ("def helper():\n    return 1\n\ndef verify_main(a, b, c):\n    return {'result': 'complete', 'c': c}\n\n"
            "def verify_other(initial_db_path, final_db_path):\n    return {'result': 'others'}\n")
    outcome = run_verifier(code_verifier(code), initial, final, "ans")
    assert outcome.function == "verify_main" and outcome.label == "complete"
    assert outcome.result["raw_result"]["c"] == "ans"


@pytest.mark.parametrize("body, kind", [
    ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    while True:\n        pass\n",
     "timeout"),
    ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
     "    x = bytearray(4 * 1024 * 1024 * 1024)\n    return {'result': 'complete'}\n", "memory"),
    ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    raise KeyError('boom')\n",
     "exception"),
    ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    return ['complete']\n",
     "bad_return"),
    ("def verify_task_completion(:\n    pass\n", "syntax_error"),
    ("x = 1  # no function at all here\n", "function_not_found"),
    ("", "no_code"),
])
def test_broken_verifiers_give_judge_error(dbs, body, kind):
    initial, final = dbs
    outcome = run_verifier(code_verifier(body), initial, final, timeout=2, memory_mb=512)
    assert outcome.label == "judge_error" and outcome.error_kind == kind, outcome
    assert outcome.result["execution_status"] == "error"


def test_verifier_cannot_write_or_see_secrets(dbs, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    initial, final = dbs
    code = ("def verify_task(initial_db_path, final_db_path):\n"
            "    env = sorted(os.environ)\n"
            "    try:\n"
            "        sqlite3.connect(final_db_path).execute('DELETE FROM t')\n"
            "        wrote = True\n"
            "    except sqlite3.OperationalError as e:\n"
            "        wrote = str(e)\n"
            "    return {'env': env, 'wrote': wrote}\n")
    outcome = run_verifier(code_verifier(code, "sql"), initial, final)
    assert outcome.label == "incomplete"  # sql mode: a placeholder until the judge decides
    assert "OPENAI_API_KEY" not in outcome.result["env"]
    assert "readonly" in outcome.result["wrote"]
    assert sqlite3.connect(final).execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2


def test_sql_mode_error_status_is_judge_error(dbs):
    initial, final = dbs
    code = "def verify_task(initial_db_path, final_db_path):\n    return {'execution_status': 'error', 'error_message': 'x'}"
    assert run_verifier(code_verifier(code, "sql"), initial, final).label == "judge_error"


def test_missing_database(dbs, tmp_path):
    outcome = run_verifier(code_verifier(COUNT), dbs[0], tmp_path / "nope.db")
    assert outcome.error_kind == "db_missing"


@pytest.mark.parametrize("text, label", [
    ('{"classification": "Complete", "reasoning": "ok"}', "complete"),
    ('```json\n{"classification": "AGENT_ERROR"}\n```', "agent_error"),
    ('Here is my verdict:\n{"classification": "server error", "evidence": {}}\nThanks.', "server_error"),
    ('{"classification": "incomplete",}', "incomplete"),
    ("I think it went fine.", "judge_error"),
    ('{"classification": "great"}', "judge_error"),
    ("", "judge_error"),
])
def test_judge_parsing(text, label):
    assert parse_judge_output(text)[0] == label


def test_judge_retries_then_judge_error():
    script = {"responses": [{"content": "garbage"}, {"content": "still garbage"}, {"content": "nope"}]}
    with FakeLLMServer({**script, "cursor": "sequential"}) as llm:
        verdict = asyncio.run(run_judge(Endpoint(base_url=llm.url, model="j"), "task", [], {"x": 1}, attempts=3,
                                        backoff=0.01))
        assert len(llm.requests) == 3
    assert verdict.classification == "judge_error" and not verdict.has_verdict and verdict.attempts == 3


def test_judge_retries_until_parseable():
    script = {"responses": [{"content": "garbage"}, {"content": '{"classification": "Incomplete"}'}],
              "cursor": "sequential"}
    with FakeLLMServer(script) as llm:
        verdict = asyncio.run(run_judge(Endpoint(base_url=llm.url, model="j"), "task", [], {}, backoff=0.01))
    assert verdict.classification == "incomplete" and verdict.attempts == 2


def test_rewards():
    r = RewardConfig()
    assert [r.reward(x) for x in ("complete", "incomplete", "server_error", "agent_error", "judge_error", "others")] \
        == [1.0, 0.1, 0.0, 0.0, 0.0, 0.0]
    assert r.reward("complete", "format_error") == -1.0
    assert RewardConfig(incomplete=0.3).reward("incomplete") == 0.3


@pytest.mark.parametrize("use_host", ["1", "0"])
def test_both_execution_paths(dbs, monkeypatch, use_host):
    """The warm forking host (default) and one fresh interpreter per verifier give the same outcomes."""
    monkeypatch.setenv("AWM_VERIFIER_HOST", use_host)
    initial, final = dbs
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
    hang = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    while True:\n        pass\n"
    assert run_verifier(code_verifier(hang), initial, final, timeout=1).error_kind == "timeout"
    crash = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    os._exit(3)\n"
    outcome = run_verifier(code_verifier(crash), initial, final)
    assert outcome.error_kind == "crashed" and "exited with 3" in outcome.error


def test_a_dead_host_is_restarted(dbs):
    from awm_engine.verify.verification import verifier_host

    initial, final = dbs
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
    host = verifier_host()
    host.proc.kill()
    host.proc.wait()
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
    assert host.proc.poll() is None
