"""The tool schemas an endpoint received in a recorded rollout, for the exports' ``tools`` column.

Native mode: the chat request carried ``tools`` = ``openai_tools(list_tools())`` of the scenario's environment
(``agent.policies.LLMPolicy``), which the trajectory records (``awm.endpoint_tools``) and the export takes as it
is. A trajectory written before it did is listed again from the environment the rollout ran (its
``awm.data_dirs``; one episode per scenario, in a one-worker pool, the same sandboxed path a rollout takes). Meta mode: the request carried no ``tools`` (the two meta-tools are described in the system
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


def _recorded(run_dir: Path) -> tuple[tuple[str, ...], list[dict[str, Any]] | None]:
    """(the data directories the rollout ran with, the tools its requests carried as recorded, or None)."""
    awm = json.loads((run_dir / "trajectory.json").read_text()).get("awm") or {}
    tools = awm.get("endpoint_tools")
    valid = isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    return tuple(awm.get("data_dirs") or ()), (tools if valid else None)


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
    recorded: dict[str, list[dict[str, Any]]] = {}
    for r in rollouts:
        if r.config.mode != "native":
            keys[r.rollout_id] = None
            continue
        dirs, tools = _recorded(Path(r.run_dir))
        if tools is not None:
            recorded[r.rollout_id] = tools
        keys[r.rollout_id] = (dirs, r.scenario) if tools is None else None
    wanted = {k: None for k in keys.values() if k is not None}
    listed = asyncio.run(_list(wanted)) if wanted else {}
    return {rid: recorded[rid] if rid in recorded else [dict(t) for t in listed[k]] if k is not None else []
            for rid, k in keys.items()}
