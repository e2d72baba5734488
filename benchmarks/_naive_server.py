"""The naive design, for benchmarks/runtime.py: one fresh process per episode that builds the database
from its statements, executes the generated code and serves it over MCP (streamable HTTP)."""
import asyncio
import socket
import sys
from pathlib import Path

from awm_engine.data.catalog import Catalog
from awm_engine.db.build import build_database
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.mcp_http import Guard, serve_connection
from awm_engine.runtime.mcp_wire import WireServer


def main(data_dir: str, scenario: str, run_dir: str, port: int) -> None:
    s = Catalog.load([data_dir]).get(scenario)
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    build_database(s.key, s.db_schema, s.sample_data, run / "built.db")
    env = LoadedEnv(s.key, s.code, run / "built.db", run / "work", mode="isolated")
    episode = Episode(env, run / "episode")

    async def call(name, arguments):
        result = episode.call_tool_sync(name, arguments)
        return {"text": result.text, "is_error": result.is_error}

    server, guard = WireServer(s.key, episode.list_tools(), call), Guard(port, None)

    async def serve() -> None:
        listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
        listener.setblocking(False)
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            asyncio.create_task(serve_connection(conn, b"", server, guard))

    asyncio.run(serve())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
