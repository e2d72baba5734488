"""A table that renders only the rows on screen, so 1,000+ rows filter and scroll without lag.

Textual's DataTable measures and lays out every row on each change; this widget keeps plain tuples
of strings and draws visible lines on demand (``render_line``), with a sticky header, a cursor row,
keyboard and mouse selection.
"""
from __future__ import annotations

from functools import partial

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from awm_engine.data.terminal import visible


class VirtualTable(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor", "virtual-table--odd"}
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    VirtualTable > .virtual-table--header { background: $panel; color: $text; text-style: bold; }
    VirtualTable > .virtual-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground;
                                            text-style: bold; }
    VirtualTable > .virtual-table--odd { background: $surface-lighten-1; }
    """
    BINDINGS = [
        Binding("up", "cursor(-1)", show=False), Binding("down", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "jump(0)", show=False), Binding("end", "jump(-1)", show=False),
        Binding("enter", "select", show=False),
    ]
    cursor_row = reactive(0)

    class RowSelected(Message):
        def __init__(self, table: "VirtualTable", row_index: int, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.row_index = row_index
            self.key = key

    class HeaderSelected(Message):
        def __init__(self, table: "VirtualTable", column_index: int) -> None:
            super().__init__()
            self.table = table
            self.column_index = column_index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: list[str] = []
        self.widths: list[int] = []
        self.base_widths: list[int] = []
        self.grow: list[int] = []
        self.key_column: int | None = None
        self.shrink: list[int] = []
        self.rows: list[tuple[str, ...]] = []
        self.keys: list[str] = []

    # -- data ---------------------------------------------------------------------------------
    def set_columns(self, names: list[str], widths: list[int], grow: list[int] | tuple[int, ...] = (),
                    key: int | None = None, shrink: list[int] | tuple[int, ...] = ()) -> None:
        """``widths`` are the least widths; the columns in ``grow`` (indexes, first served first) widen into the
        space left, up to their longest cell. ``key``: the column users act on (a scenario key they pass to
        ``--scenario``) is never cut: it is as wide as its longest cell. When the columns do not fit, those in
        ``shrink`` give way first, in that order, down to nothing (hidden), so the columns a user acts on stay on
        screen without horizontal scrolling."""
        self.columns, self.base_widths, self.grow = list(names), list(widths), list(grow)
        self.key_column, self.shrink = key, list(shrink)
        self._fit()

    def set_rows(self, rows: list[tuple], keys: list[str] | None = None) -> None:
        # cells are plain text padded by length: control characters visible (names, descriptions are untrusted)
        self.rows = [tuple("" if v is None else visible(v) for v in row) for row in rows]
        self.keys = list(keys) if keys is not None else [str(i) for i in range(len(rows))]
        self.cursor_row = min(self.cursor_row, max(0, len(self.rows) - 1))
        self._fit()
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def get_row_at(self, index: int) -> list[str]:
        return list(self.rows[index])

    @property
    def cursor_key(self) -> str | None:
        return self.keys[self.cursor_row] if 0 <= self.cursor_row < len(self.keys) else None

    def _longest(self, i: int) -> int:
        return max([len(self.columns[i])] + [len(row[i]) for row in self.rows if i < len(row)])

    def _fit(self) -> None:
        widths = list(self.base_widths)
        if self.key_column is not None and self.key_column < len(widths):
            widths[self.key_column] = max(widths[self.key_column], self._longest(self.key_column))
        room = self.scrollable_content_region.width - 1
        if room > 0:
            over = sum(w + 1 for w in widths) - room
            for i in self.shrink:
                if over <= 0:
                    break
                cut = min(over, widths[i] + 1)
                if widths[i] - cut < 3:  # too narrow to read: hidden, with its separator
                    cut = widths[i] + 1
                widths[i] = widths[i] - cut if cut <= widths[i] else 0
                over -= cut
        spare = room - sum(w + 1 for w in widths if w) if room > 0 else 0
        for i in self.grow:
            if spare <= 0:
                break
            if widths[i] == 0:
                continue
            extra = min(spare, max(0, self._longest(i) - widths[i]))
            widths[i] += extra
            spare -= extra
        self.widths = widths
        self.virtual_size = Size(sum(w + 1 for w in self.widths if w), len(self.rows) + 1)

    def on_resize(self) -> None:
        self._fit()

    # -- drawing ------------------------------------------------------------------------------
    def _line(self, cells: tuple[str, ...], style: Style) -> list[Segment]:
        text = " ".join(c[:w].ljust(w) for c, w in zip(cells, self.widths) if w)
        return [Segment(text + " ", style)]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("virtual-table--header")
            strip = Strip(self._line(tuple(self.columns), style))
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, base)
            if index == self.cursor_row:
                style = base + self.get_component_rich_style("virtual-table--cursor")
            elif index % 2:
                style = base + self.get_component_rich_style("virtual-table--odd")
            else:
                style = base
            strip = Strip(self._line(self.rows[index], style))
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width, style)

    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh()
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    # -- input --------------------------------------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor_row = max(0, min(len(self.rows) - 1, self.cursor_row + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        if self.rows:
            self.cursor_row = len(self.rows) - 1 if where < 0 else 0

    def move(self, key: str) -> None:
        """What ↑ ↓ PgUp PgDn Home End do (``down``, ``up``, ``pagedown``, ``pageup``, ``home``, ``end``), for a screen
        that reads them before the table (``actions.row_moves``)."""
        {"down": partial(self.action_cursor, 1), "up": partial(self.action_cursor, -1),
         "pagedown": partial(self.action_page, 1), "pageup": partial(self.action_page, -1),
         "home": partial(self.action_jump, 0), "end": partial(self.action_jump, -1)}[key]()

    def action_select(self) -> None:
        if self.rows:
            self.post_message(self.RowSelected(self, self.cursor_row, self.cursor_key))

    def on_click(self, event) -> None:
        if event.y == 0:
            x = event.x + self.scroll_offset.x
            edge = 0
            for i, w in enumerate(self.widths):
                if not w:  # hidden
                    continue
                edge += w + 1
                if x < edge:
                    self.post_message(self.HeaderSelected(self, i))
                    return
            return
        index = self.scroll_offset.y + event.y - 1
        if 0 <= index < len(self.rows):
            if index == self.cursor_row:
                self.action_select()
            self.cursor_row = index
