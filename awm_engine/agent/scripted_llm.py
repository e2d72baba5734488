"""A scripted OpenAI-compatible chat-completions server, for tests and demos (``awm fake-llm``); its
``/v1/embeddings`` answers with deterministic bag-of-words vectors (``word_vector``).

Script (JSON)::

    {"model": "scripted",
     "responses": [                                  # the agent conversation, turn by turn
        {"content": "<tool_call>{...}</tool_call>"},
        {"tool_calls": [{"name": "list_branches", "arguments": {}}]},   # native tool calls
        {"status": 503, "body": "overloaded"},       # an HTTP error (to test retries)
        {"content": "All done.", "delay": 0.5},
        {"content": "{\\"tab", "finish_reason": "length"},   # a reply cut off by the token limit
        {"content": "...", "token_ids": [1, 2], "prompt_token_ids": [7, 8, 9]}],  # token ids, as vLLM returns them
     "rules": [                                      # conversations recognised by a substring
        {"match": "impartial", "responses": [{"content": "{\\"classification\\": \\"complete\\", ...}"}]},
        {"match": ["stage: db", "attempt 2/"], "responses": [...]}]}   # a list: every text must occur

Which response answers a request is stateless: the number of assistant messages already in the
request picks it (the last one repeats), so concurrent conversations each get the full script. With
``"cursor": "sequential"`` it is instead the number of earlier requests of the same conversation
(same first two messages) — for clients that trim their history. A
rule applies when its ``match`` text (or every text of a ``match`` list) occurs in the request's messages. Errors (``status``)
are counted per (conversation position, response) so a retried request moves past them.
"""

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from awm_engine.runtime.http_guard import LoopbackGuard

SCRIPT_KEYS = {"model", "responses", "rules"}
# `awm fake-llm`'s default port: not 8000 (vLLM's and the docs' real endpoints), so a scripted server left
# running never answers in place of a real model
DEFAULT_PORT = 8765


class ScriptError(ValueError):
    pass


def load_script(source: Path | str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(source, dict):
        script = source
    else:
        try:
            script = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise ScriptError(f"cannot read script {source}: {exc}") from None
    if isinstance(script, list):
        script = {"responses": script}
    if not isinstance(script, dict) or not (script.get("responses") or script.get("rules")):
        raise ScriptError("a script needs 'responses' (a list) or 'rules'")
    return script


class ScriptedModel:
    def __init__(self, script: dict[str, Any]):
        self.script = load_script(script)
        self.requests: list[dict[str, Any]] = []
        self.error_hits: dict[tuple, int] = {}
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def pick(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content") or "") for m in messages)
        responses = self.script.get("responses") or []
        rule_id = None
        for i, rule in enumerate(self.script.get("rules") or []):
            needles = rule.get("match")
            needles = [needles] if isinstance(needles, str) else needles
            if needles and all(isinstance(n, str) and n in text for n in needles):
                responses, rule_id = rule["responses"], i
                break
        if not responses:
            return {"content": ""}
        if self.script.get("cursor") == "sequential":
            key = json.dumps(messages[:2], sort_keys=True, default=str)
            with self.lock:
                position = self.seen.get(key, 0)
                self.seen[key] = position + 1
        else:
            position = sum(1 for m in messages if m.get("role") == "assistant")
        index = min(position, len(responses) - 1)
        # an error response answers once per conversation position; a retry gets the next response
        while "status" in responses[index] and index + 1 < len(responses):
            key = (rule_id, position, index, messages[1].get("content") if len(messages) > 1 else None)
            with self.lock:
                hits = self.error_hits.get(key, 0)
                self.error_hits[key] = hits + 1
            if hits == 0:
                return responses[index]
            index += 1
        return responses[index]

    def completion(self, body: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.get("content")}
        if response.get("tool_calls"):
            message["tool_calls"] = [{"id": c.get("id") or f"call_{uuid.uuid4().hex[:10]}", "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]
                                                   if isinstance(c.get("arguments"), str)
                                                   else json.dumps(c.get("arguments") or {})}}
                                     for c in response["tool_calls"]]
            if message["content"] is None:
                message["content"] = None
        elif message["content"] is None:
            message["content"] = ""
        prompt_tokens = sum(len(str(m.get("content") or "")) // 4 for m in body.get("messages") or [])
        completion_tokens = len(message.get("content") or "") // 4 + 1
        choice: dict[str, Any] = {"index": 0, "message": message,
                                  "finish_reason": response.get("finish_reason")
                                  or ("tool_calls" if message.get("tool_calls") else "stop")}
        data = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or self.script.get("model", "scripted"), "choices": [choice],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}
        # token ids where vLLM puts them (``return_token_ids``): the prompt's on the response, the turn's on the choice
        if "token_ids" in response:
            choice["token_ids"] = response["token_ids"]
        if "prompt_token_ids" in response:
            data["prompt_token_ids"] = response["prompt_token_ids"]
        return data


def word_vector(text: str, dims: int = 64) -> list[float]:
    """A deterministic stand-in embedding: counts of the text's words hashed into ``dims`` buckets."""
    import hashlib
    import re

    vector = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
    return vector


def create_app(script: dict[str, Any] | Path | str):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

    model = ScriptedModel(script if isinstance(script, dict) else load_script(script))
    app = FastAPI(title="awm scripted LLM")
    app.state.model = model

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model.script.get("model", "scripted"), "object": "model"}]}

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        body = await request.json()
        model.requests.append(body)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else [str(t) for t in texts or []]
        return {"object": "list", "model": body.get("model") or "scripted-embedding",
                "data": [{"object": "embedding", "index": i, "embedding": word_vector(t)} for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": sum(len(t) // 4 for t in texts), "total_tokens": sum(len(t) // 4
                                                                                               for t in texts)}}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        model.requests.append(body)
        response = model.pick(body)
        if response.get("delay"):
            await asyncio.sleep(float(response["delay"]))
        if "status" in response:
            return PlainTextResponse(str(response.get("body", "scripted error")), status_code=int(response["status"]))
        data = model.completion(body, response)
        if not body.get("stream"):
            return JSONResponse(data)

        async def chunks():
            message = data["choices"][0]["message"]
            base = {"id": data["id"], "object": "chat.completion.chunk", "created": data["created"],
                    "model": data["model"]}
            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
            yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta}]})}\n\n"
            finish = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason":
                                           data["choices"][0]["finish_reason"]}], "usage": data["usage"]}
            yield f"data: {json.dumps(finish)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return app


class FakeLLMServer:
    """Runs the scripted server on 127.0.0.1 in a background thread (``with FakeLLMServer(script) as url``)."""

    def __init__(self, script: dict[str, Any] | Path | str, port: int = 0):
        from awm_engine.runtime.ports import free_port

        self.app = create_app(script)
        port = port or free_port()
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.app.state.model.requests

    def __enter__(self) -> "FakeLLMServer":
        import uvicorn

        config = uvicorn.Config(LoopbackGuard(self.app, self.port), host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started and time.time() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)


def serve(script: Path | str, port: int) -> None:
    import uvicorn

    uvicorn.run(LoopbackGuard(create_app(script), port), host="127.0.0.1", port=port, log_level="warning")
