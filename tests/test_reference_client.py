"""The reference profile behaves like the AWM reference agent's client (issue 25), item by item, next to the
robust profile:

1. malformed tool calls are repaired by the json_repair the reference's lock pins (0.56.0), checked on a corpus
   of fuzzed malformed calls (tests/data/json_repair_corpus.json; ``python tests/test_reference_client.py``
   regenerates it — only when the pin changes on purpose);
2. ``"tool_name": null`` or a number inside ``call_tool``: tests/test_protocol.py's table;
3. meta mode sends role and content only: tool calls the endpoint returned natively are recorded, never re-sent;
4. the client's request timeout and retries are the reference's (600 s, 2) — robust keeps 120 s, 3.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import random
from pathlib import Path

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.meta_protocol import robust_json
from awm_engine.agent.policies import LLMPolicy
from awm_engine.agent.rollout import AgentConfig
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli.options import add_agent_args, endpoint_from_args
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import run_episode

CORPUS = Path(__file__).parent / "data" / "json_repair_corpus.json"
JSON_REPAIR = "0.56.0"


def make_corpus(n: int = 600, seed: int = 25) -> list[str]:
    """Malformed ``call_tool`` arguments as models write them: cut short, Python literals, single quotes,
    trailing commas, missing quotes and braces, comments, doubled braces."""
    rng = random.Random(seed)
    bases = [{"tool_name": "create_refund", "arguments": {"order_id": 17, "reason": "damaged item", "amount": 12.5}},
             {"tool_name": "update_profile", "arguments": {"title": None, "tags": ["a", "b"], "active": True}},
             {"tool_name": "search", "arguments": {"q": "café \"quoted\" text", "limit": 5}},
             {"tool_name": "mcp_tool_mcp_server_list_branches", "arguments": {}}]
    out = []
    for i in range(n):
        text = json.dumps(rng.choice(bases), ensure_ascii=False)
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(9)
            if op == 0:
                text = text[:rng.randint(1, len(text) - 1)]
            elif op == 1:
                text = text.replace("null", "None").replace("true", "True")
            elif op == 2:
                text = text.replace('"', "'")
            elif op == 3:
                text = text.replace("}", ",}", 1)
            elif op == 4:
                text = text.replace('"tool_name"', "tool_name")
            elif op == 5:
                text = text.rstrip("}")
            elif op == 6:
                text = "```json\n" + text + "\n```"
            elif op == 7:
                text = text.replace("{", "{{", 1)
            else:
                text = text.replace(",", " // note\n,", 1)
        out.append(text)
    return out


def repaired(texts: list[str]) -> list:
    return [robust_json(t) for t in texts]


def test_json_repair_is_the_references_pin_and_repairs_the_corpus_as_it_does():
    assert importlib.metadata.version("json_repair") == JSON_REPAIR
    data = json.loads(CORPUS.read_text())
    assert data["json_repair"] == JSON_REPAIR and len(data["cases"]) == 600
    assert [c["input"] for c in data["cases"]] == make_corpus()
    got = repaired([c["input"] for c in data["cases"]])
    mismatches = [(c["input"], c["repaired"], g) for c, g in zip(data["cases"], got) if c["repaired"] != g]
    assert not mismatches, mismatches[:5]
    # the two cases the side-by-side run found
    assert robust_json('{"title": None}') == {"title": "None"}  # the reference sets the title to the string "None"


def _endpoint(*flags: str) -> Endpoint:
    parser = argparse.ArgumentParser()
    add_agent_args(parser)
    return endpoint_from_args(parser.parse_args(["--model", "m", "--base-url", "http://127.0.0.1:9/v1", *flags]))


@pytest.mark.parametrize("flags, timeout, retries", [
    ((), 600.0, 2), (("--protocol", "reference"), 600.0, 2), (("--protocol", "robust"), 120.0, 3),
    (("--protocol", "reference", "--retries", "5"), 600.0, 5)])
def test_client_timeout_and_retries_per_profile(flags, timeout, retries):
    endpoint = _endpoint(*flags)
    assert (endpoint.timeout, endpoint.max_retries) == (timeout, retries)
    assert endpoint.public()["timeout"] == timeout  # recorded in the run's config


@pytest.mark.parametrize("protocol", ["reference", "robust"])
def test_meta_mode_never_resends_native_tool_calls(tmp_path, protocol):
    listing = '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>'
    responses = [{"content": listing, "tool_calls": [{"name": "list_tools", "arguments": {}}]}, {"content": "done"}]
    scenario = Catalog.load().get("maple_library_lending")
    with FakeLLMServer({"responses": responses, "cursor": "sequential"}) as llm:
        policy = LLMPolicy(Endpoint(base_url=llm.url, model="m"))
        outcome = asyncio.run(run_episode(Catalog.load(), scenario, 0, policy, AgentConfig(protocol=protocol),
                                          tmp_path / "r", verify_mode=None))
        second = llm.requests[1]["messages"]
    assert outcome.finished.stop_reason == "final_answer"
    assert all(set(m) <= {"role", "content"} for m in second), second  # role and content only
    assert second[2] == {"role": "assistant", "content": listing}
    trajectory = json.loads((tmp_path / "r" / "trajectory.json").read_text())
    recorded = [s for s in trajectory["trajectory"] if s.get("native_tool_calls")]
    assert recorded and recorded[0]["native_tool_calls"][0]["name"] == "list_tools"  # what came back is kept


if __name__ == "__main__":  # regenerate the corpus (after a deliberate change of the json_repair pin)
    texts = make_corpus()
    CORPUS.parent.mkdir(exist_ok=True)
    CORPUS.write_text(json.dumps({"json_repair": importlib.metadata.version("json_repair"),
                                  "cases": [{"input": t, "repaired": r} for t, r in zip(texts, repaired(texts))]},
                                 ensure_ascii=False, indent=0))
