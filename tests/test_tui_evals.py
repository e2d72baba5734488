"""The evaluation dashboard follows a running evaluation live and drills down into a rollout's replay."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from awm_tui.app import AwmApp
from awm_tui.screens.evals import EvalScreen
from awm_tui.screens.replay import ReplayScreen
from awm_tui.widgets.virtual_table import VirtualTable


async def test_dashboard_follows_a_running_evaluation(tmp_path):
    out = tmp_path / "eval" / "oracle-run"
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "eval", "run", "--policy", "oracle",
                             "--scenario", "maple_library_lending", "-k", "3", "--concurrency", "1", "--workers", "1",
                             "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    seen: list[int] = []
    # part-way, held there (the evaluation stopped) until the dashboard shows it: watched from a thread from the
    # start, since the app may take longer to open than the whole evaluation takes (a busy machine)
    held = threading.Event()
    stop_watch = threading.Event()

    def hold_part_way() -> None:
        while not stop_watch.is_set() and proc.poll() is None:
            if 0 < _lines(out / "results.jsonl") < 30:
                proc.send_signal(signal.SIGSTOP)
                held.set()
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=hold_part_way, daemon=True)
    watcher.start()
    try:
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.press("ctrl+e")
            screen = app.screen
            assert isinstance(screen, EvalScreen)
            rollouts = screen.query_one("#rollout-table", VirtualTable)
            deadline = time.monotonic() + 600  # a condition, not a pause: a busy machine runs the evaluation slowly
            while time.monotonic() < deadline:
                await pilot.pause(0.1)
                if screen.view is None and out.exists():
                    screen.reload_runs()
                seen.append(rollouts.row_count)
                if held.is_set() and proc.poll() is None and 0 < rollouts.row_count < 30:
                    proc.send_signal(signal.SIGCONT)
                head = str(screen.query_one("#run-head").render())
                if rollouts.row_count == 30 and proc.poll() is not None and "finished" in head and \
                        "rollouts 30/30" in head:
                    break
            head = str(screen.query_one("#run-head").render())
            assert "rollouts 30/30" in head and "mean reward 1.000" in head and "pass@2 1.000" in head and "pass^2 1.000" in head
            assert "finished" in head
            assert screen.query_one("#scenario-table", VirtualTable).get_row_at(0)[:2] == ["maple_library_lending", "30"]
            assert any(0 < n < 30 for n in seen)  # the dashboard showed the run part-way, while it was going
            rollouts.focus()
            await pilot.press("down", "enter")
            await pilot.pause(0.5)
            assert isinstance(app.screen, ReplayScreen)
            assert app.screen.run.scenario == "maple_library_lending"
            await app.workers.wait_for_complete()
    finally:
        stop_watch.set()
        watcher.join(10)
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(30)


def _lines(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


async def test_the_dashboard_lists_rollouts_by_task_not_as_they_finished(tmp_path):
    out = tmp_path / "eval" / "run"
    done = subprocess.run([sys.executable, "-m", "awm_engine.cli", "eval", "run", "--policy", "oracle", "--scenario",
                           "maple_library_lending", "--task", "0", "--task", "1", "--task", "2", "--out", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    lines = (out / "results.jsonl").read_text().splitlines(True)
    (out / "results.jsonl").write_text("".join(sorted(lines, key=lambda line: -json.loads(line)["task_id"])))
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("ctrl+e")
        screen = app.screen
        assert isinstance(screen, EvalScreen)
        rollouts = screen.query_one("#rollout-table", VirtualTable)
        for _ in range(3000):  # a condition, not a pause
            if rollouts.row_count == 3:
                break
            await pilot.pause(0.1)
        assert [str(rollouts.get_row_at(i)[1]) for i in range(3)] == ["0", "1", "2"]


async def test_esc_typed_right_after_enter_closes_the_replay_enter_opened(tmp_path):
    """In the dashboard, enter (replay the selected rollout) then esc typed at once: esc closed the dashboard, and
    the replay opened over the catalog. The keys act in the order typed, each on what it would have acted on: enter
    opens the replay, esc closes it, and the dashboard is back."""
    import asyncio

    from test_tui_entry_points import oracle_run
    from test_tui_play_typing import burst, wait_until

    from awm_engine.cli import main as awm

    out = tmp_path / "eval" / "oracle"
    assert await asyncio.to_thread(awm, oracle_run(out)) == 0
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_evaluations(out)
        await wait_until(pilot, lambda: app.screen.query("#rollout-table")
                         and app.screen.query_one("#rollout-table").row_count >= 3)
        dashboard = app.screen
        pushed = []
        push_screen = app.push_screen
        app.push_screen = lambda screen, *args, **kwargs: (pushed.append(screen), push_screen(screen, *args,
                                                                                              **kwargs))[1]
        burst(app, ["ctrl+o", "down", "enter", "escape"])
        replays = lambda: [s for s in pushed if isinstance(s, ReplayScreen)]  # noqa: E731
        # both outcomes end here: the replay opened and was closed, or the dashboard was closed
        await wait_until(pilot, lambda: replays() and (replays()[0] not in app.screen_stack
                                                       or dashboard not in app.screen_stack))
        assert app.screen is dashboard and len(replays()) == 1 and replays()[0].run.task_id == 1
        burst(app, ["escape"])  # the dashboard's own esc still closes it
        await wait_until(pilot, lambda: dashboard not in app.screen_stack)


async def test_a_replay_rebuilt_as_it_is_being_closed_fills_nothing(tmp_path):
    """esc typed right after enter closes the replay enter opened (above), often before the rebuild of its states
    ends: under two CPU hogs it ended as the replay was being removed (still attached, its widgets gone) and stopped
    the app with NoMatches('#replay-state'). A replay that was closed fills nothing."""
    from test_tui_narrow import oracle_run, replay_ready
    from test_tui_play_typing import wait_until

    run = await oracle_run(tmp_path)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await replay_ready(pilot, run)
        await screen.query_one("#replay-state").remove()  # as the screen's removal does, before the screen goes
        app.pop_screen()
        assert screen.is_attached
        screen.state("late")  # what the rebuild does as it ends
        await wait_until(pilot, lambda: not screen.is_attached)
        assert app.is_running
