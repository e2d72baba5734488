"""Input lands where it is shown: keys typed at full speed (no pauses, every key queued before the app handles any)
into the largest form of an environment reach the server as the arguments of the fields they were typed into —
including keys typed while the form of a newly highlighted tool is still being built."""
import json
import sqlite3

from textual import events
from textual.widgets import OptionList

from awm_engine.data.catalog import Catalog
from awm_engine.data.schema_examples import property_type
from awm_tui.app import AwmApp
from awm_tui.screens.play import PlayScreen, is_flat

SIZE = (140, 42)
KEY_NAMES = {" ": "space", ".": "full_stop", "-": "minus", "+": "plus", "@": "at", ",": "comma", "'": "apostrophe",
             "/": "slash", ":": "colon", "_": "underscore", "#": "number_sign"}


async def wait_until(pilot, predicate, timeout=90.0):
    """Wait on a condition (never on a fixed pause): the loop yields to the app until the predicate holds."""
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError("timed out waiting for the UI")


def burst(app, keys):
    """Queue every key at once (``pilot.press`` lets the app go idle between keys, which hides the races)."""
    for key in keys:
        name = KEY_NAMES.get(key, key)
        char = key if len(key) == 1 else {"space": " ", "tab": "\t", "enter": "\r"}.get(key)
        event = events.Key(name, char)
        event.set_sender(app)
        app._driver.send_message(event)


def typed_keys(tools, target, values, noise=True):
    """From the tool list: highlight ``target`` (through a detour past it and back when ``noise``, so that a form
    rebuild is under way while the next keys arrive), enter its form, type each field then tab, call."""
    index = [t["name"] for t in tools].index(target)
    keys = ["home"]
    if noise and index + 1 < len(tools):
        keys += ["down"] * (index + 1) + ["up"]
    else:
        keys += ["down"] * index
    keys.append("enter")  # jumps into the first field
    order = list(next(t for t in tools if t["name"] == target)["inputSchema"]["properties"])
    for i, name in enumerate(order):
        keys += list(values[name]) + (["tab"] if i < len(order) - 1 else [])
    keys.append("ctrl+j")
    return keys


def events_of(screen, kind):
    return [e for e in screen.query_one("#transcript").events if type(e).__name__ == kind]


async def open_play(app, pilot, scenario_key, task=0):
    await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
    scenario = app.catalog.get(scenario_key)
    app.push_screen(PlayScreen(scenario, task))
    await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.tools)
    screen = app.screen
    await wait_until(pilot, lambda: screen.query_one("#play-tools", OptionList).has_focus)
    return screen


ADDRESS = {"label": "Cabin", "recipient_name": "Ada Q. Lovelace", "street": "12 Analytical Way", "city": "Portland",
           "state": "OR", "postal_code": "97201", "country": "US", "phone": "+1-503-555-0199", "is_default": "true"}
MOVED = {"label": "Lab", "recipient_name": "Grace B. Hopper", "street": "1 Compiler Ct, Apt 7", "city": "Arlington",
         "state": "VA", "postal_code": "22201", "country": "USA", "phone": "+1-703-555-0142", "is_default": "false"}


async def test_full_speed_typing_into_the_largest_form_reaches_the_server(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "pinecrest_online_store")
        # 1. a 9-field form, reached through a detour so a rebuild is under way while its keys arrive
        burst(app, typed_keys(screen.tools, "create_address", ADDRESS))
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        calls = events_of(screen, "ToolCall")
        assert [c.tool for c in calls] == ["create_address"]
        assert calls[0].arguments == {**ADDRESS, "is_default": True}
        created = events_of(screen, "Observation")[0]
        assert not created.is_error, created.text
        address_id = json.loads(created.text)["id"]
        # 2. the environment's largest form (10 fields), from its own field, then the answer: all in one burst
        update = next(t for t in screen.tools if t["name"] == "update_address")["inputSchema"]
        assert len(update["properties"]) == max(len((t.get("inputSchema") or {}).get("properties") or {})
                                                for t in screen.tools if is_flat(t.get("inputSchema") or {}))
        values = {**MOVED, "address_id": str(address_id)}
        tool_list = screen.query_one("#play-tools", OptionList)
        tool_list.focus()  # as a click on the list would
        await wait_until(pilot, lambda: tool_list.has_focus)
        burst(app, typed_keys(screen.tools, "update_address", values)
              + ["ctrl+f"] + list("moved, fast.") + ["enter"])
        await wait_until(pilot, lambda: screen.reports is not None)
        calls = events_of(screen, "ToolCall")
        assert [c.tool for c in calls] == ["create_address", "update_address"]
        assert calls[1].arguments == {**MOVED, "is_default": False, "address_id": address_id}
        # what reached the server: the row in the episode's final database, field by field
        final = sqlite3.connect(screen.episode.run_dir / "final.db")
        final.row_factory = sqlite3.Row
        row = final.execute("SELECT * FROM addresses WHERE id = ?", (address_id,)).fetchone()
        for name, value in {**MOVED, "is_default": False}.items():
            assert row[name] == value, name
        assert screen.finished.final_answer == "moved, fast."


def _values_for(schema):
    """A distinct, type-correct value per field: strings with spaces and punctuation, numbers, booleans, enums."""
    out = {}
    for i, (name, prop) in enumerate((schema.get("properties") or {}).items()):
        kind = property_type(prop)
        if prop.get("enum"):
            out[name] = str(prop["enum"][-1])
        elif kind == "integer":
            out[name] = str(10 + i)
        elif kind == "number":
            out[name] = f"{i}.5"
        elif kind == "boolean":
            out[name] = "false"
        else:
            out[name] = f"v{i} {name[:6]}-x.y"
    return out


def _converted(schema, values):
    out = {}
    for name, raw in values.items():
        kind = property_type(schema["properties"][name])
        out[name] = int(raw) if kind == "integer" else float(raw) if kind == "number" else \
            (raw == "true") if kind == "boolean" else raw
    return out


async def test_full_speed_typing_into_a_real_environments_largest_form(awm_real, tmp_path):
    catalog = Catalog.load([str(awm_real)])
    # the real environment whose routes take the most parameters (read statically), then its largest flat form
    sized = [(max((len(t.params) for t in s.tools()), default=0), s.key) for s in catalog if s.code]
    assert sized, f"the real AWM data at {awm_real} holds no environment with code"
    key = max(sized)[1]
    app = AwmApp([str(awm_real)], cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, key)
        flat = [t for t in screen.tools if is_flat(t.get("inputSchema") or {})]
        tool = max(flat, key=lambda t: len(t["inputSchema"].get("properties") or {}))
        schema = tool["inputSchema"]
        assert len(schema.get("properties") or {}) >= 3, "the largest form is too small to test typing into"
        values = _values_for(schema)
        burst(app, typed_keys(screen.tools, tool["name"], values))
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        calls = events_of(screen, "ToolCall")
        assert len(calls) == 1 and calls[0].tool == tool["name"]
        assert calls[0].arguments == _converted(schema, values)


def test_a_text_fields_value_is_sent_as_typed():
    """Spaces around a text value are part of it; ``""`` is the empty string; an empty field leaves the argument out;
    numbers and true/false are read without the spaces around them."""
    from awm_tui.screens.play import form_arguments

    schema = {"properties": {"note": {"type": "string"}, "label": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                             "city": {"type": "string"}, "n": {"type": "integer"}, "on": {"type": "boolean"}}}
    assert form_arguments(schema, {"note": "  two words ", "label": '""', "city": "", "n": " 7 ", "on": " yes"}) == \
        {"note": "  two words ", "label": "", "n": 7, "on": True}
    assert form_arguments(schema, {"note": " ", "n": "", "on": "  "}) == {"note": " "}


SPACED = {**ADDRESS, "label": '""', "street": "  12 Analytical Way ", "is_default": " true"}


async def test_spaces_and_an_empty_string_typed_fast_reach_the_server(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "pinecrest_online_store")
        burst(app, typed_keys(screen.tools, "create_address", SPACED) + ["ctrl+f"] + list("done") + ["enter"])
        await wait_until(pilot, lambda: screen.reports is not None)
        call = events_of(screen, "ToolCall")[0]
        assert call.arguments == {**ADDRESS, "label": "", "street": "  12 Analytical Way ", "is_default": True}
        created = events_of(screen, "Observation")[0]
        assert not created.is_error, created.text
        final = sqlite3.connect(screen.episode.run_dir / "final.db")
        row = final.execute("SELECT label, street FROM addresses WHERE id = ?",
                            (json.loads(created.text)["id"],)).fetchone()
        assert row == ("", "  12 Analytical Way ")


async def test_play_in_a_60_by_20_terminal(tmp_path):
    """Under 80 columns the form and the transcript stack beside the tool list: every control is on the screen,
    the fields are wide enough to read what is typed, and a call and the answer typed at full speed go through."""
    size = (60, 20)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await open_play(app, pilot, "pinecrest_online_store")
        assert screen.has_class("-tiny")
        burst(app, typed_keys(screen.tools, "create_address", ADDRESS, noise=False))
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        for selector in ("#play-tools", "#form", "#call", "#transcript", "#answer", "#submit"):
            r = screen.query_one(selector).region
            assert r.width > 0 and r.height > 0 and r.right <= size[0] and r.bottom <= size[1] - 1, selector
        assert min(f.region.width for f in screen.fields.values()) >= 30
        assert screen.query_one("#answer").region.width >= 20
        assert events_of(screen, "ToolCall")[0].arguments == {**ADDRESS, "is_default": True}
        burst(app, ["ctrl+f"] + list("saved.") + ["enter"])
        await wait_until(pilot, lambda: screen.reports is not None)
        assert screen.finished.final_answer == "saved."
        await pilot.resize_terminal(100, 30)
        await wait_until(pilot, lambda: not screen.has_class("-tiny"))
