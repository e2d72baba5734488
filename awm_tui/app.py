"""awm-tui: the Textual front end over awm_engine."""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import weakref
from functools import partial
from pathlib import Path

from textual import events
from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.widgets import Input, TextArea

from awm_engine.data.catalog import Catalog
from awm_engine.data.paths import not_a_directory
from awm_engine.data.run_formats import RunFormatError
from awm_engine.data.terminal import visible
from awm_engine.eval.runs import find_rollout_runs
from awm_engine.sandbox.host import harden_parent

from .actions import ACTIONS, bindings, user_keymap
from .screens.catalog import CatalogScreen
from .screens.environment import EnvironmentScreen
from .screens.help import HelpScreen
from .screens.replay import ReplayScreen
from .widgets.safe import VISIBLE_CONTROLS


class AwmCommands(Provider):
    """Palette commands: the registry's actions for this screen, and "open <environment>"."""

    def _commands(self):
        screen = self.screen
        scope = getattr(screen, "SCOPE", "catalog")
        bound = {getattr(b, "id", None) for b in getattr(screen, "BINDINGS", [])}
        for a in ACTIONS:
            if a.scope == scope and a.id not in bound:  # e.g. an entry screen offers only some of its scope's
                continue
            if a.scope in (scope, "app") and a.action not in ("command_palette",):
                target = screen if a.scope != "app" else self.app
                yield (f"{a.description} ({a.id})", partial(target.run_action, a.action),
                       a.id + (f" · CLI twin: {a.cli}" if a.cli else ""))
        catalog = getattr(self.app, "catalog", None)
        for s in catalog or []:
            yield f"open: {s.key}", partial(self.app.open_environment, s.key), s.name
        for run_dir in self.app.recent_runs():
            yield f"replay: {run_dir.name}", partial(self.app.open_replay, run_dir), str(run_dir)
        yield "evaluations", self.app.open_evaluations, "the evaluation dashboard"
        for gen_dir in self.app.gen_runs():
            yield f"generation run: {gen_dir.name}", partial(self.app.open_gen, gen_dir), f"awm gen status {gen_dir}"
        yield "report across benchmarks", self.app.open_report, "awm bench report over the dashboard's runs"

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)


class AwmApp(App):
    TITLE = "awm"
    CSS_PATH = "app.tcss"
    BINDINGS = bindings("app")
    COMMANDS = App.COMMANDS | {AwmCommands}
    # app.tcss lays the screens out for an 80×24 terminal by these classes (set on each screen)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, data_dirs: list[str] | None = None, cursor_blink: bool = True,
                 runs_root: Path | str = "outputs", replay: Path | str | None = None,
                 evaluation: Path | str | None = None, tau2_data=None, report: list[Path | str] | None = None,
                 gen: Path | str | None = None):
        super().__init__()
        self.data_dirs = data_dirs
        self.tau2_data = tau2_data  # a bench.tau2.data.Tau2Data: τ²-bench's domains in the catalog (screens/tau2.py)
        self.cursor_blink = cursor_blink
        self.runs_root = Path(runs_root)
        self.replay_dir = replay
        self.evaluation_dir = evaluation
        self.gen_dir = gen  # awm-tui --gen DIR: open the generation run view on it
        self.report_runs = report  # awm-tui --report RUN_DIR…: open the table across benchmarks on them
        self._pool = None
        self.catalog: Catalog | None = None
        self.keymap = user_keymap()
        self.sandbox_summary = ""
        self._mounted_screens: weakref.WeakSet = weakref.WeakSet()
        self._held_keys: list[events.Key] = []  # read while the screen on top was being mounted (in order)
        self._release_pending = False
        self._replaying_held = False

    async def on_event(self, event: events.Event) -> None:
        """A screen that is rebuilding what keys go to (the play form) holds them before any binding or widget
        sees them, and replays them in order when it is ready (``hold_key``)."""
        if isinstance(event, events.Key) and self._screen_stack:
            if self._hold_until_mounted(event):
                return
            hold = getattr(self.screen, "hold_key", None)
            if hold is not None and hold(event):
                return
            if await self._edit_key_in_order(event):
                return
        await super().on_event(event)

    async def _edit_key_in_order(self, event: events.Key) -> bool:
        """A key a text field does not type itself (backspace, ←, home, end, enter, esc …) is one of its bindings
        (or its screen's), which Textual runs only once the key has gone through the field's queue and bubbled back
        to the app: the letters typed after it overtook it ("abc⌫d" typed at once gave "abd" with the d typed before
        the ⌫: "abc"; "x enter" in a form sent the field as it was before the x). Read here instead, in order: the
        keys queued at the field before it are typed first, then its binding runs, before the next key is read. True
        when a binding took it; a key no binding takes goes on as Textual sends it."""
        focused = self.focused
        if event.is_forwarded or not isinstance(focused, (Input, TextArea)):
            return False
        if event.is_printable or (isinstance(focused, TextArea) and (
                event.key == "enter" or (event.key == "tab" and focused.tab_behavior == "indent"))):
            return False  # typed by the field itself, in its queue's order
        if self.screen.maximized is not None and event.key == "escape" and self.escape_to_minimize:
            return False
        if await self._check_bindings(event.key, priority=True):
            return True  # read at once, as Textual reads priority keys (tab, ctrl+j …)
        done = asyncio.Event()
        if focused.is_attached and focused.call_later(done.set):
            try:  # the field types every key queued at it before this one
                await asyncio.wait_for(done.wait(), 10)
            except asyncio.TimeoutError:
                pass
        return self.focused is focused and await self._check_bindings(event.key)

    # -- keys typed while a screen is still being mounted ------------------------------------------
    def _mounted(self, screen) -> bool:
        """Whether the screen and every widget it composed are mounted (remembered: widgets it mounts later, such
        as a play form, do not count)."""
        if screen in self._mounted_screens:
            return True
        if screen.is_mounted and all(w.is_mounted for w in screen.walk_children()):
            self._mounted_screens.add(screen)
            return True
        return False

    def _hold_until_mounted(self, event: events.Key) -> bool:
        """Keys read while the screen on top is still being mounted (one the key before opened: enter, ctrl+g …)
        wait, and are replayed in order once it is, so they land in it: esc typed right after enter popped a screen
        whose widgets were still mounting (Textual then stopped the app: "No Tab with id …"), and other keys acted on
        the screen below or were lost. True when the key is held."""
        if event.is_forwarded or self._replaying_held or event.key in ("ctrl+q", "ctrl+c"):
            return False  # a key back from the widgets (bubbling to the app's bindings) was read already
        if not self._held_keys and self._mounted(self.screen):
            return False
        self._held_keys.append(events.Key(event.key, event.character))
        self._release_soon()
        return True

    def _release_soon(self) -> None:
        if not self._release_pending:
            self._release_pending = True
            self.set_timer(0.01, self._release_held)

    async def _release_held(self) -> None:
        self._release_pending = False
        while self._held_keys:
            if not self._mounted(self.screen):  # a held key opened another screen: the rest wait for it
                self._release_soon()
                return
            key = self._held_keys.pop(0)
            self._replaying_held = True
            try:
                await self.on_event(key)
            finally:
                self._replaying_held = False

    def get_line_filters(self):
        """Textual's filters, then the net that makes any control character still in a rendered line visible
        (``widgets/safe.py``): no untrusted text carries an escape sequence to the terminal."""
        return [*super().get_line_filters(), VISIBLE_CONTROLS]

    def on_mount(self) -> None:
        import asyncio
        import signal

        try:  # the terminal went away: leave cleanly (stops live rollouts, their servers and the workers)
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.exit)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        if self.keymap:
            self.set_keymap(self.keymap)
        self.run_worker(self._measure_sandbox, thread=True, group="sandbox-probe")
        self.run_worker(self._import_ahead, thread=True, group="import-ahead")
        self.push_screen(CatalogScreen(self.data_dirs))
        if self.replay_dir:
            self.call_later(self.open_replay, self.replay_dir)
        elif self.evaluation_dir:
            self.call_later(self.open_evaluations, self.evaluation_dir)
        elif self.report_runs:
            self.call_later(self.open_report, self.report_runs)
        elif self.gen_dir:
            self.call_later(self.open_gen, self.gen_dir)

    def _import_ahead(self) -> None:
        """What the first environment, replay or verdict opened needs and takes long to import (sqlite_utils
        imports pandas when installed: about a second on a busy machine), imported off the UI thread while the
        catalog is read, so that opening it does not freeze the keys."""
        import sqlite_utils  # noqa: F401

    def _measure_sandbox(self) -> None:
        """The sandbox's protections, measured off the UI thread; any that is off is named in the header and a
        notification (``awm doctor sandbox`` is the CLI twin)."""
        from awm_engine.sandbox.host import protections

        p = protections()
        if p.off:
            self.call_from_thread(self._show_sandbox, p)

    def _show_sandbox(self, p) -> None:
        self.sandbox_summary = p.summary()
        self.sub_title = self.sandbox_summary
        details = "; ".join(f"{name.replace('_', ' ')}: {why}" for name, why in sorted(p.off.items()))
        self.notify(visible(details[:1200]), title="sandbox protections off (awm doctor sandbox)",
                    severity="warning", timeout=20, markup=False)

    async def get_pool(self):
        """Environment worker processes (started on first use): environment code never runs in the TUI."""
        if self._pool is None:
            from awm_engine.runtime.pool import EnvPool

            self._pool = EnvPool(workers=1)
            await self._pool.start()
        return self._pool

    async def on_unmount(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    def judge_endpoint(self):
        from awm_engine.agent.endpoints import ConfigError, judge_endpoint

        try:
            return judge_endpoint()
        except ConfigError as exc:
            self.notify(visible(exc), title="judge", severity="warning", markup=False)
            return None

    def recent_runs(self, limit: int = 50) -> list[Path]:
        return find_rollout_runs(self.runs_root, limit)

    def open_evaluations(self, selected: Path | str | None = None) -> None:
        """The dashboard on the runs under ``--runs``/eval, or beside ``selected`` (a run, opened), or in it (a folder
        of runs); anything else is said, and the dashboard says what it holds."""
        from awm_engine.eval.runs import find_eval_runs, is_eval_run

        from .screens.evals import EvalScreen

        if selected and not is_eval_run(Path(selected)):
            if find_eval_runs(selected):
                self.push_screen(EvalScreen(Path(selected)))
                return
            self.notify(visible(f"{selected}: not an evaluation run, nor a folder of them"), title="evaluations",
                        severity="error", markup=False, timeout=10)
            self.push_screen(EvalScreen(Path(selected)))
            return
        root = Path(selected).parent if selected else self.runs_root / "eval"
        self.push_screen(EvalScreen(root, Path(selected) if selected else None))

    def gen_runs(self) -> list[Path]:
        """Generation runs for the palette: the --data directories that are one, then those under --runs."""
        from awm_engine.gen.store import find_gen_runs, is_gen_run

        found = [Path(d) for d in self.data_dirs or [] if is_gen_run(d)] + find_gen_runs(self.runs_root)
        return list(dict.fromkeys(found))

    def open_gen(self, out: Path | str) -> None:
        """The generation run view (``awm gen status DIR``'s twin); it waits for a run that has not started."""
        from .screens.gen import GenRunScreen

        self.push_screen(GenRunScreen(Path(out)))

    def open_report(self, run_dirs: list[Path | str] | None = None) -> None:
        """The table across benchmarks (``awm bench report``) over ``run_dirs``, by default the runs the
        evaluation dashboard lists (oldest first: a model's newest run of a benchmark is the one shown)."""
        from awm_engine.eval.runs import find_eval_runs

        from .screens.report import BenchReportScreen

        if run_dirs is None:
            run_dirs = list(reversed(find_eval_runs(self.runs_root / "eval", newest_first=True)))
        self.push_screen(BenchReportScreen(list(run_dirs)))

    def open_replay(self, run_dir: Path | str) -> None:
        from awm_engine.bench.mcp_universe.run import rollout_record
        from awm_engine.bench.tau2.episode import run_tau2_data

        from .screens.tau2 import Tau2ReplayScreen

        if (record := rollout_record(run_dir)) is not None:  # an MCP-Universe rollout: no database to replay
            from .screens.mcp_universe import McpuTaskScreen, run_simulated

            self.push_screen(McpuTaskScreen(record, run_simulated(Path(run_dir).resolve().parents[2])))
            return
        try:
            tau2 = run_tau2_data(run_dir)  # a τ²-bench rollout: replayed on its domain
            self.push_screen(Tau2ReplayScreen(run_dir, self.tau2_data or tau2) if tau2 else ReplayScreen(run_dir))
        except (FileNotFoundError, RunFormatError) as exc:  # no run there, or a newer awm's run
            self.notify(visible(exc), title="replay", severity="error", markup=False)

    def open_environment(self, key: str) -> None:
        from awm_engine.bench.tau2.data import domain_of_key

        if self.tau2_data is not None and domain_of_key(key):
            from awm_engine.bench.tau2.episode import DomainScenario

            from .screens.tau2 import Tau2Screen

            self.push_screen(Tau2Screen(DomainScenario(self.tau2_data, domain_of_key(key))))
            return
        if self.catalog is None:
            return
        self.push_screen(EnvironmentScreen(self.catalog.get(key)))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap))


def unusable_argument(args: argparse.Namespace) -> str | None:
    """Why an argument of awm-tui cannot be used (None when all can): a path that is not there, a file where a
    directory is wanted, a directory that is not a run of the kind asked for."""
    from awm_engine.eval.runs import find_eval_runs, is_eval_run

    for option, paths in (("--data", args.data or []), ("--report", args.report or [])):
        for path in paths:
            if not_a_directory(path):
                return f"{option} {path}: {not_a_directory(path)}"
    if args.eval:
        if not_a_directory(args.eval):
            return f"--eval {args.eval}: {not_a_directory(args.eval)}"
        if not is_eval_run(Path(args.eval)) and not find_eval_runs(args.eval):
            return (f"--eval {args.eval}: neither an evaluation run nor a folder of them (a run holds config.json "
                    "and results.jsonl, written by awm eval run --out DIR or awm bench … run)")
    if args.replay and not_a_directory(args.replay):
        return f"--replay {args.replay}: {not_a_directory(args.replay)}"
    if args.gen and Path(args.gen).exists() and not Path(args.gen).is_dir():
        return f"--gen {args.gen}: not a directory"
    if args.tau2_data and not_a_directory(args.tau2_data):
        return f"--tau2-data {args.tau2_data}: {not_a_directory(args.tau2_data)}"
    return None


def main(argv: list[str] | None = None) -> int:
    harden_parent()  # nothing this process starts can read its environment (API keys) through /proc
    parser = argparse.ArgumentParser(prog="awm-tui", description="Browse, play and evaluate AWM environments.")
    parser.add_argument("--data", action="append", metavar="DIR",
                        help="AWM data directory (repeatable); default: the bundled sample_envs/")
    parser.add_argument("--replay", metavar="RUN_DIR", help="open a run directory in the replay view")
    parser.add_argument("--eval", metavar="RUN_DIR", help="open the evaluation dashboard on this run")
    parser.add_argument("--runs", metavar="DIR", default="outputs",
                        help="where play and live runs are written and recent runs are found (default outputs/)")
    parser.add_argument("--tau2-data", metavar="DIR", help="τ²-bench data directory: its domains in the catalog")
    parser.add_argument("--airline-db", metavar="FILE", help="τ²-bench's airline db.json, when DIR has none")
    parser.add_argument("--report", nargs="+", metavar="RUN_DIR",
                        help="open the table across benchmarks on these runs (as awm bench report RUN_DIR…)")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run untrusted code even where the sandbox's namespace layer is unavailable (weaker "
                             "protection, recorded in every run; see awm doctor sandbox)")
    parser.add_argument("--gen", metavar="DIR",
                        help="open the generation run view on this awm gen --out directory (as awm gen status DIR)")
    args = parser.parse_args(argv)
    problem = unusable_argument(args)
    if problem:
        parser.error(problem)  # exit 2 with the reason, as the CLI does, before the terminal is taken over
    if args.unsafe_no_sandbox:
        os.environ["AWM_UNSAFE_NO_SANDBOX"] = "1"
    tau2 = None
    if args.tau2_data:
        from awm_engine.bench.tau2.data import Tau2Data

        tau2 = Tau2Data(Path(args.tau2_data).resolve(), Path(args.airline_db).resolve() if args.airline_db else None)
    AwmApp(args.data, runs_root=args.runs, replay=args.replay, evaluation=args.eval, tau2_data=tau2,
           report=args.report, gen=args.gen).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
