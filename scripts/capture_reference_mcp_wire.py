"""Record what the AWM reference's MCP server answers to ``tests/mcp_wire_probe.py``'s battery, into
``tests/data/reference_mcp_wire.json`` (the fixture ``tests/test_mcp_wire.py`` holds ``awm env serve`` to).

    python3 -m venv /tmp/fmcp_venv && /tmp/fmcp_venv/bin/pip install fastapi-mcp==0.4.0 mcp==1.26.0 uvicorn sqlalchemy
    .venv/bin/python scripts/capture_reference_mcp_wire.py --baseline-venv /tmp/fmcp_venv

The reference server is the scenario's code as the reference rewrites it (``envcode.rewrite_code``: its FastAPI app,
``FastApiMCP(app).mount_http()``, uvicorn), run by the baseline venv's Python on a copy of the episode database awm
builds for it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.db.templates import TemplateCache  # noqa: E402
from awm_engine.runtime.envcode import rewrite_code  # noqa: E402
from awm_engine.runtime.ports import free_port  # noqa: E402
from tests import mcp_wire_probe  # noqa: E402

SCENARIO = "maple_library_lending"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-venv", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "reference_mcp_wire.json")
    args = parser.parse_args()
    scenario = Catalog.load().get(SCENARIO)
    with tempfile.TemporaryDirectory(prefix="wire_ref_") as tmp:
        work = Path(tmp)
        os.environ.setdefault("AWM_CACHE_DIR", str(work / "cache"))
        template, _ = TemplateCache().get(scenario)
        db = work / "episode.db"
        shutil.copyfile(template, db)
        port = free_port()
        server = work / "server.py"
        server.write_text(rewrite_code(scenario.code, str(db), "127.0.0.1", port))
        proc = subprocess.Popen([str(args.baseline_venv / "bin" / "python"), str(server)], cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PORT": str(port)})
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            import socket

            for _ in range(600):
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            exchanges = mcp_wire_probe.run(url)
        finally:
            proc.terminate()
            proc.wait(20)
    versions = subprocess.run([str(args.baseline_venv / "bin" / "python"), "-c",
                               "import importlib.metadata as m; print(m.version('fastapi-mcp'), m.version('mcp'))"],
                              capture_output=True, text=True).stdout.split()
    args.out.write_text(json.dumps({"reference": {"fastapi-mcp": versions[0], "mcp": versions[1]},
                                    "scenario": SCENARIO, "exchanges": exchanges}, indent=1, ensure_ascii=False)
                        + "\n")
    print(f"{len(exchanges)} exchanges recorded in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
