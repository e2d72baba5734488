"""Whether a screen was left, for its late callbacks and workers (a database build, a replay's re-execution, a
dashboard's refresh): one that ends after the screen was closed, or while it is being removed, fills nothing."""
from __future__ import annotations

from textual.screen import Screen


def screen_left(screen: Screen) -> bool:
    """The screen was closed (it leaves the app's screen stack at once, before it is removed) or is gone. Still
    attached is not enough: a screen being removed loses its widgets first (esc right after enter, a busy machine)."""
    return not screen.is_attached or screen not in screen.app.screen_stack
