"""The footer of every screen: Textual's, which keeps "? Keys" (the key help, where every key is listed) on screen when
the screen's keys do not all fit: the others give way whole, from the right (Quit, then the screen's from its last),
the way back last; a key is never shown cut."""
from __future__ import annotations

from textual import events
from textual.geometry import Size
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEPT = "help"  # the action of "? Keys": always shown
GIVEN_UP_LAST = "back"  # the action of "esc Back"


def _width(key: FooterKey, viewport: Size) -> int:
    """The columns the key takes, as its own styles lay it out (known once it is mounted, before any layout)."""
    return key.get_content_width(viewport, viewport) + key.styles.gutter.width + key.styles.margin.width


class KeyFooter(Footer):
    async def recompose(self) -> None:  # the footer is composed again whenever the screen's bindings change
        await super().recompose()
        self._fit(self.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        keys = list(self.query_children(FooterKey))
        if not width or not keys:
            return
        viewport = Size(width, 1)
        palette = [k for k in keys if k.has_class("-command-palette")]  # docked on the right, always shown
        keys = [k for k in keys if k not in palette]
        widths = {k: _width(k, viewport) for k in keys}
        used = sum(widths.values())
        room = width - sum(_width(k, viewport) for k in palette)
        shown = set(keys)
        for key in sorted((k for k in reversed(keys) if k.action != KEPT), key=lambda k: k.action == GIVEN_UP_LAST):
            if used <= room:
                break
            shown.discard(key)
            used -= widths[key]
        for key in keys:
            key.display = key in shown
