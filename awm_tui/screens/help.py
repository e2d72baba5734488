"""Every key, from the action registry (with the user's remappings)."""
from __future__ import annotations

from rich.table import Table as RichTable
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..actions import ACTIONS, SCOPE_TITLES, key_label


def keys_table(keymap: dict[str, str]) -> RichTable:
    table = RichTable(title="awm keys", expand=True)
    for col in ("where", "keys", "action", "id"):
        table.add_column(col)
    for a in ACTIONS:
        action = a.description + (f" (CLI twin: {a.cli})" if a.cli else "")
        table.add_row(SCOPE_TITLES.get(a.scope, a.scope), key_label(keymap.get(a.id, a.keys)), action, a.id)
    return table


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """

    def __init__(self, keymap: dict[str, str]):
        super().__init__()
        self.keymap = keymap

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(keys_table(self.keymap))
            yield Static("Remap any key by id in ~/.config/awm/config.toml, e.g.  [keys]  \"catalog.search\" = \"f\"."
                         "  ctrl+p opens the command palette.")
