"""Attacks found by the tenth red team (hostile data directories, run directories, terminal output, served
episodes): each test fails while its gap is open.

- a data file of one endless line — a sparse file (``truncate -s 1T gen_verifier.pure_code.jsonl``: no disk
  space, a tar archive carries it as such) — was read whole into the awm process's memory by ``Catalog.load``
  (``awm catalog list``, ``awm eval run``, the TUI): every gigabyte of the file a gigabyte of the host's memory;
- so did a τ² domain's files (``db.json``, ``tasks.json``, the policy: ``awm bench tau2``, ``awm-tui --tau2-data``),
  each read whole: a sparse ``db.json`` of a terabyte took the host's memory;
- a data file that is a FIFO when opened (swapped in after the catalog's ``is_file`` check, or a lazily read row's
  file replaced by one later) blocked the open for ever;
- the TUI's τ² domain screen showed the domain's data — database keys and values (Data tab), table columns, task
  summaries (Tasks list), tool parameters — as Rich/Textual markup: a value ``[@click=app.screenshot('x','/etc')]Y[/]``
  is a link that, clicked, runs the app's action with the data's arguments (``screenshot`` writes a file of the
  data's choosing anywhere the user can write, as root when awm runs as root; ``simulate_key``, ``quit`` …), and
  ``[bold red]``/``[/]`` restyle or hide what is shown; so did the replay screen's state line with the run's
  recorded stop reason.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from tinyenv import make_env_dir

ROOT = Path(__file__).resolve().parent.parent


def run_limited(code: str, *args: str, memory_mb: int = 1024, timeout: float = 300) -> dict:
    """``code`` in a fresh interpreter with an address-space limit (a gap that is open fails there, with a
    MemoryError, instead of taking the host's memory); it prints a JSON object last."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(ROOT), preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


LOAD_CATALOG = '''
import json, sys
from awm_engine.data.catalog import Catalog
catalog = Catalog.load([sys.argv[1]])
print(json.dumps({"scenarios": sorted(s.key for s in catalog), "issues": [str(i.message) for i in catalog.issues]}))
'''


def test_a_data_file_of_one_endless_line_is_not_read_into_memory(tmp_path):
    """A 1 TB sparse verifier file with no newline: the catalog read it line by line, and its one line is the whole
    terabyte (MemoryError under a 1 GiB limit; without one, the host's memory). It is reported as a line too long
    and the directory's other files still load."""
    data = make_env_dir(tmp_path / "d", {"Notes": ""})
    with open(data / "gen_verifier.pure_code.jsonl", "wb") as fh:
        fh.truncate(1 << 40)
    out = run_limited(LOAD_CATALOG, str(data))
    assert out["scenarios"] == ["notes"], out
    assert any("longer than" in issue for issue in out["issues"]), out


def test_a_tau2_domain_file_of_a_terabyte_is_not_read_into_memory(tmp_path):
    """A τ² domain whose ``db.json`` and ``tasks.json`` are sparse files of a terabyte (no disk space): each was read
    whole (MemoryError under a 2 GiB limit). Each is an error that names the file, and nothing is read past the
    limit."""
    import shutil

    from test_tau2_domains import FIXTURE

    data = tmp_path / "tau2"
    shutil.copytree(FIXTURE, data)
    for name in ("db.json", "tasks.json", "policy.md"):
        with open(data / "domains" / "airline" / name, "wb") as fh:
            fh.truncate(1 << 40)
    code = '''
import json, sys
from awm_engine.bench.tau2.data import Tau2Data, DatabaseMissing
domain = Tau2Data(sys.argv[1]).domain("airline")
try:
    domain.fresh_db()
    db = "read"
except DatabaseMissing as exc:
    db = str(exc)
print(json.dumps({"db": db, "tasks": len(domain.tasks), "policy": domain.policy,
                  "issues": [str(i.message) for i in domain.issues]}))
'''
    out = run_limited(code, str(data), memory_mb=2048)
    assert "larger than" in out["db"] and out["tasks"] == 0 and not out["policy"], out
    assert any("larger than" in issue for issue in out["issues"]), out


def test_a_data_file_that_is_a_fifo_when_opened_is_refused_not_waited_on(tmp_path):
    """What the catalog reads is checked to be a regular file as it is opened (non-blocking): a FIFO there — put in
    place of a checked file, or of an indexed file before its row is read — blocked ``open`` until a writer came."""
    data = make_env_dir(tmp_path / "d", {"Notes": ""})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = '''
import json, sys
from awm_engine.data.jsonl import iter_jsonl, read_line_at
out = {}
for name, call in (("iter", lambda: list(iter_jsonl(sys.argv[1], []))), ("row", lambda: read_line_at(sys.argv[1], 0))):
    try:
        call()
        out[name] = "read"
    except (OSError, ValueError) as exc:
        out[name] = str(exc)
print(json.dumps(out))
'''
    out = run_limited(code, str(fifo), timeout=120)  # before the fix: blocked until the timeout
    assert "not a regular file" in out["iter"] and "not a regular file" in out["row"], out
    # a scenario's lazily read row whose file became a FIFO: an error, not a hang
    swap = '''
import json, os, sys
from awm_engine.data.catalog import Catalog
catalog = Catalog.load([sys.argv[1]])
scenario = catalog.get("notes")
path = scenario.refs["db"].path
os.unlink(path)
os.mkfifo(path)
try:
    scenario.db_schema
    out = "read"
except (OSError, ValueError) as exc:
    out = str(exc)
print(json.dumps({"out": out}))
'''
    out = run_limited(swap, str(data), timeout=120)
    assert "not a regular file" in out["out"], out


def clickable_actions(app) -> list[tuple[int, int, object]]:
    """Every cell of the screen whose style carries a ``@click`` action (Textual runs it when the cell is clicked)."""
    width, height = app.size
    found = []
    for y in range(height):
        for x in range(width):
            try:
                style = app.screen.get_style_at(x, y)
            except Exception:  # noqa: BLE001 - no widget there
                continue
            if style.meta and "@click" in style.meta:
                found.append((x, y, style.meta["@click"]))
    return found


async def test_tau2_domain_data_is_never_markup_in_the_tui(tmp_path):
    """A τ² domain whose database value and task summary are markup with a click action: the Data tab and the Tasks
    list showed them as a link (clicking ran the app's action: here its bell; ``app.screenshot('x','/etc')`` writes a
    file there) and bold text. They are shown as the text they are, with no action to click."""
    import shutil

    from textual.widgets import OptionList

    from awm_engine.bench.tau2.data import Tau2Data
    from awm_tui.app import AwmApp
    from test_tau2_domains import FIXTURE
    from test_tui_play import start, wait_until

    data = tmp_path / "tau2"
    shutil.copytree(FIXTURE, data)
    db_path = data / "domains" / "airline" / "db.json"
    db = json.loads(db_path.read_text())
    db["flights"][next(iter(db["flights"]))]["origin"] = "[@click=app.bell]Y[/][b]B[/b]"  # within the cut at 40
    db_path.write_text(json.dumps(db))
    tasks_path = data / "domains" / "airline" / "tasks.json"
    tasks = json.loads(tasks_path.read_text())
    tasks[0]["user_scenario"]["instructions"]["reason_for_call"] = "[@click=app.bell]T[/][b]B[/b] rest"
    tasks_path.write_text(json.dumps(tasks))

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs", tau2_data=Tau2Data(data))
    rung = []
    app.bell = lambda: rung.append("the data's action ran")  # app.bell is what the data's click action calls
    async with app.run_test(size=(250, 60)) as pilot:
        await start(app, pilot)
        app.open_environment("tau2_airline")
        await start(app, pilot)
        screen = app.screen
        await pilot.press("2")
        await wait_until(pilot, lambda: screen.databases is not None)
        await pilot.press("3")
        await pilot.pause()
        links = clickable_actions(app)
        for x, y, _ in links:  # what a user's click would do
            await pilot.click(offset=(x, y))
            await pilot.pause()
        await pilot.pause()
        assert not links and not rung, links
        rendered = app.screen._compositor.render_update(full=True).render_segments(app.console)
        assert "[@click=app.bell]Y[/][b]B[/b]" in rendered  # the value, shown as text
        await pilot.press("5")
        screen.query_one("#tau2-task-list", OptionList).highlighted = 0
        await pilot.pause()
        assert not clickable_actions(app)
        prompt = screen.query_one("#tau2-task-list", OptionList).get_option_at_index(0).prompt
        assert "[@click=app.bell]T[/][b]B" in str(prompt)


async def test_a_runs_recorded_stop_reason_is_never_markup_in_the_replay(tmp_path):
    """The replay screen's state line named the run's stop reason (``trajectory.json``, a file anyone who hands you
    a run wrote) inside markup: ``[@click=app.bell]`` became a link, ``[/]`` and styles were read."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import make_policy, run_episode
    from awm_tui.app import AwmApp
    from awm_tui.screens.replay import ReplayScreen
    from test_tui_play import start, wait_until

    catalog = Catalog.load()
    scenario = catalog.get("pinecrest_online_store")
    run = tmp_path / "run"
    await run_episode(catalog, scenario, 4, make_policy("oracle", scenario, 4), run_dir=run)
    trajectory = json.loads((run / "trajectory.json").read_text())
    trajectory["awm"]["stop_reason"] = "[@click=app.bell]done[/] [b]B[/b]"
    (run / "trajectory.json").write_text(json.dumps(trajectory))
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(160, 42)) as pilot:
        await start(app, pilot)
        app.open_replay(run)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_until(pilot, lambda: screen.run.states)
        await pilot.pause()
        state = str(screen.query_one("#replay-state").render())
        assert "stop: [@click=app.bell]done[/] [b]B[/b]" in state, state
        assert not clickable_actions(app)
