"""Caps on one tool result and on what a run stores (runtime/caps.py): an environment that answers with 100 MB is cut
inside its worker (the parent's memory stays flat, the model reads a marker, the run records the cut); a worker that
writes a giant line on its channel anyway fails only that call; trajectory.json stays small and says what it cut."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from tinyenv import make_env_dir

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.runtime import caps, protocol
from awm_engine.runtime.pool import EnvPool

MB = 1_000_000
BLOB = '''
class BlobOut(BaseModel):
    blob: str

@app.get("/api/blob", summary="Blob", description="A long answer.", tags=["big"], operation_id="blob", response_model=BlobOut)
async def blob(size: int = Query(100_000_000, description="characters")):
    return BlobOut(blob="x" * size)

@app.get("/api/blob_error", summary="Blob error", description="A long error.", tags=["big"], operation_id="blob_error", response_model=BlobOut)
async def blob_error():
    from fastapi import HTTPException
    raise HTTPException(status_code=400, detail="y" * 50_000_000)

@app.get("/api/flood", summary="Flood", description="Writes a giant line on the worker channel.", tags=["bad"], operation_id="flood", response_model=BlobOut)
def flood():
    import os, select, sys
    fd = int(sys.argv[sys.argv.index("--fd") + 1])  # the worker's own channel to the parent
    data = memoryview(b'{"id": 1, "ok": true, "result": {"text": "' + b"z" * 100_000_000 + b'"}}\\n')
    while data:
        select.select([], [fd], [], 5)
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            pass
        except OSError:
            break
    return BlobOut(blob="sent")
'''
BLOB_TEXT = 100 * MB + len('{\n  "blob": ""\n}')  # fastapi-mcp's rendering of the answer (indent=2)
MARKER = re.compile(r"\n\.\.\.\[awm: tool result cut at ([\d,]+) of ([\d,]+) bytes\]\Z")
GROWTH_LIMIT_KB = 60 * 1024  # generous: the answer is 100 MB, the cut text 4 MiB


def status_kb(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))


class PeakRss:
    """The growth of this process's peak RSS over a block (VmHWM reset through /proc/self/clear_refs)."""

    def __enter__(self) -> "PeakRss":
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError as exc:
            pytest.skip(f"cannot reset the peak RSS: /proc/self/clear_refs is not writable ({exc})")
        self.start = status_kb("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        self.growth_kb = status_kb("VmHWM") - self.start


@pytest.fixture
def catalog(tmp_path):
    return Catalog.load([make_env_dir(tmp_path / "data", {"bigenv": BLOB})])


def test_a_100mb_result_is_cut_in_the_worker_and_the_parent_stays_flat(catalog):
    async def run():
        async with EnvPool(workers=1, call_timeout=60) as pool:
            episode = await pool.open_episode(catalog.get("bigenv"))
            assert not (await episode.call_tool("list_notes", {})).is_error  # warm: the module is loaded
            with PeakRss() as peak:
                result = await episode.call_tool("blob", {})
                error = await episode.call_tool("blob_error", {})
            small = await episode.call_tool("blob", {"size": 1000})
            await episode.close()
            return result, error, small, peak

    result, error, small, peak = asyncio.run(run())
    assert peak.growth_kb < GROWTH_LIMIT_KB, f"the parent grew by {peak.growth_kb} kB"
    assert not result.is_error and result.truncated and result.original_bytes == BLOB_TEXT
    kept, total = MARKER.search(result.text).groups()
    assert (kept, total) == (f"{caps.DEFAULT_RESULT_CAP:,}", f"{BLOB_TEXT:,}")
    assert result.text.startswith('{\n  "blob": "xxx') and len(result.text.encode()) < caps.DEFAULT_RESULT_CAP + 100
    # an HTTP error's body is cut the same way (its text is what the model sees too)
    assert error.is_error and error.status == 400 and error.truncated and error.original_bytes > 50 * MB
    assert error.text.startswith("Error calling blob_error. Status code: 400. Response: {\"detail\":\"yyy")
    assert MARKER.search(error.text)
    assert not small.truncated and small.original_bytes is None and "...[awm:" not in small.text


def test_the_worker_cuts_at_the_cap_a_call_asks_for(catalog):
    """The protocol's ``result_cap`` field (a pool with a lower cap asks for it): cut in the worker, not after."""
    async def run():
        async with EnvPool(workers=1, call_timeout=60) as pool:
            episode = await pool.open_episode(catalog.get("bigenv"))
            data = await episode.worker.request("call", wait=120, episode=episode.id, tool="blob",
                                                arguments={"size": 5 * MB}, timeout=60, result_cap=2048)
            await episode.close()
            return data

    data = asyncio.run(run())
    assert data["truncated"] is True and data["original_bytes"] == 5 * MB + 16
    assert data["text"].endswith(f"...[awm: tool result cut at 2,048 of {5 * MB + 16:,} bytes]")
    assert len(data["text"]) < 2200


def test_a_worker_that_sends_a_giant_line_fails_only_that_call(catalog):
    """Code in the worker writes 100 MB without a newline on the worker's channel: the parent reads at most
    ``protocol.LINE_LIMIT`` of it, that call fails, the worker is replaced and the episode goes on."""
    async def run():
        async with EnvPool(workers=1, call_timeout=60) as pool:
            episode = await pool.open_episode(catalog.get("bigenv"))
            assert not (await episode.call_tool("add_note", {"text": "kept"})).is_error
            with PeakRss() as peak:
                flooded = await episode.call_tool("flood", {})
            after = await episode.call_tool("list_notes", {})
            await episode.close()
            return flooded, after, peak

    flooded, after, peak = asyncio.run(run())
    assert peak.growth_kb < GROWTH_LIMIT_KB, f"the parent grew by {peak.growth_kb} kB"
    assert flooded.is_error and flooded.error_kind == "internal" and "z" * 100 not in flooded.text
    assert not after.is_error and '"kept"' in after.text  # the episode's database survived the restart


def tool_call(tool: str, args: dict) -> str:
    arguments = {"tool_name": f"mcp_tool_mcp_server_{tool}", "arguments": json.dumps(args)}
    return "<tool_call>\n" + json.dumps({"name": "call_tool", "arguments": arguments}) + "\n</tool_call>"


def agent_run(data: Path, llm, run_dir: Path, *flags: str) -> int:
    return awm(["agent", "run", "--data", str(data), "--scenario", "bigenv", "--task", "1", "--policy", "llm",
                "--model", "scripted", "--base-url", llm.url, "--verify", "none", "--out", str(run_dir), "--quiet",
                *flags])


def test_agent_run_on_a_100mb_result_stays_small_and_records_the_cut(tmp_path, capsys):
    data = make_env_dir(tmp_path / "data", {"bigenv": BLOB})
    script = {"responses": [{"content": tool_call("blob", {})}, {"content": "It is long."}]}
    run_dir = tmp_path / "run"
    with FakeLLMServer(script) as llm:  # in this process too: its copy of the request counts against the bound
        with PeakRss() as peak:
            assert agent_run(data, llm, run_dir) == 0
        sent = llm.requests[1]["messages"][-1]["content"]
    capsys.readouterr()
    assert peak.growth_kb < GROWTH_LIMIT_KB, f"awm agent run grew by {peak.growth_kb} kB"
    # the model read the first 4 MiB and the marker
    assert sent.startswith("Tool response:\n{\n  \"blob\": \"xxx")
    assert sent.endswith(f"\n...[awm: tool result cut at {caps.DEFAULT_RESULT_CAP:,} of {BLOB_TEXT:,} bytes]")
    assert (run_dir / "trajectory.json").stat().st_size < 20 * MB  # was 315 MB for such a result
    assert (run_dir / "events.jsonl").stat().st_size < 10 * MB
    traj = json.loads((run_dir / "trajectory.json").read_text())
    response = traj["trajectory"][0]["tool_response"]
    assert response["truncated"] is True and response["original_bytes"] == BLOB_TEXT and "stored_cut" not in response
    assert traj["awm"]["config"]["result_cap"] == caps.DEFAULT_RESULT_CAP
    assert traj["awm"]["config"]["trajectory_cap"] == caps.DEFAULT_TRAJECTORY_CAP
    assert traj["awm"]["caps"]["results_cut"] == 1 and traj["awm"]["caps"]["stored_cut"] == 0
    observation = next(e for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
                       if e["type"] == "observation")
    assert observation["truncated"] is True and observation["original_bytes"] == BLOB_TEXT


def test_lower_caps_on_the_command_line_cut_what_the_model_sees_and_what_the_run_stores(tmp_path, capsys):
    """--result-cap 256K: the model reads 256 KiB of a 1 MB result; --trajectory-cap 64K: the run stores 64 KiB of
    it (and says so), the next small result whole."""
    data = make_env_dir(tmp_path / "data", {"bigenv": BLOB})
    script = {"responses": [{"content": tool_call("blob", {"size": MB})}, {"content": tool_call("list_notes", {})},
                            {"content": "Done."}]}
    run_dir = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        assert agent_run(data, llm, run_dir, "--result-cap", "256K", "--trajectory-cap", "64K") == 0
        sent = llm.requests[1]["messages"][-1]["content"]
    capsys.readouterr()
    assert sent.endswith(f"\n...[awm: tool result cut at 262,144 of {MB + 16:,} bytes]")
    assert (run_dir / "trajectory.json").stat().st_size < 300_000
    traj = json.loads((run_dir / "trajectory.json").read_text())
    first, second = traj["trajectory"][0]["tool_response"], traj["trajectory"][1]["tool_response"]
    assert first["truncated"] is True and first["original_bytes"] == MB + 16
    seen = len(sent.removeprefix("Tool response:\n").encode())
    assert first["stored_cut"] == {"stored_bytes": 65536, "model_saw_bytes": seen}
    assert "...[awm: stored copy cut at 65,536 of" in first["content"] and "the model saw all" in first["content"]
    assert '"first"' in second["content"] and "stored_cut" not in second  # small results are stored whole
    tool_messages = [m for m in traj["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == first["content"]  # both copies cut alike
    assert traj["awm"]["config"]["result_cap"] == 262144 and traj["awm"]["config"]["trajectory_cap"] == 65536
    assert traj["awm"]["caps"]["stored_cut"] == 1
    events = (run_dir / "events.jsonl").read_text()
    assert "...[awm: stored copy cut at 65,536 of" in events and len(events) < 200_000


def test_env_call_prints_the_cut_text_and_json_records_it(tmp_path, capsys):
    data = make_env_dir(tmp_path / "data", {"bigenv": BLOB})
    assert awm(["env", "call", "--data", str(data), "bigenv", "blob", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["truncated"] is True and record["original_bytes"] == BLOB_TEXT
    assert MARKER.search(record["text"]).group(1) == f"{caps.DEFAULT_RESULT_CAP:,}"
    assert awm(["env", "call", "--data", str(data), "bigenv", "blob", "--args", '{"size": 5000}',
                "--result-cap", "1K"]) == 0
    assert capsys.readouterr().out.rstrip("\n").endswith("...[awm: tool result cut at 1,024 of 5,016 bytes]")
    assert awm(["env", "call", "--data", str(data), "bigenv", "blob", "--result-cap", "8MiB"]) == 2
    assert "--result-cap" in capsys.readouterr().err


# -- the cut itself ---------------------------------------------------------------------------------

def test_cut_text_keeps_whole_characters_and_fits_the_channel():
    text, original = caps.cut_text("é" * 3000, 1025)  # two bytes each: 1,025 falls inside one
    assert original == 6000 and text.startswith("é" * 512) and text.endswith("...[awm: tool result cut at 1,024 of "
                                                                               "6,000 bytes]")
    assert caps.cut_text("short", 1024) == ("short", None)
    again = caps.cut_text(text, 1025, original)  # cut once: a second pass at the same cap changes nothing
    assert again == (text, 6000)
    lower, total = caps.cut_text(text, 2000 // 2, original)  # a lower cap replaces the marker, keeps the total
    assert total == 6000 and lower.count("...[awm:") == 1 and "cut at 1,000 of 6,000" in lower
    # control characters take six bytes each on the worker's channel: cut shorter so that the line fits
    controls, original = caps.cut_text("\x01" * 100_000, 1 << 20, line_budget=60_000)
    assert original == 100_000 and len(json.dumps(controls, ensure_ascii=False).encode()) <= 60_000


def test_sizes_and_limits():
    assert caps.parse_size("4MiB") == caps.parse_size("4m") == 4 << 20 and caps.parse_size("512K") == 512 << 10
    assert caps.parse_size(" 1024 ") == 1024
    for bad in ("lots", "4 parsecs", "-1", True):
        with pytest.raises(ValueError):
            caps.parse_size(bad)
    with pytest.raises(ValueError, match="between 1,024 and 4,194,304"):
        caps.result_cap("8MiB")
    assert caps.worker_result_cap("8MiB") == caps.DEFAULT_RESULT_CAP  # a worker never refuses: the default
    assert 2 * caps.DEFAULT_RESULT_CAP < protocol.TEXT_BUDGET < protocol.LINE_LIMIT  # quotes and newlines fit
    reply = protocol.error_reply(1, ValueError("w" * 10_000_000))  # code can raise with a message of any size
    assert len(reply) < 4 * protocol.ERROR_TEXT_LIMIT and "characters left out" in json.loads(reply)["error"]


def test_a_bad_cap_in_the_environment_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(caps.RESULT_CAP_ENV, "huge")
    with pytest.raises(ValueError, match="AWM_RESULT_CAP"):
        caps.result_cap()
    monkeypatch.setenv(caps.RESULT_CAP_ENV, "64K")
    assert caps.result_cap() == 65536
    monkeypatch.setenv(caps.TRAJECTORY_CAP_ENV, "10")
    with pytest.raises(ValueError, match="AWM_TRAJECTORY_CAP"):
        caps.trajectory_cap()
