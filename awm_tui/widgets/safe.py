"""No untrusted text carries an escape sequence to the terminal (``awm_engine.data.terminal``).

Two layers:

- where untrusted text enters a widget (tool results, descriptions, tasks, transcripts, verdicts, SQL results), it
  is made ``visible`` first (``shown``), so the layout measures what is shown;
- under every widget, ``VisibleControls`` (installed by ``AwmApp.get_line_filters``) makes visible any control
  character still in a rendered line — text that reached a widget some other way — and keeps the line the width the
  layout gave it; it also drops a hyperlink whose target holds a control character (Textual writes the target
  inside an OSC 8 sequence).
"""
from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from awm_engine.data.terminal import is_safe, visible


def shown(text: object, style: str = "") -> Text:
    """Untrusted text as a ``Text`` for a widget: control characters visible, never read as markup."""
    return Text(visible(text), style=style)


class VisibleControls(LineFilter):
    """A line filter that makes every control character in a rendered line visible (the net under every widget)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if all(control or (is_safe(text) and not (style is not None and style.link))
               for text, style, control in segments):
            return segments
        width = Segment.get_line_length(segments)
        out = []
        for text, style, control in segments:
            if control:
                out.append(Segment(text, style, control))
                continue
            if style is not None and style.link and not is_safe(style.link):
                style = style.update_link(None)
            out.append(Segment(text if is_safe(text) else visible(text), style))
        return Segment.adjust_line_length(out, width)  # the width the layout gave the line (the rest is cut)


VISIBLE_CONTROLS = VisibleControls()
