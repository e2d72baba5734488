"""Verifiers run sandboxed (timeout, memory limit, read-only, no secrets); the judge parses what it gets."""
import asyncio
import json
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


FENCED_THEN_BRACES = '```json\n{"classification": "complete"}\n```\nI followed the {evidence} template.'


# (reply, label under the reference profile, label under the robust profile). The reference tries
# json.loads(reply), then json.loads of the greedy match from the first "{" to the last "}" (spec §6.3).
@pytest.mark.parametrize("text, reference, robust", [
    ('{"classification": "Complete", "reasoning": "ok"}', "complete", "complete"),
    ('  {"classification": " incomplete "}\n', "incomplete", "incomplete"),
    ('```json\n{"classification": "AGENT_ERROR"}\n```', "agent_error", "agent_error"),  # the greedy match
    ('Here is my verdict:\n{"classification": "server_error", "evidence": {}}\nThanks.', "server_error",
     "server_error"),
    (FENCED_THEN_BRACES, "judge_error", "complete"),  # the greedy match spans two brace pairs
    ('```json\n{"classification": "complete",}\n```', "judge_error", "complete"),  # trailing comma
    ('{"classification": "server error"}', "judge_error", "server_error"),  # a space, not an underscore
    ('[{"classification": "complete"}]', "judge_error", "complete"),  # JSON, but no object
    ('"complete"', "judge_error", "judge_error"),
    ('{"classification": 1}', "judge_error", "judge_error"),
    ('{"reasoning": "no label"}', "judge_error", "judge_error"),
    ("I think it went fine.", "judge_error", "judge_error"),
    ('{"classification": "great"}', "judge_error", "judge_error"),
    ("", "judge_error", "judge_error"),
])
def test_judge_parsing(text, reference, robust):
    assert parse_judge_output(text)[0] == reference  # the default profile is the reference
    assert parse_judge_output(text, "reference")[0] == reference
    assert parse_judge_output(text, "robust")[0] == robust


def test_reference_parse_keeps_what_the_reference_keeps():
    assert parse_judge_output("nope", "reference")[1] == {"error": "Failed to parse LLM response: nope"}
    assert parse_judge_output('{"classification": "great", "x": 1}', "reference")[1] == {"classification": "great",
                                                                                         "x": 1}
    assert parse_judge_output("[1]", "reference")[1] == {"error": "'list' object has no attribute 'get'"}
    with pytest.raises(ValueError, match="unknown verification profile"):
        parse_judge_output("{}", "lenient")


def test_judge_retries_then_judge_error():
    script = {"responses": [{"content": "garbage"}, {"content": "still garbage"}, {"content": "nope"}]}
    with FakeLLMServer({**script, "cursor": "sequential"}) as llm:
        verdict = asyncio.run(run_judge(Endpoint(base_url=llm.url, model="j"), "task", [], {"x": 1}, attempts=3,
                                        backoff=0.01, profile="robust"))
        assert len(llm.requests) == 3
    assert verdict.classification == "judge_error" and not verdict.has_verdict and verdict.attempts == 3


def test_judge_retries_until_parseable():
    script = {"responses": [{"content": "garbage"}, {"content": '{"classification": "Incomplete"}'}],
              "cursor": "sequential"}
    with FakeLLMServer(script) as llm:
        verdict = asyncio.run(run_judge(Endpoint(base_url=llm.url, model="j"), "task", [], {}, backoff=0.01,
                                        profile="robust"))
    assert verdict.classification == "incomplete" and verdict.attempts == 2


TRAJECTORY = [{"iteration": 1, "tool_calls": [{"name": "list_tools", "arguments": {}}],
               "tool_response": {"tool_call_id": "c1", "content": "Available MCP Tools: …"}},
              {"iteration": 2, "tool_calls": [], "is_final": True, "content": "Déjà fait."}]
VERIFIER_META = {"reasoning": "count the rows", "success_criteria": "one more row", "failure_criteria": "no change"}


def judge_once(profile: str, reply: str, temperature: float = 0.3):
    """One judge call against the scripted server (which would answer a valid verdict to a second request);
    returns the verdict and every request the server received."""
    script = {"responses": [{"content": reply}, {"content": '{"classification": "complete"}'}],
              "cursor": "sequential"}
    with FakeLLMServer(script) as llm:
        verdict = asyncio.run(run_judge(Endpoint(base_url=llm.url, model="judge-m", temperature=temperature),
                                        "Add 2 mugs.", TRAJECTORY, {"final": [["Mug", 2]]}, VERIFIER_META,
                                        backoff=0.01, profile=profile))
        return verdict, list(llm.requests)


def expected_user_message(verification: dict) -> str:
    task_json = {"user_task": "Add 2 mugs.", "actual_execution_steps": 2, "trajectory": TRAJECTORY}
    return ("task_json:\n" + json.dumps(task_json, ensure_ascii=False, indent=2) + "\n\nverification_json:\n"
            + json.dumps(verification, ensure_ascii=False, indent=2))


def test_reference_judge_request_is_the_reference_request():
    verdict, requests = judge_once("reference", '{"classification": "Complete", "reasoning": "done"}')
    assert len(requests) == 1
    body = requests[0]
    assert set(body) == {"model", "messages", "temperature", "max_completion_tokens"}
    assert body["model"] == "judge-m" and body["temperature"] == 1.0 and body["max_completion_tokens"] == 4096
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    # only the verifier's result: no reasoning, no criteria
    assert body["messages"][1]["content"] == expected_user_message({"code_execution_result": {"final": [["Mug", 2]]}})
    assert verdict.classification == "complete" and verdict.attempts == 1


def test_robust_judge_request_adds_the_verifier_reasoning_and_criteria():
    verdict, requests = judge_once("robust", '{"classification": "complete"}')
    assert len(requests) == 1 and requests[0]["temperature"] == 0.3  # the endpoint's temperature
    assert requests[0]["messages"][1]["content"] == expected_user_message({
        "code_execution_result": {"final": [["Mug", 2]]}, "verifier_reasoning": "count the rows",
        "success_criteria": "one more row", "failure_criteria": "no change"})
    assert verdict.classification == "complete"


def test_fenced_reply_reference_judge_error_without_retry_robust_parsed():
    verdict, requests = judge_once("reference", FENCED_THEN_BRACES)
    assert verdict.classification == "judge_error" and len(requests) == 1 and verdict.attempts == 1
    assert verdict.judge_result == {"error": f"Failed to parse LLM response: {FENCED_THEN_BRACES}"}
    verdict, requests = judge_once("robust", FENCED_THEN_BRACES)
    assert verdict.classification == "complete" and len(requests) == 1


def test_unparseable_reply_reference_no_retry_robust_retries():
    verdict, requests = judge_once("reference", "I cannot decide.")
    assert verdict.classification == "judge_error" and len(requests) == 1
    verdict, requests = judge_once("robust", "I cannot decide.")
    assert verdict.classification == "complete" and len(requests) == 2 and verdict.attempts == 2


def test_sql_mode_verifier_gets_an_empty_final_answer(dbs):
    """The reference calls an sql-mode verifier without a final answer, which it passes on as ''."""
    initial, final = dbs
    keyword = "def verify_task(initial_db_path, final_db_path, final_answer=None):\n    return {'answer': final_answer}"
    outcome = run_verifier(code_verifier(keyword, "sql"), initial, final, "the agent's answer")
    assert outcome.label == "incomplete" and outcome.result == {"answer": ""}
    positional = "def verify_task(a, b, c=None):\n    return {'answer': c}"
    assert run_verifier(code_verifier(positional, "sql"), initial, final, "x").result == {"answer": ""}
    code_mode = "def verify_task_completion(a, b, c=None):\n    return {'result': 'complete', 'c': c}"
    assert run_verifier(code_verifier(code_mode), initial, final, "x").result["raw_result"]["c"] == "x"


@pytest.mark.parametrize("code", [None, 42, ["def verify_task(a, b):"], {"x": 1}])
def test_verifier_code_that_is_no_string_is_no_code(dbs, code):
    initial, final = dbs
    verifier = Verifier("s", 0, "sql", code, {"reasoning": "r"})
    assert verifier.function_name == "verify_task" and verifier.meta == {"reasoning": "r"}
    assert run_verifier(verifier, initial, final).error_kind == "no_code"


def test_rewards():
    r = RewardConfig()
    assert [r.reward(x) for x in ("complete", "incomplete", "server_error", "agent_error", "judge_error", "others")] \
        == [1.0, 0.1, 0.0, 0.0, 0.0, 0.0]
    assert r.reward("complete", "format_error") == -1.0
    assert RewardConfig(incomplete=0.3).reward("incomplete") == 0.3


def test_each_verifier_runs_in_a_sandbox_of_its_own(dbs):
    """One sandbox per verification: a hang is a timeout, a crash is that verdict's error, and the next verifier is
    unaffected."""
    initial, final = dbs
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
    hang = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    while True:\n        pass\n"
    assert run_verifier(code_verifier(hang), initial, final, timeout=1).error_kind == "timeout"
    crash = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    os._exit(3)\n"
    outcome = run_verifier(code_verifier(crash), initial, final)
    assert outcome.error_kind == "crashed" and "exited with 3" in outcome.error
    assert run_verifier(code_verifier(COUNT), initial, final, "yes").label == "complete"
