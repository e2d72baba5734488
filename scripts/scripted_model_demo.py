"""Watch the scripted model solve a sample task live: ``python scripts/scripted_model_demo.py [--mode meta|native]``.

The script the model follows is built from the task's reference solution (sample_envs/reference_solutions.jsonl):
in meta mode each call is a ``call_tool`` inside ``<tool_call>`` (as a model is asked to write it), in native mode
an OpenAI tool call; the last turn is the reference's final answer. ``awm fake-llm`` serves it (its output goes to
a log file, never the terminal), ``awm agent run`` plays it against the environment and verifies the result.
Exit status: ``awm agent run``'s, and 1 when the verdict is not ``complete``.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def solution(scenario: str, task: int) -> dict:
    for line in (ROOT / "sample_envs" / "reference_solutions.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["scenario"] == scenario and row["task_idx"] == task:
            return row
    raise SystemExit(f"no reference solution for {scenario} task {task}")


def script(row: dict, mode: str) -> dict:
    turns = []
    for call in row["calls"]:
        if mode == "native":
            turns.append({"tool_calls": [{"name": call["tool"], "arguments": call["arguments"]}]})
        else:
            body = {"name": "call_tool", "arguments": {"tool_name": f"mcp_tool_mcp_server_{call['tool']}",
                                                       "arguments": json.dumps(call["arguments"])}}
            turns.append({"content": f"<tool_call>\n{json.dumps(body)}\n</tool_call>"})
    turns.append({"content": row["final_answer"]})
    return {"model": "scripted", "responses": turns}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["meta", "native"], default="meta")
    ap.add_argument("--scenario", default="maple_library_lending")
    ap.add_argument("--task", type=int, default=3)
    ap.add_argument("--port", type=int, default=8765, help="the scripted server's port (default 8765; 0: any free port)")
    ap.add_argument("--out", default=None, help="run directory (default runs/scripted-<mode>)")
    ap.add_argument("--log", default="fake-llm.log", help="the scripted server's log (default fake-llm.log)")
    args = ap.parse_args()
    awm = shutil.which("awm") or str(ROOT / ".venv" / "bin" / "awm")
    out = Path(args.out or f"runs/scripted-{args.mode}")
    work = Path(tempfile.mkdtemp(prefix="scripted_demo_"))
    script_file = work / "script.json"
    script_file.write_text(json.dumps(script(solution(args.scenario, args.task), args.mode), indent=1))
    with open(args.log, "w") as log:
        server = subprocess.Popen([awm, "fake-llm", "--script", str(script_file), "--port", str(args.port)],
                                  stdout=log, stderr=log)
    url = None
    try:
        while True:  # the server's own URL, from its log: only then is the port its own (a busy port exits 3, while
            if server.poll() is not None:  # another process answering there would have played the demo)
                print(f"awm fake-llm exited {server.returncode}; see {args.log}", file=sys.stderr)
                return server.returncode or 1
            if url is None:
                found = re.search(r"API at (http://127\.0\.0\.1:\d+/v1)", Path(args.log).read_text())
                url = found and found.group(1)
            if url is None:
                time.sleep(0.1)
                continue
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        rc = subprocess.call([awm, "agent", "run", "--scenario", args.scenario, "--task", str(args.task),
                              "--model", "scripted", "--base-url", url, "--mode", args.mode, "--out", str(out)])
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    verdict = json.loads((out / "verify.json").read_text()) if (out / "verify.json").exists() else {}
    print(f"verdict: {verdict.get('label')} (reward {verdict.get('reward')}) in {out}")
    return rc or (0 if verdict.get("label") == "complete" else 1)


if __name__ == "__main__":
    sys.exit(main())
