"""What attacking the warm service's ``prepare`` (``awm env serve`` asks for its scenario's module in the ready spare
before its own imports) found, one regression test each.

Every test waits on a condition (a log line, a file, an answer), never on a pause; each uses a service directory of
its own (the ``service_dir`` fixture of test_warm) and stops the service at the end."""
from __future__ import annotations

from awm_engine.runtime import warm
from awm_engine.runtime.warm_socket import send_prepare
from tests.test_warm import SAMPLES, SCENARIO, _built, log, service_dir, until  # noqa: F401 - service_dir: fixture
from tests.tinyenv import make_env_dir


def test_a_prepare_from_a_server_with_other_sandbox_settings_runs_no_code(tmp_path, service_dir, monkeypatch):
    """A service started by ``awm --unsafe-no-sandbox env serve`` (untrusted code allowed without the namespace
    layer) must not load the scenario of a later server that did not allow it: a prepare carries no signature, so
    it carries the settings the signature covers, and the service acts only on its own."""
    from awm_engine.cli.serve_early import prepare

    _built(tmp_path)
    monkeypatch.setenv("AWM_UNSAFE_NO_SANDBOX", "1")
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    monkeypatch.delenv("AWM_UNSAFE_NO_SANDBOX")
    assert prepare(["env", "serve", "--scenario", SCENARIO, "--data", SAMPLES])  # no --unsafe-no-sandbox
    until(lambda: "ignored: other settings" in log(service_dir) or "bound to" in log(service_dir), "the prepare")
    assert "bound to" not in log(service_dir) and "prepare: spare" not in log(service_dir)
    # the same server with the flag on its command line is what the service was started for: loaded
    assert prepare(["--unsafe-no-sandbox", "env", "serve", "--scenario", SCENARIO, "--data", SAMPLES])
    until(lambda: f"bound to '{SCENARIO}'" in log(service_dir), "the prepared spare")


NOISY = "\nimport sys as _sys\n_sys.stdout.write('NOISY-START' + 'x' * (1 << 20)); _sys.stdout.flush()\n"


def test_a_scenario_that_prints_a_lot_at_import_is_still_loaded_ahead(tmp_path, service_dir, monkeypatch):
    """Nobody read a spare's output while a prepare loaded it: code that printed more than a pipe holds at import
    stopped there, and every server of it waited ``PREPARED_WAIT`` for a load that could not finish, then loaded it
    again. The service reads it meanwhile; its taker gets the start of it (the rest is noted as dropped)."""
    monkeypatch.setenv("AWM_WARM_PREPARED_WAIT", "300")  # a stuck load is never cut short by the take here
    data = make_env_dir(tmp_path / "data", {"noisy": NOISY})
    _built(tmp_path)  # (the cache directory)
    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache
    from awm_engine.runtime.pool import TemplateState

    scenario = Catalog.load([str(data)]).get("noisy")
    template = TemplateState(*TemplateCache(tmp_path / "cache" / "templates").get(scenario))
    recipe = warm.recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    assert send_prepare("noisy", [str(data)], None)
    until(lambda: "bound to 'noisy'" in log(service_dir), "the prepared spare")
    lease = warm.take(recipe=recipe)
    assert lease is not None and lease.bound is True
    out = tmp_path / "server.log"
    lease.copy_log(out)
    try:
        until(lambda: b"were dropped]" in out.read_bytes(), "what it printed")
        assert out.read_bytes().startswith(b"NOISY-START")
    finally:
        lease.close()


def test_a_fifo_in_the_template_cache_a_prepare_names_never_blocks_the_service(tmp_path):
    """A prepare names the cache its templates are in (the server's variables); a FIFO where a template's build
    report should be blocked the service's thread that read it for good — and a service whose thread never ends
    never exits either (``asyncio.run`` waits for its threads). The report is read only if it is a regular file."""
    import os
    import threading

    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache

    cache = tmp_path / "cache" / "templates"
    cache.mkdir(parents=True)
    db, report = TemplateCache(cache).paths(Catalog.load([SAMPLES]).get(SCENARIO))
    db.write_bytes(b"x")
    os.mkfifo(report)
    found: list = []
    resolving = threading.Thread(target=lambda: found.append(warm.resolve_prepare(
        {"op": "prepare", "scenario": SCENARIO, "data": [SAMPLES], "env": {"AWM_CACHE_DIR": str(tmp_path / "cache")}})),
        daemon=True)
    resolving.start()
    try:
        until(lambda: found, "the prepare to resolve", deadline=60)
        assert found == [None]
    finally:
        try:  # a reader still blocked in open(): released (it reads nothing)
            os.close(os.open(report, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        resolving.join(60)


def test_ctrl_c_stops_a_server_whose_take_waits_for_a_prepared_load(tmp_path, service_dir, monkeypatch):
    """A server interrupted while its take waits for the load a prepare started (code that loops at import here)
    stopped only when the take's thread returned, up to ``PREPARED_WAIT`` later, and ignored every later ctrl+c
    meanwhile. The take's socket is shut down when the server is interrupted: it stops at once."""
    import signal
    import subprocess
    import sys

    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache

    monkeypatch.setenv("AWM_WARM_PREPARED_WAIT", "600")  # the service's and the server's: the take would wait
    monkeypatch.setenv("AWM_LOAD_TIMEOUT", "900")  # as long as the load (not ended by its own timeout meanwhile)
    data = make_env_dir(tmp_path / "data", {"loopy": "\nimport time as _t\nwhile True:\n    _t.sleep(0.1)\n"})
    TemplateCache(tmp_path / "cache" / "templates").get(Catalog.load([str(data)]).get("loopy"))
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--data", str(data), "--scenario",
                             "loopy", "--port", "0", "--out", str(tmp_path / "session")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until(lambda: "take: waiting for the prepared load" in log(service_dir), "the server's take")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)  # (the take would wait 600 s)
        assert b"stopped before serving" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
