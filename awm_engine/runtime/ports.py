"""Loopback ports."""
from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A port on 127.0.0.1 that the OS reports free right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]
