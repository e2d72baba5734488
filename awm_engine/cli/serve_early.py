"""The first thing ``awm env serve`` does, before importing what it needs to serve (about 0.25 s): ask the warm
service to load its scenario's module into the ready spare (``warm_socket.send_prepare``). The load (about 0.25 s)
then runs beside this process's own start instead of after it; the server's take finds the spare loaded.

Only ``--scenario``, ``--data`` and ``--template-max-age`` are read here, with a parser that never prints or exits:
what it gets wrong costs nothing but the head start (the take names the scenario it resolved itself).
"""
from __future__ import annotations

import argparse


class _Quiet(argparse.ArgumentParser):
    def error(self, message: str):  # never the real parser's usage text or exit
        raise ValueError(message)


def prepare(argv: list[str]) -> bool:
    """True when a prepare was sent for ``argv`` (the command line after ``awm``)."""
    tokens = [a for a in argv if a != "--unsafe-no-sandbox"]
    if tokens[:2] != ["env", "serve"] or "-h" in tokens or "--help" in tokens:
        return False
    parser = _Quiet(add_help=False)
    parser.add_argument("--scenario")
    parser.add_argument("--data", action="append")
    parser.add_argument("--template-max-age", type=float)
    try:
        known, _ = parser.parse_known_args(tokens[2:])
    except (ValueError, TypeError, SystemExit):
        return False
    if not known.scenario:
        return False
    from awm_engine.runtime.warm_socket import send_prepare

    return send_prepare(known.scenario, known.data, known.template_max_age, unsafe="--unsafe-no-sandbox" in argv)
