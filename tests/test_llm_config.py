"""Endpoint resolution: flags over named endpoints over environment variables; the fake-llm command."""
import json
import subprocess
import sys
import time

import pytest
from openai import OpenAI

from awm_engine.agent.endpoints import ConfigError, judge_endpoint, resolve_endpoint
from awm_engine.runtime.ports import free_port

CONFIG = """
[endpoints.local]
base_url = "http://127.0.0.1:8000/v1"
model = "qwen"
api_key_env = "LOCAL_KEY"
mode = "native"
temperature = 0.6

[judge]
endpoint = "local"
"""


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    monkeypatch.setenv("AWM_CONFIG", str(path))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AWM_JUDGE_MODEL", "AWM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return path


def test_named_endpoint_and_overrides(config, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "k1")
    ep = resolve_endpoint("local")
    assert (ep.base_url, ep.model, ep.api_key, ep.mode, ep.temperature) == \
        ("http://127.0.0.1:8000/v1", "qwen", "k1", "native", 0.6)
    ep = resolve_endpoint("local", model="other", mode="meta", temperature=1.0)
    assert (ep.model, ep.mode, ep.temperature) == ("other", "meta", 1.0)
    assert "api_key" not in ep.public()


def test_environment_fallback(config, monkeypatch):
    with pytest.raises(ConfigError, match="no model endpoint"):
        resolve_endpoint(model="m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1")
    ep = resolve_endpoint(model="m")
    assert ep.base_url == "http://example.invalid/v1" and ep.api_key == "EMPTY"
    with pytest.raises(ConfigError, match="no endpoint 'nope'"):
        resolve_endpoint("nope")


def test_judge_endpoint_from_config(config, tmp_path, monkeypatch):
    assert judge_endpoint().model == "qwen"
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setenv("AWM_CONFIG", str(tmp_path / "empty.toml"))
    assert judge_endpoint() is None
    bad = tmp_path / "bad.toml"
    bad.write_text("[endpoints\n")
    monkeypatch.setenv("AWM_CONFIG", str(bad))
    with pytest.raises(ConfigError):
        judge_endpoint()


def test_fake_llm_command_serves_a_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"content": "hello"}, {"tool_calls": [
        {"name": "list_branches", "arguments": {"q": "x"}}]}]}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "fake-llm", "--script", str(script),
                             "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        for _ in range(100):
            try:
                first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                break
            except Exception:
                time.sleep(0.1)
        assert first.choices[0].message.content == "hello"
        second = client.chat.completions.create(model="m", messages=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "more"}])
        call = second.choices[0].message.tool_calls[0]
        assert call.function.name == "list_branches" and json.loads(call.function.arguments) == {"q": "x"}
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "hello"
    finally:
        proc.terminate()
        proc.wait(10)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert subprocess.run([sys.executable, "-m", "awm_engine.cli", "fake-llm", "--script", str(bad)],
                          capture_output=True).returncode == 2
