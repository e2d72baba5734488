"""Tools whose input schema is not valid JSON Schema: the `reference` schema check fails every call exactly as the
reference's MCP stack does (SchemaError text); `robust` runs them; catalog, env test and the TUI flag them."""
import asyncio
import json

import jsonschema
import pytest
from tinyenv import BAD_SCHEMA, make_env_dir

from awm_engine.agent.policies import AssistantTurn, NativeCall, ScriptedTurns
from awm_engine.agent.rollout import AgentConfig
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.eval.episode import run_episode
from awm_engine.runtime.episode import is_environment_error
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.openapi_tools import input_schema_error, static_schema_errors
from awm_engine.runtime.pool import EnvPool

TOOL = "note_miles"


@pytest.fixture
def data(tmp_path):
    return make_env_dir(tmp_path / "data", {"fleet": BAD_SCHEMA})


def reference_error(schema, arguments):
    """What the reference's MCP server answers: mcp's low-level call_tool runs jsonschema.validate, whose
    check_schema raises SchemaError; its generic handler turns str(exception) into the error result."""
    with pytest.raises(jsonschema.SchemaError) as caught:
        jsonschema.validate(instance=arguments, schema=schema)
    return str(caught.value)


def loaded(data, tmp_path):
    scenario = Catalog.load([data]).get("fleet")
    template, _ = TemplateCache(tmp_path / "tpl").get(scenario)
    return LoadedEnv(scenario.key, scenario.code, template, tmp_path / "work")


def test_reference_fails_every_call_with_the_schema_error_robust_runs_it(data, tmp_path):
    env = loaded(data, tmp_path)
    schema = next(t["inputSchema"] for t in env.mcp_tools() if t["name"] == TOOL)
    expected = reference_error(schema, {"note_id": 1})
    assert expected.startswith("{'example': {'value': 15}} is not of type 'array'")
    assert input_schema_error(schema) == expected
    reference = Episode(env)  # the default profile is the reference's
    for arguments in ({"note_id": 1}, {}, {"note_id": "x"}):  # the schema is checked before the arguments
        result = reference.call_tool_sync(TOOL, arguments)
        assert (result.text, result.is_error, result.error_kind, result.status) == (expected, True, "invalid_schema",
                                                                                    None)
    assert is_environment_error("invalid_schema")
    assert not reference.call_tool_sync("list_notes", {}).is_error  # other tools are not affected
    robust = Episode(env, schema_check="robust")
    ok = robust.call_tool_sync(TOOL, {"note_id": 1})
    assert not ok.is_error and json.loads(ok.text) == {"id": 1, "text": "first"}
    assert robust.call_tool_sync(TOOL, {}).text == "Input validation error: 'note_id' is a required property"
    with pytest.raises(ValueError, match="unknown schema check"):
        Episode(env, schema_check="lenient")


def test_schema_errors_are_found_statically(data):
    scenario = Catalog.load([data]).get("fleet")
    found = static_schema_errors(scenario.code)
    assert list(found) == [TOOL] and found[TOOL].startswith("{'example': {'value': 15}} is not of type 'array'")
    assert "On schema['properties']['note_id']['examples']" in found[TOOL]
    assert static_schema_errors("def broken(:") == {} and static_schema_errors(None) == {}


async def test_the_pool_takes_the_profile_per_episode(data, tmp_path):
    scenario = Catalog.load([data]).get("fleet")
    async with EnvPool(workers=1, workdir=tmp_path / "pool", schema_check="reference") as pool:
        default = await pool.open_episode(scenario)
        robust = await pool.open_episode(scenario, schema_check="robust")
        failed = await default.call_tool(TOOL, {"note_id": 2})
        ran = await robust.call_tool(TOOL, {"note_id": 2})
        with pytest.raises(ValueError):
            await pool.open_episode(scenario, schema_check="nope")
    assert failed.is_error and failed.error_kind == "invalid_schema" and "is not of type 'array'" in failed.text
    assert not ran.is_error and json.loads(ran.text)["text"] == "second"


@pytest.mark.parametrize("protocol", ["reference", "robust"])
def test_run_episode_uses_the_agent_protocol(data, tmp_path, protocol):
    catalog = Catalog.load([data])
    policy = ScriptedTurns([AssistantTurn("", [NativeCall("c1", TOOL, '{"note_id": 1}')])], "done")
    outcome = asyncio.run(run_episode(catalog, catalog.get("fleet"), 1, policy,
                                      AgentConfig(mode="native", protocol=protocol), tmp_path / "run",
                                      verify_mode=None))
    observation = next(json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
                       if json.loads(line)["type"] == "observation")
    if protocol == "reference":
        assert observation["is_error"] and observation["error_kind"] == "invalid_schema"
        assert outcome.finished.env_errors == 1
    else:
        assert not observation["is_error"] and '"first"' in observation["text"]


def test_cli_env_call_env_test_and_catalog_show_flag_the_tool(data, capsys):
    assert awm(["env", "call", "fleet", TOOL, "--data", str(data), "--args", '{"note_id": 1}']) == 1
    assert capsys.readouterr().out.startswith("{'example': {'value': 15}} is not of type 'array'")
    assert awm(["env", "call", "fleet", TOOL, "--data", str(data), "--args", '{"note_id": 1}',
                "--protocol", "robust"]) == 0
    assert '"first"' in capsys.readouterr().out

    assert awm(["catalog", "show", "fleet", "--data", str(data), "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)["tools"]}
    assert tools[TOOL]["schema_error"].startswith("{'example'") and tools["list_notes"]["schema_error"] is None
    assert awm(["catalog", "show", "fleet", "--data", str(data)]) == 0
    assert "input schema is not valid JSON Schema: {'example': {'value': 15}} is not of type 'array'; uncallable " \
           "under the reference" in " ".join(capsys.readouterr().out.split())

    assert awm(["env", "test", "--data", str(data), "--workers", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert list(report["invalid_schemas"]) == [TOOL]
    miles = next(c for c in report["calls"] if c["tool"] == TOOL)
    assert miles["error_kind"] == "invalid_schema"
    assert awm(["env", "test", "--data", str(data), "--workers", "1", "--protocol", "robust", "--json"]) == 0
    robust = json.loads(capsys.readouterr().out)[0]
    assert next(c for c in robust["calls"] if c["tool"] == TOOL)["error_kind"] != "invalid_schema"
    assert awm(["env", "test", "--data", str(data), "--workers", "1"]) == 0
    assert "uncallable under the reference" in " ".join(capsys.readouterr().out.split())


async def test_tui_tools_tab_flags_the_tool(data):
    from rich.console import Console, Group
    from textual.widgets import OptionList

    from awm_tui.app import AwmApp

    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.press("slash", *"fleet", "enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.press("4")
        tools = app.screen.query_one("#tool-list", OptionList)
        labels = [str(tools.get_option_at_index(i).prompt) for i in range(tools.option_count)]
        assert f"GET    {TOOL} ⚠" in labels and "GET    list_notes" in labels
        tools.focus()
        tools.highlighted = labels.index(f"GET    {TOOL} ⚠")
        await pilot.pause()
        console = Console(width=300, record=True)
        console.print(Group(*app.screen._shown["#tool-detail"][0]))  # the pane's parts, not fitted to its width
        assert ("input schema is not valid JSON Schema: {'example': {'value': 15}} is not of type 'array'; "
                "uncallable under the reference") in console.export_text()
