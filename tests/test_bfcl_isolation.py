"""No verdict can be written by anyone but its own verifier: hostile answers, whose text bfcl-eval ``eval()``s
(multi-turn calls, prompt-mode arguments), are scored in one run together with honest entries, on a pool of
two workers. Whatever the hostile code does — monkeypatching bfcl-eval's checkers anywhere, writing forged
answer lines to every descriptor or through ``/proc/<pid>/fd``, opening other processes' memory, killing its
parent and siblings, reading the answer key from disk or memory to replay it — every honest entry gets the
verdict it gets in a run of its own, and no hostile entry is valid: not even its own verdict can be rigged.
Needs the bfcl-eval wheel (``make bfcl``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from bfcl_answers import fc_turns

from awm_engine.bench.bfcl import wheel

pytestmark = pytest.mark.skipif(wheel.problem() is not None,
                                reason=f"{wheel.problem()} (these tests need the bfcl-eval wheel)")

if wheel.problem() is None:
    from awm_engine.bench.bfcl import data, ground_truth
    from awm_engine.bench.bfcl.sandboxed import CheckerError, CheckerHost
    from awm_engine.sandbox import landlock

FORGED = {"ok": True, "result": {"verdict": {"valid": True, "forged": True}}}

# what the hostile answers run (bfcl-eval eval()s a multi-turn call string; FC mode puts the function name in
# it as it is): each ends by writing a marker line the test can see in the call's result
MONKEYPATCH = """
import sys
always = lambda *args, **kwargs: {"valid": True, "forged": True}
for name, module in list(sys.modules.items()):
    if name.startswith("bfcl_eval.eval_checker") and module is not None:
        for attr in ("multi_turn_checker", "ast_checker", "state_checker", "response_checker"):
            if name.endswith("eval_runner") and hasattr(module, attr):
                setattr(module, attr, always)
"""
EVERYWHERE = """
import sys
always = lambda *args, **kwargs: {"valid": True, "forged": True}
for name, module in list(sys.modules.items()):
    if name.startswith("bfcl_eval") and module is not None:
        for attr in list(vars(module)):
            if attr.endswith("_checker") or attr.startswith("_evaluate_single"):
                setattr(module, attr, always)
"""
FD_WRITES = """
import json, os, sys
line = json.dumps(FORGED) + "\\n"
tagged = "".join(f"{rid} {line}" for rid in range(2000))
for fd in range(1024):
    for text in (line * 16, tagged):
        try:
            os.set_blocking(fd, False)
            os.write(fd, text.encode())
        except OSError:
            pass
try:
    sys.stdout.write(line * 16)
    sys.stdout.flush()
except Exception:
    pass
"""
PROC = """
import json, os
line = json.dumps(FORGED) + "\\n"
tagged = "".join(f"{rid} {line}" for rid in range(2000))
reached = []
for pid in sorted({os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())} - {os.getpid()}):
    for path in (f"/proc/{pid}/mem",):
        try:
            os.close(os.open(path, os.O_RDWR))
            reached.append(path)
        except OSError:
            pass
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            target = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        reached.append(f"/proc/{pid}/fd/{fd}")
        for text in (line * 16, tagged):
            try:
                os.write(target, text.encode())
            except OSError:
                pass
        os.close(target)
"""
KILL = """
import os, signal
for pid in sorted({os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())} - {os.getpid()}):
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
"""


def hostile_step(code: str) -> list[dict[str, str]]:
    """One FC step whose call string runs ``code`` when bfcl-eval eval()s it (then lists the directory)."""
    source = code.replace("FORGED", repr(FORGED))
    return [{f"exec(bytes.fromhex('{source.encode().hex()}').decode(), {{}}) or ls": "{}"}]


def hostile_request(code: str, via: str) -> tuple[str, dict]:
    """A hostile answer: a multi-turn call bfcl-eval executes (then a call in every later turn, so that a checker
    rigged by it would find nothing missing), or a prompt-mode single-turn answer whose argument bfcl-eval's
    decoder eval()s (arithmetic)."""
    if via == "decoder":
        source = code.replace("FORGED", repr(FORGED))
        text = f"[calculate_triangle_area(base=(exec(bytes.fromhex('{source.encode().hex()}').decode(), {{}}) or 11)" \
               " + 0, height=5)]"
        return "score", {"entry_id": "simple_python_0", "mode": "prompt", "raw": text, "display": False}
    entry = data.entries("multi_turn_base")[0]
    return "check", {"entry_id": entry.id, "mode": "fc",
                     "raw": [[hostile_step(code)]] + [[[{"ls": "{}"}]] for _ in entry.ground_truth[1:]]}


def honest_requests() -> list[tuple[str, dict]]:
    """Multi-turn answers right (the ground truth) and wrong (the last turn dropped), single-turn right and wrong
    ones: the entries whose verdicts the hostile ones must not touch."""
    requests = []
    for entry in data.entries("multi_turn_base")[:6]:
        wrong = [list(calls) for calls in entry.ground_truth]
        wrong[-1] = []
        for turns in (entry.ground_truth, wrong):
            requests.append(("check", {"entry_id": entry.id, "raw": fc_turns(entry, turns), "mode": "fc"}))
    for entry in data.entries("simple")[:6]:
        (name, args), *_ = ground_truth.expected_calls(entry.prompt["function"], entry.ground_truth)
        name = name.replace(".", "_")
        for answer in (args, {}):
            requests.append(("score", {"entry_id": entry.id, "raw": [{name: json.dumps(answer)}], "mode": "fc",
                                       "display": False}))
    return requests


def verdicts(answers: list) -> list:
    return [("error", str(a)) if isinstance(a, CheckerError) else a["verdict"] for a in answers]


@pytest.fixture(scope="module")
def alone():
    """The honest entries' verdicts in a run of their own."""
    with CheckerHost(workers=2) as pool:
        found = verdicts(pool.map(honest_requests()))
    assert any(v.get("valid") is True for v in found) and any(v.get("valid") is False for v in found)
    assert not any(v[0] == "error" for v in found if isinstance(v, tuple))
    return found


def hostile_run(code: str, via: str = "multi_turn", copies: int = 3):
    """The honest entries with ``copies`` hostile answers among them (one first), in one run."""
    honest = honest_requests()
    hostile = hostile_request(code, via)
    requests, where = [], []
    for index, request in enumerate(honest):
        if index % max(1, len(honest) // copies) == 0:
            where.append(len(requests))
            requests.append(hostile)
        requests.append(request)
    with CheckerHost(workers=2) as pool:
        found = verdicts(pool.map(requests))
        assert pool.call("ping")["pid"]  # the pool serves on
    hostile_verdicts = [found[i] for i in where]
    honest_verdicts = [v for i, v in enumerate(found) if i not in where]
    return honest_verdicts, hostile_verdicts


def never_valid(found: list) -> None:
    for v in found:
        assert isinstance(v, tuple) or v.get("valid") is False, v


@pytest.mark.parametrize("via", ["multi_turn", "decoder"])
@pytest.mark.parametrize("code", [MONKEYPATCH, EVERYWHERE, FD_WRITES, PROC],
                         ids=["monkeypatch", "monkeypatch-everywhere", "fd-writes", "proc"])
def test_a_hostile_answer_cannot_write_any_verdict(alone, code, via):
    honest, hostile = hostile_run(code, via)
    assert honest == alone
    never_valid(hostile)  # its own verdict neither: the model's code runs apart from the checker (untrusted.py)


KEY_CALL = """
import json, sys
utils = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"]
try:
    key = [json.loads(line) for line in open(PATH)]
except OSError:  # the file cannot be read: the answer key from memory, anywhere in this process
    import gc
    key = [o for o in gc.get_objects() if isinstance(o, dict) and o.get("id") == ENTRY and "ground_truth" in o]
truth = [e for e in key if e["id"] == ENTRY][0]["ground_truth"][TURN][CALL]
name = truth.split("(")[0]
instance = [v for n, v in vars(utils).items() if n.endswith("_instance") and "ground_truth" not in n
            and hasattr(v, name)][0]
result = eval("instance." + truth, {"instance": instance})
f = lambda: result
"""


def test_a_hostile_answer_cannot_replay_the_answer_key():
    """An answer whose every call is code that looks its call up in the answer key (the wheel's possible-answer
    file, else any dict in memory) and makes it: with the key at hand it would be valid. The model's code runs
    where no file can be read and no answer was ever loaded, so it finds none and the answer is not valid."""
    entry = data.entries("multi_turn_base")[0]
    path = wheel.project_root() / "bfcl_eval" / "data" / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    if not path.is_file():
        import bfcl_eval
        path = Path(bfcl_eval.__file__).parent / "data" / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    assert path.is_file() and entry.id in path.read_text()[:20000]

    def step(turn: int, index: int) -> dict[str, str]:
        code = KEY_CALL.replace("PATH", repr(str(path))).replace("ENTRY", repr(entry.id)) \
            .replace("TURN", str(turn)).replace("CALL", str(index))
        return {f"(lambda ns: (exec(bytes.fromhex('{code.encode().hex()}').decode(), ns), ns['f'])[1])({{}})": "{}"}

    raw = [[[step(turn, i) for i in range(len(calls))]] if calls else [] for turn, calls in enumerate(entry.ground_truth)]
    with CheckerHost(workers=1) as pool:
        verdict = pool.call("check", entry_id=entry.id, mode="fc", raw=raw)["verdict"]
        honest = pool.call("check", entry_id=entry.id, mode="fc", raw=fc_turns(entry, entry.ground_truth))["verdict"]
    assert honest["valid"] is True
    assert verdict["valid"] is False, verdict


@pytest.mark.parametrize("via", ["multi_turn", "decoder"])
def test_a_hostile_answer_that_kills_its_parent_and_siblings(alone, via):
    honest, hostile = hostile_run(KILL, via)
    assert honest == alone
    never_valid(hostile)


def test_the_hostile_code_runs_and_finds_every_door_closed():
    """What the attacks above try, one at a time, reported by the call's own result: the code does run (in a
    process of its own, whose only descriptors are stdio and its result pipe), and every other process's
    /proc entries, signals and the file system's writable places are closed to it."""
    os_ = "__import__('os')"
    probes = {
        f"str({os_}.getpid() != {os_}.getppid())": "True",
        f"str([f for f in range(256) if {os_}.path.exists('/proc/self/fd/%d' % f)])": "[0, 1, 2, 3]",
        # the wheel's data (its questions and the answer key) is not readable; its code is
        "str(open(__import__('os').path.dirname(__import__('sys').modules['bfcl_eval'].__file__) "
        "+ '/data/possible_answer/BFCL_v4_multi_turn_base.json'))": "Permission denied",
        "str(len(open(__import__('sys').modules['bfcl_eval'].__file__).read()) >= 0)": "True",
        f"str({os_}.listdir('/proc/%d/fd' % {os_}.getppid()))": "Permission denied",
        f"str(open('/proc/%d/mem' % {os_}.getppid(), 'rb'))": "Permission denied",
        f"str([{os_}.listdir(f'/proc/{{p}}/fd') for p in {os_}.listdir('/proc') if p.isdigit() and p != 'self' "
        f"and int(p) != {os_}.getpid()])": "Permission denied",
        "str(open('/tmp/planted.py', 'w'))": "Permission denied",
    }
    if landlock.abi_version() >= 6:
        probes[f"str({os_}.kill({os_}.getppid(), 0))"] = "Operation not permitted"
    with CheckerHost(workers=1) as pool:
        for expression, expected in probes.items():
            step = pool.call("execute", entry_id="multi_turn_base_0", previous=[], mode="fc",
                             raw=[{f"{expression} or ls": "{}"}])
            assert expected in step["results"][0], (expression, step["results"])
