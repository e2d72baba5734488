"""What untrusted code may see: a scrubbed environment for every subprocess awm starts."""
from __future__ import annotations

import os

_KEEP_PREFIXES = ("HOME", "USER", "LOGNAME", "PATH", "LANG", "LC_", "TERM", "SHELL", "PWD", "TMPDIR", "TMP", "TEMP",
                  "TZ", "AWM_CACHE_DIR", "AWM_SAMPLE_ENVS")
_KEEP_EXACT = {"PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"}


def scrubbed_env(extra: dict[str, str] | None = None, source: dict[str, str] | None = None) -> dict[str, str]:
    """Only harmless variables survive (no API keys, tokens or endpoints); ``extra`` is added on top."""
    source = os.environ if source is None else source
    env = {k: v for k, v in source.items() if k in _KEEP_EXACT or k.startswith(_KEEP_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env
