"""SVG snapshots (fixed content) of the play, live-rollout, replay and evaluation screens.

Everything that varies between machines and runs is pinned before the picture is taken:

* every test runs in its own temporary directory (``monkeypatch.chdir``) with ``runs_root="runs"``, so
  run directories live at fixed *relative* paths (``runs/agents/…``, ``runs/eval/…``) and the replay and
  evaluation screens, which show the path as given, show no temporary directory at all;
* play and live runs get fixed run-directory names (``default_run_dir`` is replaced in the screen modules
  and the engine's episode module: no timestamp, no random suffix; the tests check the names are used);
  those two screens resolve the path, so the temporary directory in front of it is replaced by ``<tmp>``
  in the displayed text (title, sub-title, status line, transcript) just before the snapshot;
* the scripted LLM's URL (and so its random port) lives only in the config file of the test: the live
  rollout screen shows the endpoint's name, ``scripted``;
* the code verifier's wall-clock time is fixed (``run_verifier`` is wrapped to report 0.05 s).
"""
import asyncio
import json
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Collapsible, OptionList, Static

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import make_policy, run_episode
from awm_engine.verify import verification
from awm_tui.app import AwmApp
from awm_tui.screens.evals import EvalScreen
from awm_tui.screens.play import PlayScreen
from awm_tui.screens.replay import ReplayScreen
from awm_tui.screens.rollout import RolloutScreen

SIZE = (140, 40)
ENV = "maple_library_lending"
TASK = 3  # renew the loan of 'Clockwork Harbor': the due date moves by 14 days from the stored one (no clock)
RUNS = Path("runs")
TMP = "<tmp>"


# -- helpers ----------------------------------------------------------------------------------------

async def settle(pilot):
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def wait_until(pilot, predicate, timeout=60.0, what="the UI"):
    for _ in range(int(timeout / 0.1)):
        if predicate():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def plain(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def _replace_text(text: Text, old: str, new: str) -> Text:
    while (i := text.plain.find(old)) >= 0:
        text = text[:i] + Text(new) + text[i + len(old):]
    return text


def neutralise(screen, old: str, new: str = TMP) -> None:
    """Replace ``old`` (a temporary directory) by ``new`` in the screen's title, sub-title and every Static."""
    screen.title = (screen.title or "").replace(old, new)
    screen.sub_title = (screen.sub_title or "").replace(old, new)
    for static in screen.query(Static):
        content = static.content
        if isinstance(content, Text) and old in content.plain:
            static.update(_replace_text(content, old, new))
        elif isinstance(content, str) and old in content:
            static.update(content.replace(old, new))


def tmp_prefixes(tmp_path: Path) -> list[str]:
    """The temporary directory as the screens may show it (resolved first: it contains the other on macOS)."""
    return list(dict.fromkeys([str(tmp_path.resolve()), str(tmp_path)]))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run in a fresh temporary directory; run directories get fixed names; verifier timings are fixed."""
    monkeypatch.chdir(tmp_path)

    def fixed_run_dir(scenario, task_idx, root="outputs/agents"):
        return Path(root) / f"{scenario.key}_task_{task_idx}"

    # wherever the screens get their run directory names from (the tests check the fixed names are used)
    for module in ("awm_engine.eval.episode", "awm_tui.screens.play", "awm_tui.screens.rollout"):
        monkeypatch.setattr(f"{module}.default_run_dir", fixed_run_dir, raising=False)

    real_run_verifier = verification.run_verifier

    def run_verifier(*args, **kwargs):
        outcome = real_run_verifier(*args, **kwargs)
        outcome.seconds = 0.05
        return outcome

    monkeypatch.setattr(verification, "run_verifier", run_verifier)
    return tmp_path


def make_app(**kwargs) -> AwmApp:
    return AwmApp(None, cursor_blink=False, runs_root=RUNS, **kwargs)


# -- play: one tool call, its observation in the transcript -----------------------------------------

def test_snapshot_play_after_one_call(snap_compare, workdir):
    async def run_before(pilot):
        app = pilot.app
        await settle(pilot)
        app.push_screen(PlayScreen(app.catalog.get(ENV), TASK))
        await pilot.pause()
        screen = app.screen
        tools = screen.query_one("#play-tools", OptionList)
        # the episode is open once the tool list has its options and the focus (the first tool's form is built)
        await wait_until(pilot, lambda: tools.option_count > 0 and app.focused is tools, what="the episode")
        await pilot.pause()
        names = [str(tools.get_option_at_index(i).id) for i in range(tools.option_count)]
        tools.highlighted = names.index("list_my_loans")
        await pilot.pause()
        await wait_until(pilot, lambda: any(f.name == "status" for f in screen.query("#form Input")),
                         what="the list_my_loans form")
        field = next(f for f in screen.query("#form Input") if f.name == "status")
        field.focus()
        await pilot.press(*"active")
        transcript = screen.query_one("#transcript")
        before = len(transcript.events)
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(transcript.events) > before
                         and type(transcript.events[-1]).__name__ == "Observation", what="the observation")
        await pilot.pause()
        # a long observation comes collapsed: open it, as the player would (a click on its title)
        observation = transcript.query(Collapsible).last()
        await pilot.click(observation.query_one("CollapsibleTitle"))
        await wait_until(pilot, lambda: not observation.collapsed, what="the observation to open")
        transcript.scroll_home(animate=False)  # the call and the start of its observation
        assert (workdir / RUNS / "play" / f"{ENV}_task_{TASK}").is_dir()  # the fixed run-directory name
        for prefix in tmp_prefixes(workdir):
            neutralise(screen, prefix)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


# -- live rollout with the scripted LLM, finished, the verdict tab showing -------------------------

def _call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = {"responses": [
    {"content": "<think>First the tool list.</think>" + _call("list_tools", {})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_list_my_loans",
                                    "arguments": json.dumps({"status": "active"})})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_renew_loan",
                                    "arguments": json.dumps({"loan_id": 3})})},
    {"content": "Your loan of 'Clockwork Harbor' is renewed."}]}


def test_snapshot_live_rollout_finished(snap_compare, workdir, monkeypatch):
    with FakeLLMServer(SCRIPT) as llm:
        # the server's URL (a random port) only in the config: the screen shows the endpoint's name
        config = workdir / "config.toml"
        config.write_text(f'[endpoints.scripted]\nbase_url = "{llm.url}"\nmodel = "scripted"\n')
        monkeypatch.setenv("AWM_CONFIG", str(config))

        async def run_before(pilot):
            app = pilot.app
            await settle(pilot)
            app.push_screen(RolloutScreen(app.catalog.get(ENV), TASK))
            await pilot.pause()
            screen = app.screen
            await pilot.press("r")  # start and run to the end
            await wait_until(pilot, lambda: screen.reports is not None, what="the verdict")
            await wait_until(pilot, lambda: "reward" in plain(screen.query_one("#state", Static)),
                             what="the final state line")
            assert screen.query_one("#rollout-tabs").active == "verdict-tab"
            assert (workdir / RUNS / "agents" / f"{ENV}_task_{TASK}").is_dir()  # the fixed run-directory name
            for prefix in tmp_prefixes(workdir):
                neutralise(screen, prefix)
            await pilot.pause()

        assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)
        assert len(llm.requests) == 4


# -- replay: a step selected, the database diff after it -------------------------------------------

def test_snapshot_replay_step_with_diff(snap_compare, workdir):
    run_dir = RUNS / "agents" / "oracle-run"
    catalog = Catalog.load()
    scenario = catalog.get(ENV)
    outcome = asyncio.run(run_episode(catalog, scenario, TASK, make_policy("oracle", scenario, TASK),
                                      run_dir=run_dir))
    assert outcome.verification.label == "complete"

    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen), what="the replay screen")
        screen = app.screen
        state = screen.query_one("#replay-state", Static)
        await wait_until(pilot, lambda: "re-execution" in plain(state), what="the intermediate states")
        write = [s.tool for s in screen.run.steps].index("renew_loan")
        for _ in range(write):
            await pilot.press("right")
        await pilot.pause()
        assert screen.current == write and not screen.run.diff_at(write).is_empty
        await pilot.pause()

    assert snap_compare(make_app(replay=run_dir), terminal_size=SIZE, run_before=run_before)


# -- evaluation dashboard on a small finished run --------------------------------------------------

def test_snapshot_evaluation_dashboard(snap_compare, workdir):
    out = RUNS / "eval" / "oracle-maple"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", ENV, "-k", "2", "--concurrency", "1",
                "--workers", "1", "--out", str(out), "--quiet"]) == 0

    async def run_before(pilot):
        app = pilot.app
        await settle(pilot)
        await pilot.press("ctrl+e")
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen), what="the dashboard")
        screen = app.screen
        head = screen.query_one("#run-head", Static)
        rollouts = screen.query_one("#rollout-table")
        await wait_until(pilot, lambda: "finished" in plain(head) and rollouts.row_count == 20,
                         what="the finished run")
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)
