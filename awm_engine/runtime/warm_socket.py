"""Where the warm service (``runtime.warm``) listens, and the one request a server sends before its own imports.

Kept apart from ``warm`` (asyncio, the sandbox) so that ``awm env serve`` can ask for its scenario's module to be
loaded within milliseconds of its start (``send_prepare``), while it is still importing what it needs to serve:
the standard library only.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

ENV_OFF = "AWM_WARM"
ENV_DIR = "AWM_WARM_DIR"
SOCKET = "warm.sock"
# the variables of the server's environment a ``prepare`` resolves its scenario's template with
PREPARE_ENV = ("AWM_CACHE_DIR", "AWM_TEMPLATE_MAX_AGE", "AWM_WARM_IDLE", "XDG_CACHE_HOME", "HOME")
PREPARE_LIMIT = 1 << 20  # bytes of a prepare request (a scenario name, data directories, a few variables)
# AWM_* variables that do not change a sandbox (``warm.signature`` leaves them out; ``settings``)
IGNORED = ("AWM_WARM", "AWM_CACHE_DIR", "AWM_SERVE_", "AWM_CONFIG_DIR")
UNSAFE_ENV = "AWM_UNSAFE_NO_SANDBOX"


def settings(unsafe: bool = False) -> dict[str, str]:
    """The AWM_* variables a spare's signature covers: a prepare is only acted on by a service started with the same
    (``--unsafe-no-sandbox``, ``unsafe``, counts as ``AWM_UNSAFE_NO_SANDBOX=1``, as the CLI sets it later)."""
    found = {k: v for k, v in os.environ.items() if k.startswith("AWM_") and not k.startswith(IGNORED)}
    if unsafe:
        found[UNSAFE_ENV] = "1"
    return found


def enabled() -> bool:
    return os.environ.get(ENV_OFF, "1") not in ("0", "false", "no", "off")


def service_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or Path(tempfile.gettempdir()) / f"awm-warm-{os.getuid()}")


def private_dir(path: Path) -> Path:
    """``path`` as a directory of this user's alone (made 0700 when missing); ValueError when it is anything else
    (a symlink, someone else's, open to others)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ValueError(f"{path} is not a private directory of this user's")
    return path


def send_prepare(scenario: str, data: list[str] | None, template_max_age: float | None, timeout: float = 0.25,
                 unsafe: bool = False) -> bool:
    """Ask a running service to load ``scenario``'s module into its spare now (``Service._prepare``): the server
    that sends this takes that spare a few hundred milliseconds later, once its own start is done, and skips the
    load. Fire and forget: no answer is awaited, nothing is started, and it never raises (no service, another
    user's directory, a full socket: the server loads as before). ``data``: the ``--data`` directories, made
    absolute here (the service runs elsewhere); ``unsafe``: the command line says ``--unsafe-no-sandbox``."""
    if not enabled() or not isinstance(scenario, str):
        return False
    request: dict[str, Any] = {
        "op": "prepare", "scenario": scenario,
        "data": [os.path.abspath(d) for d in data] if data else None,
        "template_max_age": template_max_age,
        "env": {k: os.environ[k] for k in PREPARE_ENV if k in os.environ},
        "settings": settings(unsafe),  # a service with other sandbox settings (untrusted code allowed?) loads nothing
    }
    try:
        line = json.dumps(request).encode() + b"\n"
        if len(line) > PREPARE_LIMIT:
            return False
        path = private_dir(service_dir()) / SOCKET
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(line)
        return True
    except (OSError, ValueError, TypeError):
        return False
