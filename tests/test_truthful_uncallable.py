"""``awm env doctor`` finds uncallable tools (issue 26 item 5): a parameter the route requires that the tool's input
schema does not expose, or cannot carry to the route. On a copy of a real AWM environment whose tool schema was
edited to drop a required body field, and on a tiny hand-made environment."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tinyenv import make_env_dir

from awm_engine.cli import main as awm
from awm_engine.data.names import normalize_scenario_name

SHARED_ROVER = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "awm-real"


def _doctor(data: Path, scenario: str, capsys) -> list[dict]:
    assert awm(["env", "doctor", scenario, "--data", str(data), "--workers", "1", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    return [p for p in payload["scenarios"][0]["problems"] if p["kind"] == "uncallable_tool"]


@pytest.fixture
def rover_copy(tmp_path) -> Path:
    """Rover (AWM-real) in tmp_path, its create_pet's required body field 'name' hidden from the input schema
    (``SkipJsonSchema``): the route still requires it, no call can give it."""
    if not (SHARED_ROVER / "gen_envs.jsonl").is_file():
        pytest.skip(f"real AWM data not found at {SHARED_ROVER} (../shared is absent)")
    dst = tmp_path / "rover"
    dst.mkdir()
    for src in SHARED_ROVER.glob("*.jsonl"):
        rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if normalize_scenario_name(r.get("scenario", r.get("name", ""))) == "rover"]
        if src.name == "gen_envs.jsonl":
            (row,) = rows
            code = row["full_code"]
            field = '    name: str = Field(..., description="Pet\'s name"'
            assert field in code
            code = code.replace(field, '    name: SkipJsonSchema[str] = Field(..., description="Pet\'s name"', 1)
            row["full_code"] = "from pydantic.json_schema import SkipJsonSchema\n" + code
        (dst / src.name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_real_environment_with_a_hidden_required_body_field(rover_copy, capsys):
    found = _doctor(rover_copy, "rover", capsys)
    assert [(p["tool"], p["severity"]) for p in found] == [("create_pet", "error")]
    assert "body field 'name', which its input schema does not expose" in found[0]["message"]
    # the untouched environment has no such problem
    original = rover_copy.parent / "original"
    shutil.copytree(rover_copy, original)
    rows = [json.loads(line) for line in (SHARED_ROVER / "gen_envs.jsonl").read_text().splitlines() if line.strip()]
    (original / "gen_envs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows
                                                     if normalize_scenario_name(r["scenario"]) == "rover"))
    assert _doctor(original, "rover", capsys) == []


TINY = '''
class Tag(BaseModel):
    note_id: int = Field(..., description="the note to tag (also the path parameter's name)")
    label: str

@app.post("/api/notes/{note_id}/tags", summary="Tag a note", operation_id="tag_note")
async def tag_note(note_id: int, body: Tag):
    return {"note_id": note_id, "label": body.label}

class Lookup(BaseModel):
    text: str

@app.get("/api/lookup", summary="Look a note up by a body", operation_id="lookup_note")
async def lookup_note(body: Lookup):
    return {"text": body.text}
'''


def test_tiny_environment_with_collisions_and_a_get_body(tmp_path, capsys):
    data = make_env_dir(tmp_path / "tiny", {"tiny": TINY})
    found = {p["tool"]: p for p in _doctor(data, "tiny", capsys)}
    assert set(found) == {"tag_note", "lookup_note"}
    assert "a path or query parameter of the same name takes that argument" in found["tag_note"]["message"]
    assert "GET calls carry no body" in found["lookup_note"]["message"]
    # the tools the tiny server always has are callable
    assert "add_note" not in found and "list_notes" not in found
    # the text output names them too
    assert awm(["env", "doctor", "tiny", "--data", str(data), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "uncallable_tool" in out and "tag_note" in out
