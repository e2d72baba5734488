"""Helpers shared by the side-by-side scoring benchmarks (``bfcl_scoring.py``, ``tau2_scoring.py``): one command
timed from process start to exit, a time printed as m:ss, and a line describing the machine."""
from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import time


def timed(cmd: list[str], env: dict[str, str], stdout) -> dict[str, float]:
    """Run ``cmd`` to its end: wall, user and system time of the process and its children. A failure ends the
    benchmark with the command's stderr tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} … failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime}


def fmt(t: dict[str, float]) -> str:
    minutes, seconds = divmod(t["wall_s"], 60)
    return f"{int(minutes)}:{seconds:04.1f} (user {t['user_s']:.0f} s, sys {t['sys_s']:.0f} s)"


def machine() -> str:
    """The CPU model, core count, Python and the 1-minute load average (other jobs share the machine)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, load {load:.1f}"
