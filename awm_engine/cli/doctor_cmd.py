"""``awm doctor sandbox``: which protections hold on this machine, measured by running the sandbox's probe."""
from __future__ import annotations

import argparse
import json

from rich.markup import escape

from rich.table import Table

from awm_engine.cli import verb_help
from awm_engine.cli.common import stdout
from awm_engine.sandbox import host

MECHANISMS = {
    "env_allowlist": "an exact allow-list of environment variable names",
    "namespaces": "bubblewrap: user, mount, pid, network, IPC, UTS and cgroup namespaces",
    "distinct_uid": f"an unprivileged uid that owns nothing (AWM_SANDBOX_UID, default {host.DEFAULT_SANDBOX_UID})",
    "filesystem_view": "bubblewrap: a minimal read-only view (Python, packages, awm's code, own directories)",
    "path_sockets_blocked": "the filesystem view: host unix sockets are not in it",
    "network_isolated": "an empty network namespace (and Landlock TCP rules)",
    "proc_isolated": "a pid namespace with its own /proc",
    "ipc_isolated": "an IPC namespace: SysV shared memory dies with the sandbox",
    "syscall_filter": "seccomp (libseccomp): ptrace, mount, unshare, keyctl, bpf, io_uring … denied",
    "writes_confined": "Landlock: writes only below the sandbox's own directories",
    "signals_scoped": "Landlock ABI 6 scoping: no signals or abstract sockets outside the sandbox",
    "memory_limit": "a memory cgroup per sandbox",
    "process_limit": "a pids cgroup per sandbox (or RLIMIT_NPROC in its own user namespace)",
    "disk_quota": "a size-capped tmpfs for each worker's directory (AWM_SANDBOX_DISK_MB)",
    "limits": "rlimits per process: address space, file size, open files, CPU time; no core dumps",
    "no_survivors": "the pid namespace: everything inside dies with the sandbox",
    "parent_nondumpable": "prctl(PR_SET_DUMPABLE, 0) on the awm process",
}


def register(verbs: argparse._SubParsersAction) -> None:
    doctor = verbs.add_parser("doctor", help=verb_help("doctor"))
    sub = doctor.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True
    sandbox = sub.add_parser("sandbox", help="measure which sandbox protections hold here (exit 1 if any is off)")
    sandbox.add_argument("--json", action="store_true", help="the measured protections as JSON")
    sandbox.set_defaults(func=run_sandbox)


def run_sandbox(args: argparse.Namespace) -> int:
    from awm_engine.verify import shared_host

    p = host.protections()
    usable, why = shared_host.usable()
    if args.json:
        print(json.dumps({**p.to_dict(), "verifier_hosts": {"on": usable, "why_off": why or None}}, indent=2))
        return 1 if p.off else 0
    table = Table(title=f"awm sandbox protections on this machine (mechanism: {p.mechanism})")
    for column in ("protection", "state", "mechanism", "when off"):
        table.add_column(column, overflow="fold")
    for name, mechanism in MECHANISMS.items():
        on = bool(getattr(p, name))
        table.add_row(name.replace("_", " "), "[green]on[/green]" if on else "[red]OFF[/red]", mechanism,
                      "" if on else p.off.get(name, host.EXPOSES.get(name, "")))
    stdout.print(table)
    if p.unsafe_no_sandbox:
        stdout.print("[red]untrusted code runs without the namespace layer (--unsafe-no-sandbox)[/red]")
    stdout.print(f"{len(MECHANISMS) - sum(1 for n in MECHANISMS if not getattr(p, n))} of {len(MECHANISMS)} "
                 "protections on" + ("" if not p.off else f"; off: {', '.join(sorted(p.off))}"))
    stdout.print("verifier hosts: " + ("on (a scenario's verifiers share one sandbox, each a fresh confined process)"
                                       if usable else f"off ({escape(why)}): each verifier gets a sandbox of its own "
                                                      "(the same isolation, about ten times slower)"))
    return 1 if p.off else 0
