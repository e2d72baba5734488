"""The one registry of named actions: it drives key bindings, the footer, the help screen and the
command palette. Users remap keys by action id in the ``[keys]`` table of the awm config file::

    [keys]
    "catalog.search" = "f"
    "env.back" = "escape,backspace"
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from textual.binding import Binding
from textual.keys import format_key

from awm_engine.agent.endpoints import ConfigError, load_config


@dataclass(frozen=True)
class ActionSpec:
    id: str  # stable id users remap by, e.g. "catalog.search"
    action: str  # the Textual action it runs
    keys: str  # default keys, comma-separated
    description: str
    scope: str  # app | catalog | environment | data | tools
    show: bool = True  # in the footer
    key_display: str | None = None
    priority: bool = False
    cli: str | None = None  # the CLI twin, named in the help screen and the palette
    footer: str | None = None  # a shorter label for the footer (80 columns hold every screen's keys)


def row_moves(scope: str, noun: str) -> tuple[ActionSpec, ...]:
    """↑ ↓ PgUp PgDn Home End in a screen's list (its ``move_row``: ``VirtualTable.move``), read as the app reads each
    key (priority), so that an enter read at once after them opens the row they moved to."""
    nouns = noun.capitalize() + "s"
    moves = (("down", "down", f"Next {noun}"), ("up", "up", f"Previous {noun}"),
             ("page_down", "pagedown", f"{nouns} page down"), ("page_up", "pageup", f"{nouns} page up"),
             ("first", "home", f"First {noun}"), ("last", "end", f"Last {noun}"))
    return tuple(ActionSpec(f"{scope}.{name}", f"move_row('{key}')", key, description, scope, show=False,
                            priority=True) for name, key, description in moves)


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("app.quit", "quit", "ctrl+q", "Quit", "app", priority=True),
    ActionSpec("app.help", "help", "f1,question_mark", "Keys", "app", key_display="?"),
    # priority: the palette opens as the key is read, so the letters typed right after it are its search's (they
    # went to the screen below: r reversed the catalog, the rest were lost, and enter ran the palette's first entry)
    ActionSpec("app.palette", "command_palette", "ctrl+p", "Commands", "app", show=False, priority=True),
    # priority, on every screen: the focus moves as tab is read, so the keys typed right after it land in the field
    # it moved to (Textual's own tab is read after the focused widget's queue: "url tab model" typed at once put
    # the model into the URL field, and an enter after a tab pressed the widget the tab had left)
    ActionSpec("app.next_field", "focus_next", "tab", "Next field", "app", show=False, priority=True),
    ActionSpec("app.previous_field", "focus_previous", "shift+tab", "Previous field", "app", show=False,
               priority=True),
    # the catalog's keys are read as the app reads them (priority), so none overtakes another typed before it: the
    # letters typed right after / land in the search box, the keys typed right after enter or esc in it land in
    # the list (screens/catalog.py moves the focus at once); in the search box s, r and the arrows are typed
    ActionSpec("catalog.search", "focus_search", "slash", "Search", "catalog", key_display="/", priority=True),
    ActionSpec("catalog.open", "open_selected", "enter", "Open", "catalog", priority=True, show=False),  # as before
    ActionSpec("catalog.sort", "cycle_sort", "s", "Sort", "catalog", priority=True),
    ActionSpec("catalog.reverse", "reverse_sort", "r", "Reverse", "catalog", priority=True),
    ActionSpec("catalog.clear", "clear_search", "escape", "Clear search", "catalog", show=False, priority=True),
    *row_moves("catalog", "environment"),
    # priority: ctrl+e opens the dashboard from the search box too (the field's own ctrl+e is its End key)
    ActionSpec("app.evals", "evaluations", "ctrl+e", "Evaluations", "catalog", priority=True),
    # priority: read at once, so the keys typed after it are the catalog's (not lost on the screen being left)
    ActionSpec("env.back", "back", "escape", "Back", "environment", priority=True),
    # the tab keys are not in the footer: the tab bar shows them ("1 Overview  2 Schema …")
    ActionSpec("env.overview", "show_tab('overview')", "1", "Overview", "environment", show=False),
    ActionSpec("env.schema", "show_tab('schema')", "2", "Schema", "environment", show=False),
    ActionSpec("env.data", "show_tab('data')", "3", "Data", "environment", show=False),
    ActionSpec("env.tools", "show_tab('tools')", "4", "Tools", "environment", show=False),
    ActionSpec("env.tasks", "show_tab('tasks')", "5", "Tasks", "environment", show=False),
    ActionSpec("data.next_page", "next_page", "n,pagedown", "Next page", "environment", show=False),
    ActionSpec("data.prev_page", "prev_page", "p,pageup", "Previous page", "environment", show=False),
    # priority: the query typed right after ctrl+e lands in the box (not in the pane that had the focus); in the
    # box, ctrl+e is still its End key (screens/environment.py)
    ActionSpec("data.sql", "focus_sql", "ctrl+e", "SQL", "environment", show=False, priority=True),
    ActionSpec("tools.source", "toggle_source", "ctrl+s", "Handler source", "environment", show=False),
    ActionSpec("env.play", "play_task", "ctrl+g", "Play task", "environment"),
    ActionSpec("env.rollout", "rollout_task", "ctrl+l", "Live rollout", "environment"),
    ActionSpec("env.doctor", "diagnose", "ctrl+d", "Diagnose (awm env doctor)", "environment", show=False),
    ActionSpec("tau2.play_user", "play_user", "ctrl+u", "Play as the user", "tau2", footer="Play user"),
    ActionSpec("play.call", "call_tool", "ctrl+j,ctrl+enter", "Call tool", "play", priority=True),
    ActionSpec("play.answer", "submit_answer", "ctrl+f", "Answer & verify", "play", priority=True),
    ActionSpec("play.select_all", "select_all_text", "ctrl+a", "Select all (text field)", "play", show=False,
               priority=True),
    ActionSpec("play.back", "back", "escape", "Back", "play"),
    ActionSpec("play.observation", "toggle_observation", "ctrl+o", "Fold / unfold the last result", "play",
               show=False),  # its key is in the folded result's title
    # read as the app reads the key (priority), never after the focused widget's queue: a key typed right after
    # one of these lands where that one moved the focus (screens/play.py holds keys while a form is built)
    ActionSpec("play.next_field", "next_field", "tab", "Next field", "play", show=False, priority=True),
    ActionSpec("play.previous_field", "previous_field", "shift+tab", "Previous field", "play", show=False,
               priority=True),
    ActionSpec("play.enter", "enter_key", "enter", "Into the form (tool list) / call (field) / answer (answer box)",
               "play", show=False, priority=True),
    ActionSpec("play.tool_down", "move_tool('down')", "down", "Next tool (tool list)", "play", show=False,
               priority=True),
    ActionSpec("play.tool_up", "move_tool('up')", "up", "Previous tool (tool list)", "play", show=False,
               priority=True),
    ActionSpec("play.tool_first", "move_tool('home')", "home", "First tool (tool list)", "play", show=False,
               priority=True),
    ActionSpec("play.tool_last", "move_tool('end')", "end", "Last tool (tool list)", "play", show=False,
               priority=True),
    ActionSpec("play.tool_page_down", "move_tool('pagedown')", "pagedown", "Tools page down", "play", show=False,
               priority=True),
    ActionSpec("play.tool_page_up", "move_tool('pageup')", "pageup", "Tools page up", "play", show=False,
               priority=True),
    ActionSpec("rollout.start", "start", "ctrl+r", "Start", "rollout", show=False),
    ActionSpec("rollout.next", "next_step", "n", "Next step", "rollout"),
    ActionSpec("rollout.run", "run_to_end", "r", "Run to end", "rollout"),
    ActionSpec("rollout.pause", "pause", "space", "Pause", "rollout"),
    ActionSpec("rollout.stop", "stop", "x", "Stop", "rollout"),
    ActionSpec("rollout.back", "back", "escape", "Back", "rollout"),
    ActionSpec("gen.open", "open_scenario", "enter", "Open the environment", "gen", priority=True, footer="Open",
               cli="awm catalog show --data DIR SCENARIO"),
    ActionSpec("gen.detail", "focus_detail", "d", "Attempts and errors", "gen", footer="Errors",
               cli="awm gen status DIR --json"),
    ActionSpec("gen.reload", "reload", "r", "Reload", "gen", cli="awm gen status DIR"),
    ActionSpec("gen.back", "back", "escape", "Back", "gen"),
    ActionSpec("replay.next", "step(1)", "right,j", "Next step", "replay", priority=True, footer="Next"),
    ActionSpec("replay.prev", "step(-1)", "left,k", "Previous step", "replay", priority=True, footer="Previous"),
    ActionSpec("replay.verdict", "show_verdict", "v", "Steps / verdict", "replay", footer="Verdict"),
    ActionSpec("replay.back", "back", "escape", "Back", "replay"),
    # priority, and the focus moves at once: the arrows and enter typed right after ctrl+o are the rollouts'
    ActionSpec("evals.rollouts", "focus_rollouts", "ctrl+o", "Rollouts", "evals", priority=True),
    # read as the app reads the key, as in the catalog (the rollouts' keys too, so that none overtakes another): enter
    # opens the rollout the keys before it moved to, and the keys typed after it (esc) wait for the screen it opened
    # and land in it (app.py); they closed the dashboard, and the replay opened over the catalog
    ActionSpec("evals.open", "open_rollout", "enter", "Open the rollout (rollouts)", "evals", show=False,
               priority=True),
    *row_moves("evals", "rollout"),
    ActionSpec("evals.back", "back", "escape", "Back", "evals"),
    ActionSpec("evals.grouping", "toggle_grouping", "g", "Columns: paper / AWM (MCP-Universe)", "evals",
               footer="Columns"),
    ActionSpec("evals.report", "bench_report", "b", "Report across benchmarks", "evals", footer="Report"),
    ActionSpec("report.copy", "copy_markdown", "c", "Copy as Markdown", "report"),
    ActionSpec("report.reload", "reload", "r", "Reload the runs", "report"),
    ActionSpec("report.back", "back", "escape", "Back", "report"),
)
ENTRY_ACTIONS = ("evals.rollouts", "evals.back")  # the screens of one entry or task opened from the dashboard

SCOPE_TITLES = {"app": "Everywhere", "catalog": "Catalog", "environment": "Environment", "tau2": "τ² domain",
                "play": "Play", "gen": "Generation run",
                "rollout": "Live rollout", "replay": "Replay", "evals": "Evaluations",
                "report": "Report across benchmarks"}


def bindings(scope: str, only: tuple[str, ...] | None = None) -> list[Binding]:
    """The scope's actions as key bindings (``only``: just these action ids)."""
    return [Binding(a.keys, a.action, a.footer or a.description, show=a.show, key_display=a.key_display,
                    priority=a.priority, id=a.id)
            for a in ACTIONS if a.scope == scope and (only is None or a.id in only)]


KEY_NAMES = {"escape": "esc", "enter": "enter", "backspace": "backspace", "pagedown": "pgdn", "pageup": "pgup",
             "delete": "del", "right": "→", "left": "←", "up": "↑", "down": "↓"}


def key_label(keys: str) -> str:
    """Keys as people write them: ``f1,question_mark`` → ``F1, ?``; ``slash`` → ``/``; ``n,pagedown`` →
    ``n, pgdn``."""
    out = []
    for key in keys.split(","):
        *modifiers, base = key.strip().split("+")
        name = KEY_NAMES.get(base) or (base.upper() if re.fullmatch(r"f\d+", base) else format_key(base))
        out.append("+".join(modifiers + [name]))
    return ", ".join(out)


def by_id(action_id: str) -> ActionSpec:
    return next(a for a in ACTIONS if a.id == action_id)


def user_keymap() -> dict[str, str]:
    """``[keys]`` from the config file, limited to known action ids."""
    try:
        keys = load_config().get("keys") or {}
    except ConfigError:
        return {}
    known = {a.id for a in ACTIONS}
    return {k: str(v) for k, v in keys.items() if k in known}
