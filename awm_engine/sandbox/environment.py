"""What untrusted code may see of the environment: an exact allow-list of variable names, nothing else.

Names are matched exactly (never by prefix: ``LANGCHAIN_API_KEY`` or ``USER_TOKEN`` must not pass because
they start like ``LANG`` or ``USER``). Secrets, endpoints and tokens never reach a sandboxed process.
"""
from __future__ import annotations

import os

ALLOWED_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "TZ",
    "HOME", "TMPDIR", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
    "VIRTUAL_ENV", "SYSTEMROOT", "AWM_CACHE_DIR", "AWM_SAMPLE_ENVS",
    "AWM_TEMPLATE_MAX_AGE", "AWM_SANDBOX", "AWM_SANDBOXED", "AWM_LOAD_TIMEOUT", "AWM_SWITCH_INTERVAL", "AWM_SETTLE_LIMIT",
})


def scrubbed_env(extra: dict[str, str] | None = None, source: dict[str, str] | None = None) -> dict[str, str]:
    """Only the allowed names survive (no API keys, tokens or endpoints); ``extra`` is added on top."""
    source = os.environ if source is None else source
    env = {k: v for k, v in source.items() if k in ALLOWED_NAMES}
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env
