"""Attacks found by the tenth red team (hostile data directories, run directories, terminal output, served
episodes): each test fails while its gap is open.

- a data file of one endless line — a sparse file (``truncate -s 1T gen_verifier.pure_code.jsonl``: no disk
  space, a tar archive carries it as such) — was read whole into the awm process's memory by ``Catalog.load``
  (``awm catalog list``, ``awm eval run``, the TUI): every gigabyte of the file a gigabyte of the host's memory;
- a data file that is a FIFO when opened (swapped in after the catalog's ``is_file`` check, or a lazily read row's
  file replaced by one later) blocked the open for ever.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from tinyenv import make_env_dir

ROOT = Path(__file__).resolve().parent.parent


def run_limited(code: str, *args: str, memory_mb: int = 1024, timeout: float = 300) -> dict:
    """``code`` in a fresh interpreter with an address-space limit (a gap that is open fails there, with a
    MemoryError, instead of taking the host's memory); it prints a JSON object last."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(ROOT), preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


LOAD_CATALOG = '''
import json, sys
from awm_engine.data.catalog import Catalog
catalog = Catalog.load([sys.argv[1]])
print(json.dumps({"scenarios": sorted(s.key for s in catalog), "issues": [str(i.message) for i in catalog.issues]}))
'''


def test_a_data_file_of_one_endless_line_is_not_read_into_memory(tmp_path):
    """A 1 TB sparse verifier file with no newline: the catalog read it line by line, and its one line is the whole
    terabyte (MemoryError under a 1 GiB limit; without one, the host's memory). It is reported as a line too long
    and the directory's other files still load."""
    data = make_env_dir(tmp_path / "d", {"Notes": ""})
    with open(data / "gen_verifier.pure_code.jsonl", "wb") as fh:
        fh.truncate(1 << 40)
    out = run_limited(LOAD_CATALOG, str(data))
    assert out["scenarios"] == ["notes"], out
    assert any("longer than" in issue for issue in out["issues"]), out


def test_a_data_file_that_is_a_fifo_when_opened_is_refused_not_waited_on(tmp_path):
    """What the catalog reads is checked to be a regular file as it is opened (non-blocking): a FIFO there — put in
    place of a checked file, or of an indexed file before its row is read — blocked ``open`` until a writer came."""
    data = make_env_dir(tmp_path / "d", {"Notes": ""})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = '''
import json, sys
from awm_engine.data.jsonl import iter_jsonl, read_line_at
out = {}
for name, call in (("iter", lambda: list(iter_jsonl(sys.argv[1], []))), ("row", lambda: read_line_at(sys.argv[1], 0))):
    try:
        call()
        out[name] = "read"
    except (OSError, ValueError) as exc:
        out[name] = str(exc)
print(json.dumps(out))
'''
    out = run_limited(code, str(fifo), timeout=120)  # before the fix: blocked until the timeout
    assert "not a regular file" in out["iter"] and "not a regular file" in out["row"], out
    # a scenario's lazily read row whose file became a FIFO: an error, not a hang
    swap = '''
import json, os, sys
from awm_engine.data.catalog import Catalog
catalog = Catalog.load([sys.argv[1]])
scenario = catalog.get("notes")
path = scenario.refs["db"].path
os.unlink(path)
os.mkfifo(path)
try:
    scenario.db_schema
    out = "read"
except (OSError, ValueError) as exc:
    out = str(exc)
print(json.dumps({"out": out}))
'''
    out = run_limited(swap, str(data), timeout=120)
    assert "not a regular file" in out["out"], out
