"""awm-tui: the Textual front end over awm_engine."""
from __future__ import annotations

import argparse
import sys
from functools import partial

from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider

from awm_engine.catalog import Catalog

from .actions import ACTIONS, bindings, user_keymap
from .screens.catalog import CatalogScreen
from .screens.environment import EnvironmentScreen
from .screens.help import HelpScreen


class AwmCommands(Provider):
    """Palette commands: the registry's actions for this screen, and "open <environment>"."""

    def _commands(self):
        screen = self.screen
        scope = "environment" if isinstance(screen, EnvironmentScreen) else "catalog"
        for a in ACTIONS:
            if a.scope in (scope, "app") and a.action not in ("command_palette",):
                target = screen if a.scope != "app" else self.app
                yield f"{a.description} ({a.id})", partial(target.run_action, a.action), a.id
        catalog = getattr(self.app, "catalog", None)
        for s in catalog or []:
            yield f"open: {s.key}", partial(self.app.open_environment, s.key), s.name

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

    def __init__(self, data_dirs: list[str] | None = None, cursor_blink: bool = True):
        super().__init__()
        self.data_dirs = data_dirs
        self.cursor_blink = cursor_blink
        self.catalog: Catalog | None = None
        self.keymap = user_keymap()

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        self.push_screen(CatalogScreen(self.data_dirs))

    def open_environment(self, key: str) -> None:
        if self.catalog is None:
            return
        self.push_screen(EnvironmentScreen(self.catalog.get(key)))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="awm-tui", description="Browse, play and evaluate AWM environments.")
    parser.add_argument("--data", action="append", metavar="DIR",
                        help="AWM data directory (repeatable); default: the bundled sample_envs/")
    args = parser.parse_args(argv)
    AwmApp(args.data).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
