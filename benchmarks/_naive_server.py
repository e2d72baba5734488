"""The naive design, for benchmarks/runtime.py: one fresh process per episode that builds the database
from its statements, executes the generated code and serves it over MCP (streamable HTTP)."""
import asyncio
import sys
from pathlib import Path

from awm_engine.data.catalog import Catalog
from awm_engine.db.build import build_database
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.mcp_server import build_server, serve_http


class Direct:
    """Adapts an in-process Episode to the façade (no worker pool: everything in this one process)."""

    def __init__(self, episode):
        self.episode = episode

    def list_tools(self):
        return self.episode.list_tools()

    async def call_tool(self, name, arguments):
        return self.episode.call_tool_sync(name, arguments)


def main(data_dir: str, scenario: str, run_dir: str, port: int) -> None:
    s = Catalog.load([data_dir]).get(scenario)
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    build_database(s.key, s.db_schema, s.sample_data, run / "built.db")
    env = LoadedEnv(s.key, s.code, run / "built.db", run / "work", mode="isolated")
    asyncio.run(serve_http(build_server(Direct(Episode(env, run / "episode")), s.key), port))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
