"""Regenerate the README screenshots: .venv/bin/python assets/screenshots.py (SVG, 130x40, sample envs)."""
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from textual.widgets import Input, OptionList  # noqa: E402

from awm_engine.agent.scripted_llm import FakeLLMServer  # noqa: E402
from awm_tui.app import AwmApp  # noqa: E402
from awm_tui.screens.play import PlayScreen  # noqa: E402
from awm_tui.screens.rollout import RolloutScreen  # noqa: E402

SIZE = (130, 40)
ENV = "maple_library_lending"


def _call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = {"responses": [
    {"content": "<think>First the tool list.</think>" + _call("list_tools", {})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_list_my_loans",
                                    "arguments": json.dumps({"status": "active"})})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_renew_loan",
                                    "arguments": json.dumps({"loan_id": 3})})},
    {"content": "Your loan of 'Clockwork Harbor' is renewed."}]}


async def until(pilot, predicate, timeout=60.0):
    for _ in range(int(timeout / 0.1)):
        await pilot.pause(0.1)
        if predicate():
            return


async def settle(app, pilot):
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def diagnose_all() -> None:
    """``awm env doctor`` on the sample environments: the catalog then shows their health and problem counts."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.runtime.pool import EnvPool
    from awm_engine.verify.doctor import diagnose

    catalog = Catalog.load()
    async with EnvPool(workers=2) as pool:
        for scenario in catalog:
            await diagnose(scenario, pool, catalog)


async def browse(runs: Path) -> None:
    await diagnose_all()
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.save_screenshot(str(HERE / "catalog.svg"))
        app.open_environment(ENV)
        await settle(app, pilot)
        for name, key in (("overview", "1"), ("schema", "2"), ("data", "3"), ("tools", "4"), ("tasks", "5")):
            await pilot.press(key)
            await settle(app, pilot)
            if name == "tools":
                await pilot.press("ctrl+s")
                await settle(app, pilot)
            app.save_screenshot(str(HERE / f"{name}.svg"))
        await pilot.press("f1")
        await settle(app, pilot)
        app.save_screenshot(str(HERE / "help.svg"))


async def play(runs: Path) -> None:
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        scenario = app.catalog.get(ENV)
        app.push_screen(PlayScreen(scenario, 3))
        screen = app.screen
        await until(pilot, lambda: screen.tools)
        solution = scenario.solution(3)
        for call in solution["calls"]:
            screen.query_one("#play-tools", OptionList).highlighted = [t["name"] for t in screen.tools].index(
                call["tool"])
            await pilot.pause(0.2)
            for key, value in call["arguments"].items():
                screen.fields[key].value = str(value)
            await pilot.press("ctrl+j")
            await pilot.pause(0.6)
        screen.query_one("#answer", Input).value = solution["final_answer"]
        app.save_screenshot(str(HERE / "play.svg"))
        await pilot.press("ctrl+f")
        await until(pilot, lambda: screen.reports is not None)
        await pilot.pause(0.3)
        app.save_screenshot(str(HERE / "verdict.svg"))


async def rollout_and_replay(runs: Path) -> None:
    with FakeLLMServer(SCRIPT) as llm:
        app = AwmApp(None, cursor_blink=False, runs_root=runs)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            app.push_screen(RolloutScreen(app.catalog.get(ENV), 3, base_url=llm.url, model="scripted"))
            screen = app.screen
            state = lambda: str(screen.query_one("#state").render())  # noqa: E731
            await pilot.press("n")
            await until(pilot, lambda: "paused before" in state())
            for turn in (1, 2, 3):
                await pilot.press("n")
                await until(pilot, lambda: f"paused after turn {turn}" in state())
            app.save_screenshot(str(HERE / "rollout.svg"))
            await pilot.press("r")
            await until(pilot, lambda: screen.reports is not None)
    run = sorted((runs / "agents").iterdir())[-1]
    app = AwmApp(None, cursor_blink=False, runs_root=runs, replay=run)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: getattr(app.screen, "run", None) is not None and app.screen.run.states)
        for _ in range(2):
            await pilot.press("right")
        await pilot.pause(0.3)
        app.save_screenshot(str(HERE / "replay.svg"))


async def evaluations(runs: Path) -> None:
    from awm_engine.data.paths import sample_envs_dir
    from awm_engine.eval.batch import EvalConfig, run_evaluation

    for policy in ("oracle", "immediate"):
        config = EvalConfig(data_dirs=[str(sample_envs_dir())], policy=policy, k=2, concurrency=8)
        await run_evaluation(config, runs / "eval" / f"{policy}-k2")
    app = AwmApp(None, cursor_blink=False, runs_root=runs, evaluation=runs / "eval" / "oracle-k2")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.query_one("#rollout-table").row_count == 100, 30)
        await pilot.pause(1.2)
        app.save_screenshot(str(HERE / "evals.svg"))


async def main() -> None:
    os.environ.setdefault("AWM_CACHE_DIR", tempfile.mkdtemp(prefix="awm_shots_cache_"))
    runs = Path(tempfile.mkdtemp(prefix="awm_shots_runs_"))
    await browse(runs)
    await play(runs)
    await rollout_and_replay(runs)
    await evaluations(runs)


if __name__ == "__main__":
    asyncio.run(main())
