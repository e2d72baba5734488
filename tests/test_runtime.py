"""The environment runtime: fastapi-mcp semantics, isolation, fast path and fallbacks, bad code."""
import asyncio
import json
import sqlite3
import subprocess
import sys

import pytest
from tinyenv import BOOM, DIRECT_ENGINE, ENVIRON, HANG, SLEEP, make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime.envcode import EnvCodeError, analyze_fit, rewrite_code
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.pool import EnvPool

OPENAPI_SCRIPT = """
import json, sys, types
code = json.loads(open(sys.argv[1]).read())
from awm_engine.runtime.envcode import exec_module
from awm_engine.runtime.openapi_tools import tools_from_openapi
module, _ = exec_module(code, 'probe', sys.argv[2])
print(json.dumps([t.name for t in tools_from_openapi(module.app.openapi())]))
"""


def load(scenario, tmp_path, mode="auto"):
    template, _ = TemplateCache(tmp_path / "tpl").get(scenario)
    return LoadedEnv(scenario.key, scenario.code, template, tmp_path / "work", mode)


def count_rows(db, table):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


# -- the reference rewrite -------------------------------------------------------------------

def test_rewrite_matches_the_reference_lines():
    code = ('import os\nengine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})\n'
            'if __name__ == "__main__":\n    import uvicorn\n    uvicorn.run(app, host=host, port=port)\n')
    out = rewrite_code(code, "/tmp/x/final.db", port=9001).split("\n")
    assert out[0] == "import warnings" and out[1].startswith("warnings.filterwarnings")
    assert out[3] == "engine = create_engine('sqlite:////tmp/x/final.db', connect_args={'check_same_thread': False})"
    assert out[6] == "    import os" and out[8] == "    port = os.environ.get('PORT', 9001)"
    assert "    mcp = FastApiMCP(app)" in out and "    mcp.mount_http()" in out
    assert out[-2] == "    uvicorn.run(app, host=host, port=int(port))"


def test_multiline_create_engine_breaks_like_the_reference(tmp_path):
    code = "from sqlalchemy import create_engine\nengine = create_engine(\n    'sqlite:///x.db',\n)\n"
    with pytest.raises(EnvCodeError, match="syntax error"):
        from awm_engine.runtime.envcode import exec_module
        exec_module(code, "broken", str(tmp_path / "x.db"))


# -- every environment -----------------------------------------------------------------------

def every_env(awm_dirs):
    for d in awm_dirs:
        for s in Catalog.load([d]):
            yield s


@pytest.fixture
def all_dirs(request):
    from conftest import AWM_REAL, SAMPLE_ENVS
    dirs = [SAMPLE_ENVS]
    if (AWM_REAL / "gen_envs.jsonl").is_file():
        dirs.append(AWM_REAL)
    return dirs


def test_every_environment_opens_lists_its_routes_and_answers(all_dirs, tmp_path):
    seen = 0
    for s in every_env(all_dirs):
        env = load(s, tmp_path / s.key)
        assert env.shared, (s.key, env.fit.reasons)
        src = tmp_path / f"{s.key}.json"
        src.write_text(json.dumps(s.code))
        expected = json.loads(subprocess.run([sys.executable, "-c", OPENAPI_SCRIPT, str(src), str(tmp_path / "p.db")],
                                             capture_output=True, text=True, check=True).stdout)
        assert [t.name for t in env.tools] == expected
        routes = [t for t in s.tools() if not t.shadowed_by]
        assert sorted(t.name for t in env.tools) == sorted(t.name for t in routes), s.key
        episode = Episode(env)
        answered = 0
        for tool in env.tools:
            if tool.method == "get" and not tool.required:
                result = episode.call_tool_sync(tool.name, {})
                assert result.status is not None
                answered += result.status == 200
        assert answered >= 1, s.key
        episode.close_now()
        seen += 1
    assert seen >= 5


def test_fastapi_mcp_result_and_error_texts(tmp_path):
    s = Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": BOOM})]).get("tiny")
    env = load(s, tmp_path)
    tool = env.tools_by_name["add_note"]
    assert tool.input_schema["required"] == ["text"] and tool.input_schema["title"] == "add_noteArguments"
    assert tool.input_schema["properties"]["text"]["title"] == "text"
    assert tool.to_mcp()["description"].startswith("Add a note\n\nCreate a note.\n\n### Responses:\n\n**200**: ")
    ep = Episode(env)
    ok = ep.call_tool_sync("add_note", {"text": "hi"})
    assert ok.text == '{\n  "id": 3,\n  "text": "hi"\n}' and not ok.is_error
    assert ep.call_tool_sync("get_note", {"note_id": 3}).text == ok.text
    missing = ep.call_tool_sync("add_note", {})
    assert missing.is_error and missing.text == "Input validation error: 'text' is a required property"
    bad_type = ep.call_tool_sync("get_note", {"note_id": "abc"})
    assert bad_type.text == "Input validation error: 'abc' is not of type 'integer'"
    not_found = ep.call_tool_sync("get_note", {"note_id": 99})
    assert not_found.text == "Error calling get_note. Status code: 500. Response: Internal Server Error"
    assert not_found.error_kind == "http_5xx"
    boom = ep.call_tool_sync("boom", {})
    assert boom.is_error and "Status code: 500" in boom.text
    assert ep.call_tool_sync("nope", {}).text == "Unknown tool: nope"
    assert ep.call_tool_sync("list_notes", {"ignored": 1}).status == 200  # GET drops extra args


def test_episodes_are_isolated_and_reset(tmp_path):
    s = Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": ""})]).get("tiny")
    env = load(s, tmp_path)
    a, b = Episode(env), Episode(env)

    async def both():
        return await asyncio.gather(a.call_tool("add_note", {"text": "from a"}),
                                    b.call_tool("add_note", {"text": "from b"}))

    ra, rb = asyncio.run(both())
    assert json.loads(ra.text)["text"] == "from a" and json.loads(rb.text)["text"] == "from b"
    assert count_rows(a.final_db, "notes") == 3 and count_rows(b.final_db, "notes") == 3
    assert count_rows(a.initial_db, "notes") == 2
    assert "from b" not in a.call_tool_sync("list_notes", {}).text
    a.reset_now()
    assert count_rows(a.final_db, "notes") == 2 and count_rows(b.final_db, "notes") == 3
    a.close_now()
    b.close_now()


def test_code_that_does_not_fit_falls_back_to_isolated_loading(tmp_path):
    s = Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": DIRECT_ENGINE})]).get("tiny")
    import ast
    fit = analyze_fit(ast.parse(rewrite_code(s.code, "x.db")))
    assert not fit.fits and any("uses the engine 'engine' directly" in r for r in fit.reasons)
    env = load(s, tmp_path)
    assert not env.shared
    a, b = Episode(env), Episode(env)
    a.call_tool_sync("add_note", {"text": "x"})
    assert json.loads(a.call_tool_sync("count_notes", {}).text) == {"n": 3}
    assert json.loads(b.call_tool_sync("count_notes", {}).text) == {"n": 2}
    a.reset_now()
    assert json.loads(a.call_tool_sync("count_notes", {}).text) == {"n": 2}


def test_hanging_handler_is_cut_off_in_process(tmp_path):
    s = Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": HANG})]).get("tiny")
    ep = Episode(load(s, tmp_path))

    async def go():
        hung = await ep.call_tool("hang", {}, timeout=0.5)
        await asyncio.sleep(0.2)
        return hung, await ep.call_tool("list_notes", {}, timeout=5)

    hung, after = asyncio.run(go())
    assert hung.is_error and hung.error_kind == "timeout" and "timed out after 0.5s" in hung.text
    assert after.status == 200  # the interrupted handler released the episode


# -- the worker pool -------------------------------------------------------------------------

def test_pool_broken_code_hanging_handler_and_scrubbed_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    data = make_env_dir(tmp_path / "d", {
        "Good": HANG + ENVIRON + SLEEP,
        "Syntax Broken": "\ndef oops(:\n",
        "Import Broken": "\nimport module_that_does_not_exist\n",
    })
    catalog = Catalog.load([data])

    async def go():
        async with EnvPool(workers=1, call_timeout=1.0, workdir=tmp_path / "pool") as pool:
            for name, needle in (("syntax_broken", "syntax error"), ("import_broken", "ModuleNotFoundError")):
                with pytest.raises(EnvLoadError, match=needle):
                    await pool.open_episode(catalog.get(name))
            good = await pool.open_episode(catalog.get("good"))
            other = await pool.open_episode(catalog.get("good"))
            await other.call_tool("add_note", {"text": "survives the restart"})
            names = json.loads((await good.call_tool("environ", {})).text)["names"]
            hung = await good.call_tool("hang", {})
            after = await good.call_tool("list_notes", {})
            kept = await other.call_tool("list_notes", {})
            pid = good.worker.proc.pid
            stuck = await good.call_tool("sleep", {})  # blocked in C: the worker is killed and restarted
            restarted = good.worker.proc.pid != pid
            kept_after_restart = await other.call_tool("list_notes", {})
            return names, hung, after, kept, stuck, restarted, kept_after_restart

    names, hung, after, kept, stuck, restarted, kept2 = asyncio.run(go())
    assert stuck.error_kind == "timeout" and "worker was restarted" in stuck.text and restarted
    assert "survives the restart" in kept2.text
    assert "OPENAI_API_KEY" not in names and "PATH" in names
    assert hung.is_error and hung.error_kind == "timeout"
    assert after.status == 200
    assert "survives the restart" in kept.text
