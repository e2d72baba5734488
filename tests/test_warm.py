"""The warm service (``runtime.warm``): the first ``awm env serve`` leaves a worker ready, the next takes it (its
cold start without a sandbox's start), nothing of a taken worker outlives its server, and nothing but the same
user's server with the same code and settings can take one."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from awm_engine.runtime import warm
from awm_engine.runtime.ports import free_port
from tests.test_mcp_serve import wait_for_port

SCENARIO = "maple_library_lending"
H = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def until(condition, what: str, deadline: float = 180.0) -> None:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def service_dir(tmp_path, monkeypatch):
    where = tmp_path / "warm"
    monkeypatch.setenv("AWM_WARM", "1")
    monkeypatch.setenv("AWM_WARM_DIR", str(where))
    monkeypatch.setenv("AWM_CACHE_DIR", str(tmp_path / "cache"))  # the servers' too: one template cache
    yield where
    if warm.stop_service():  # (a service a test killed answers no more)
        until(lambda: "service stopped" in log(where) or not (where / "warm.sock").exists(), "the service to stop")
    until(lambda: not list((where / "spares").glob("*/w*")) if (where / "spares").exists() else True,
          "the spares to go")


def log(where: Path) -> str:
    return (where / "warm.log").read_text() if (where / "warm.log").exists() else ""


def serve(tmp_path, name: str, extra_env: dict | None = None):
    port = free_port()
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", SCENARIO, "--port",
                             str(port), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(extra_env or {})})
    wait_for_port(port, proc)
    until(lambda: (out / "session.json").exists(), "the session")
    return proc, port, out


def stop(proc) -> str:
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=120)[1].decode()


def call(port: int, tool: str, arguments: dict) -> str:
    url = f"http://127.0.0.1:{port}/mcp"
    with httpx.Client(timeout=60) as client:
        init = client.post(url, headers=H, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        answer = client.post(url, headers={**H, "mcp-session-id": init.headers["mcp-session-id"]},
                             json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": tool, "arguments": arguments}})
    return answer.json()["result"]["content"][0]["text"]


def test_a_server_takes_the_warm_worker_the_previous_one_left(tmp_path, service_dir):
    first, port, out = serve(tmp_path, "first")
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "own"  # nothing was warm yet
    finally:
        stop(first)
    until(lambda: "ready" in log(service_dir), "a spare")
    second, port, out = serve(tmp_path, "second")
    try:
        session = json.loads((out / "session.json").read_text())
        assert session["worker"] == "warm"
        assert session["sandbox"]["namespaces"] is True  # the service's measurement, handed over
        assert '"branches"' in call(port, "list_branches", {})
        leased = list((service_dir / "spares").glob("*/w*"))
        assert leased  # the worker's directory is the service's
    finally:
        err = stop(second)
    assert "stopped; databases in" in err
    with __import__("sqlite3").connect(out / "final.db") as db:  # the databases came out of the leased directory
        assert db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] > 0
    assert (out / "server.log").exists()
    taken = [line for line in log(service_dir).splitlines() if line.split()[-2:-1] == ["spare"] or "take: spare" in line]
    assert taken
    # the leased worker's directory goes once its server is gone (the next spares' stay: the unbound one and the
    # one bound ahead to this scenario)
    until(lambda: len(list((service_dir / "spares").glob("*/w*"))) <= 2, "the leased directory to go")


def test_a_server_started_with_other_settings_does_not_take_it(tmp_path, service_dir):
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    proc, port, out = serve(tmp_path, "other", {"AWM_SANDBOX_LOG_MB": "7"})
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "own"
    finally:
        stop(proc)
    # the stale service stopped; the server started one with its own settings in its place
    until(lambda: log(service_dir).count("service started") == 2, "a service with the new settings")


def test_the_service_lives_in_a_private_directory(tmp_path, monkeypatch):
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    with pytest.raises(ValueError):
        warm._private_dir(open_dir)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(ValueError):
        warm._private_dir(link)
    made = warm._private_dir(tmp_path / "fresh")
    assert made.stat().st_mode & 0o777 == 0o700
    monkeypatch.setenv("AWM_WARM", "1")
    monkeypatch.setenv("AWM_WARM_DIR", str(open_dir))
    assert warm.take() is None  # never talks to a socket in a directory others could write


def test_another_user_cannot_take_a_worker(tmp_path, service_dir):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    warm.ensure_service()
    until(lambda: (service_dir / "warm.sock").exists(), "the service")
    pid = os.fork()
    if pid == 0:  # another user: the directory is closed to it, and the service checks the peer's uid anyway
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(5)
                try:
                    s.connect(str(service_dir / "warm.sock"))
                    os._exit(1)
                except OSError:
                    os._exit(0)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def tools_and_call(port: int) -> tuple[list, str]:
    url = f"http://127.0.0.1:{port}/mcp"
    with httpx.Client(timeout=60) as client:
        init = client.post(url, headers=H, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        h = {**H, "mcp-session-id": init.headers["mcp-session-id"]}
        tools = client.post(url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).json()
    return tools["result"]["tools"], call(port, "list_branches", {})


def test_the_next_server_of_a_scenario_takes_a_spare_bound_to_it(tmp_path, service_dir):
    """After a server of a scenario starts, the service binds a spare to that scenario (its module loaded): the next
    server of it skips the load, and what its clients see is what a server that loaded it sees."""
    first, port, out = serve(tmp_path, "first")
    try:
        assert json.loads((out / "session.json").read_text())["worker_bound"] is False
        own = tools_and_call(port)
        # asked by the first server once it serves (a stop before the service it started listens loses the ask)
        until(lambda: f"bound to '{SCENARIO}'" in log(service_dir), "a bound spare")
    finally:
        stop(first)
    second, port, out = serve(tmp_path, "second")
    try:
        session = json.loads((out / "session.json").read_text())
        assert (session["worker"], session["worker_bound"]) == ("warm", True)
        assert tools_and_call(port) == own
    finally:
        stop(second)
    assert "take: spare" in log(service_dir) and "(bound)" in log(service_dir)
    # another settings' server (another template age limit: another recipe? no — the same template) still gets the
    # unbound spare when it serves another scenario
    until(lambda: log(service_dir).count("bound to") >= 2, "the next bound spare")
    port = free_port()
    other = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                              "riverside_clinic_appointments", "--port", str(port), "--out", str(tmp_path / "other")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_port(port, other)
    until(lambda: (tmp_path / "other" / "session.json").exists(), "the session")
    try:
        session = json.loads((tmp_path / "other" / "session.json").read_text())
        assert (session["worker"], session["worker_bound"]) == ("warm", False)
    finally:
        stop(other)


def _recipe_and_load(tmp_path):
    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache
    from awm_engine.runtime.pool import TemplateState

    scenario = Catalog.load([str(Path(__file__).resolve().parents[1] / "sample_envs")]).get(SCENARIO)
    template = TemplateState(*TemplateCache(tmp_path / "cache").get(scenario))
    recipe = warm.recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at)
    load = {"scenario": scenario.key, "code": scenario.code, "template_built_at": template.report.built_at,
            "template_digest": template.digest}
    return recipe, load, str(template.path)


def test_a_bound_spare_goes_only_to_its_recipe_and_not_past_its_age(tmp_path, service_dir):
    recipe, load, template = _recipe_and_load(tmp_path)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    assert warm.bind_next(recipe, load, template, max_age=600)
    until(lambda: "bound to" in log(service_dir), "a bound spare")
    lease = warm.take(recipe="another scenario's")
    assert lease is not None and lease.bound is False  # the unbound spare
    lease.close()
    until(lambda: log(service_dir).count("ready") >= 2, "the next unbound spare")
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is True
    lease.close()
    # bound too long ago: removed at the take, which gets the unbound spare
    assert warm.bind_next(recipe, load, template, max_age=0)
    until(lambda: log(service_dir).count("bound to") >= 2, "the second bound spare")
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is False
    lease.close()


def test_a_bind_whose_load_fails_leaves_nothing(tmp_path, service_dir):
    recipe, load, template = _recipe_and_load(tmp_path)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    assert warm.bind_next(recipe, {**load, "code": "raise SystemExit(3)\n"}, template, max_age=600)
    until(lambda: "binding spare" in log(service_dir), "the failed bind")
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is False
    lease.close()
    assert warm.bind_next(recipe, load, str(tmp_path / "no such template.db"), max_age=600)
    until(lambda: log(service_dir).count("binding spare") >= 2, "the second failed bind")


def test_a_bind_never_reads_a_template_that_is_not_a_regular_file(tmp_path, service_dir):
    """A FIFO would block the service's copy, a symlink could point anywhere: both refused, nothing left bound."""
    recipe, load, template = _recipe_and_load(tmp_path)
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    link = tmp_path / "link.db"
    link.symlink_to(template)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    for n, bad in enumerate((fifo, link), 1):  # one after the other (a newer bind cancels the one before)
        assert warm.bind_next(recipe, load, str(bad), max_age=600)
        until(lambda: log(service_dir).count("is not a regular file") >= n, f"refusal {n}")
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is False
    lease.close()


# -- prepare: a server's scenario loaded into the spare while the server itself starts ---------------------------------

SAMPLES = str(Path(__file__).resolve().parents[1] / "sample_envs")


def _built(tmp_path, key: str = SCENARIO):
    """The scenario's template built where a server of this test builds it (``AWM_CACHE_DIR``/templates), and the
    recipe a server's take names for it (``EnvPool._recipe``'s computation)."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache
    from awm_engine.runtime.pool import TemplateState

    scenario = Catalog.load([SAMPLES]).get(key)
    template = TemplateState(*TemplateCache(tmp_path / "cache" / "templates").get(scenario))
    return warm.recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at)


def test_a_prepare_resolves_the_recipe_the_server_takes(tmp_path, monkeypatch):
    """``resolve_prepare`` under the server's variables names the recipe the server's pool names; anything that
    does not resolve to a built, fresh template of a code scenario is nothing to load."""
    monkeypatch.setenv("AWM_CACHE_DIR", str(tmp_path / "cache"))
    recipe = _built(tmp_path)
    env = {"AWM_CACHE_DIR": str(tmp_path / "cache")}
    ok = {"op": "prepare", "scenario": SCENARIO, "data": [SAMPLES], "template_max_age": None, "env": env}
    resolved = warm.resolve_prepare(ok)
    assert resolved["recipe"] == recipe and resolved["load"]["scenario"] == SCENARIO
    assert resolved["max_age"] == 300.0 and Path(resolved["template"]).is_file()
    assert warm.resolve_prepare({**ok, "scenario": "Maple Library Lending"})["recipe"] == recipe  # as the CLI names
    for bad in ({"scenario": "no_such_scenario"}, {"scenario": "riverside_clinic_appointments"},  # not built
                {"data": ["sample_envs"]}, {"data": SAMPLES}, {"data": [7]}, {"scenario": None},
                {"scenario": ["x"]}, {"template_max_age": -1}, {"template_max_age": "300"},
                {"template_max_age": float("nan")}, {"template_max_age": 0},
                {"env": {"AWM_CACHE_DIR": str(tmp_path / "empty")}},  # another cache: not built there
                {"env": {**env, "AWM_WARM_IDLE": "0"}}, {"data": [str(tmp_path)]}):
        assert warm.resolve_prepare({**ok, **bad}) is None, bad


def test_a_prepare_loads_the_scenario_into_the_spare_before_the_take(tmp_path, service_dir):
    from awm_engine.runtime.warm_socket import send_prepare

    recipe = _built(tmp_path)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    assert send_prepare(SCENARIO, [SAMPLES], None)
    until(lambda: f"bound to '{SCENARIO}'" in log(service_dir), "the prepared spare")
    assert "prepare: spare" in log(service_dir)
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is True
    lease.close()


def test_requests_a_prepare_cannot_use_bind_nothing_and_leave_the_spare(tmp_path, service_dir):
    """Garbage, unknown scenarios, relative directories, a template never built, a line past the limit: the service
    goes on, and its spare stays unbound for the next take."""
    from awm_engine.runtime.warm_socket import send_prepare

    _built(tmp_path)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    path = service_dir / "warm.sock"
    for line in (b"not json\n", b'{"op": "prepare"}\n', b'{"op": "prepare", "scenario": 7, "data": {}}\n',
                 json.dumps({"op": "prepare", "scenario": SCENARIO, "data": ["relative"]}).encode() + b"\n",
                 json.dumps({"op": "prepare", "scenario": SCENARIO,  # a variable that is not a string: dropped (no template)
                            "env": {"AWM_CACHE_DIR": 5, "HOME": str(tmp_path / "home")}}).encode() + b"\n",
                 b'{"op": "prepare", "scenario": "' + b"x" * (70 << 20) + b'"}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(path))
            try:
                sock.sendall(line)
            except OSError:  # the service closed a line past its limit
                pass
    assert send_prepare("no_such_scenario", [SAMPLES], None)
    assert send_prepare(SCENARIO, [str(tmp_path / "missing")], None)
    assert not send_prepare(SCENARIO, ["x" * (2 << 20)], None)  # past the prepare limit: never sent
    lease = warm.take(recipe="any")  # served in order after every request above: the unbound spare is still there
    assert lease is not None and lease.bound is False
    lease.close()
    assert "bound to" not in log(service_dir)


def test_a_server_takes_the_spare_its_own_prepare_loaded(tmp_path, service_dir, monkeypatch):
    """A server whose scenario no spare is bound to: its module is loaded into the ready spare while the server
    starts (``awm env serve`` sends the prepare first thing), and its clients see what a server that loaded it in a
    worker of its own shows them. The take waits for that load as long as it takes here (no timing in the test)."""
    _built(tmp_path)  # the template exists: the prepare resolves
    monkeypatch.setenv("AWM_WARM_PREPARED_WAIT", "300")  # the service's (started below) and the servers'
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    assert "bound to" not in log(service_dir)
    first, port, out = serve(tmp_path, "prepared")
    try:
        session = json.loads((out / "session.json").read_text())
        assert (session["worker"], session["worker_bound"]) == ("warm", True)
        prepared = tools_and_call(port)
    finally:
        stop(first)
    assert "prepare: spare" in log(service_dir)
    own, port, out = serve(tmp_path, "own", {"AWM_WARM": "0"})
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "own"
        assert tools_and_call(port) == prepared
    finally:
        stop(own)
