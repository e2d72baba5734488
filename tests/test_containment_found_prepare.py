"""What attacking the warm service's ``prepare`` (``awm env serve`` asks for its scenario's module in the ready spare
before its own imports) found, one regression test each.

Every test waits on a condition (a log line, a file, an answer), never on a pause; each uses a service directory of
its own (the ``service_dir`` fixture of test_warm) and stops the service at the end."""
from __future__ import annotations

from awm_engine.runtime import warm
from tests.test_warm import SAMPLES, SCENARIO, _built, log, service_dir, until  # noqa: F401 - service_dir: fixture


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
