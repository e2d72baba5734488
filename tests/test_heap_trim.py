"""``runtime.heap``: free memory goes back to the system after a worker's load and a server's start."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

PROBE = r"""
import re
from awm_engine.runtime import heap

def rss_kb():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1))

# 60 MB in blocks glibc serves from its heap (above CPython's small-object allocator, below the mmap threshold),
# then one survivor at the top so the heap cannot shrink from its end by itself
blocks = [bytearray(4000) for _ in range(15000)]
keep = bytearray(4000)
del blocks
before = rss_kb()
heap.settle()
after = rss_kb()
print(before, after)
"""


@pytest.mark.skipif(platform.system() != "Linux" or not platform.libc_ver()[0] == "glibc",
                    reason="malloc_trim is glibc's: elsewhere heap.trim does nothing")
def test_settling_gives_the_freed_heap_back():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    before, after = int(out[0]), int(out[1])
    assert before - after > 30_000, (before, after)  # most of the 60 MB freed is resident no more


def test_the_worker_and_the_server_settle_through_it():
    from awm_engine.runtime import heap, worker

    calls = []
    real = heap.trim
    try:
        heap.trim = lambda: calls.append(1)
        worker.settle_heap()
    finally:
        heap.trim = real
    assert calls == [1]
    source = open(__import__("awm_engine.cli.env_cmd", fromlist=["x"]).__file__).read()
    assert "trim_heap()" in source  # the served parent, once it serves
