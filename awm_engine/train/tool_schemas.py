"""The tool schemas an endpoint received in a recorded rollout, for the exports' ``tools`` column.

Native mode: the chat request carried ``tools`` = ``openai_tools(list_tools())`` of the scenario's environment
(``agent.policies.LLMPolicy``). A trajectory does not record them, so they are listed again from the environment
the rollout ran (its ``awm.data_dirs``; one episode per scenario, in a one-worker pool, the same sandboxed path a
rollout takes). Meta mode: the request carried no ``tools`` (the two meta-tools are described in the system
prompt and the scenario's tools in the ``list_tools`` result), so the column is empty.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from awm_engine.agent.policies import openai_tools
from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool


class ToolSchemaError(RuntimeError):
    """The tools of a rollout's environment could not be listed again."""


def _data_dirs(run_dir: Path) -> tuple[str, ...]:
    data = json.loads((run_dir / "trajectory.json").read_text())
    return tuple((data.get("awm") or {}).get("data_dirs") or ())


async def _list(wanted: dict[tuple[tuple[str, ...], str], None]) -> dict[tuple[tuple[str, ...], str], list]:
    found: dict[tuple[tuple[str, ...], str], list] = {}
    catalogs: dict[tuple[str, ...], Catalog] = {}
    async with EnvPool(workers=1) as pool:
        for dirs, scenario in wanted:
            catalog = catalogs.setdefault(dirs, Catalog.load(list(dirs) or None))
            try:
                episode = await pool.open_episode(catalog.get(scenario))
            except Exception as exc:  # noqa: BLE001 - said with the scenario, the export stops
                raise ToolSchemaError(f"cannot list the tools of {scenario} (data {', '.join(dirs) or 'default'}) "
                                      f"for the tools column: {exc}") from exc
            try:
                found[(dirs, scenario)] = openai_tools(episode.list_tools())
            finally:
                await episode.close()
    return found


def endpoint_tools(rollouts: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Rollout id -> the ``tools`` its endpoint requests carried (``[]`` in meta mode)."""
    keys: dict[str, tuple[tuple[str, ...], str] | None] = {}
    for r in rollouts:
        keys[r.rollout_id] = (_data_dirs(Path(r.run_dir)), r.scenario) if r.config.mode == "native" else None
    wanted = {k: None for k in keys.values() if k is not None}
    listed = asyncio.run(_list(wanted)) if wanted else {}
    return {rid: [dict(t) for t in listed[k]] if k is not None else [] for rid, k in keys.items()}
