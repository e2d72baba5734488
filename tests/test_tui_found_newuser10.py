"""Found by a new user on real data (newuser10): each item with a test that failed before its fix. Pilot tests wait
on conditions, never on fixed pauses."""
from __future__ import annotations

from test_tui_play_typing import burst, events_of, open_play, typed_keys, wait_until
from textual.widgets import Input

from awm_tui.app import AwmApp

SIZE = (140, 42)


def _notified(app, needle: str) -> bool:
    return any(needle in str(n.message) for n in app._notifications)


async def test_a_number_typed_into_an_integer_field_is_never_sent_as_another_number(tmp_path):
    """Typed fast into an integer field, "3.5" was sent as 35 (the field silently dropped the "."); it is kept as
    typed, refused with the field's name, and nothing is called until it is an integer."""
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "maple_library_lending")
        burst(app, typed_keys(screen.tools, "renew_loan", {"loan_id": "3.5"}))
        await wait_until(pilot, lambda: _notified(app, "loan_id"))
        field = screen.fields["loan_id"]
        assert field.value == "3.5"  # every key typed is kept
        assert not field.is_valid  # and the field says it is not an integer
        assert not events_of(screen, "ToolCall")  # nothing sent
        assert _notified(app, "'3.5' is not an integer")
        # corrected (ctrl+a selects all of the field, then the new value replaces it): called with exactly that
        burst(app, ["ctrl+a", "3", "ctrl+j"])
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        assert [c.arguments for c in events_of(screen, "ToolCall")] == [{"loan_id": 3}]


async def test_money_typed_into_a_number_field_is_refused_not_stripped(awm_real, tmp_path):
    """A real environment's number field (rover's search radius): "$2" was sent as 2.0, "nan" as NaN (no JSON)."""
    app = AwmApp([str(awm_real)], cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "rover")
        tool = next(t for t in screen.tools if t["name"] == "search_walkers")
        values = {name: "" for name in tool["inputSchema"]["properties"]}
        burst(app, typed_keys(screen.tools, "search_walkers", {**values, "service_radius_miles": "$2"}))
        await wait_until(pilot, lambda: _notified(app, "service_radius_miles: '$2' is not a number"))
        assert screen.fields["service_radius_miles"].value == "$2"
        field: Input = screen.fields["service_radius_miles"]
        field.value = "nan"
        burst(app, ["ctrl+j"])
        await wait_until(pilot, lambda: _notified(app, "'nan' is not a finite number"))
        assert not events_of(screen, "ToolCall")
