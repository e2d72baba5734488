"""A sandbox with no network could still open a socket of a family no network namespace contains: ``AF_VSOCK``
(found by attacking the sandbox as a hostile environment would; the test fails while the gap is open). On a virtual
machine — this one is a Firecracker guest — vsock is the channel to the hypervisor's host: the sandbox could listen
on it, and connect to the host's CID, where Firecracker hands each connection on to a unix socket of a host process
(``<uds_path>_<port>``). The test opens and binds a socket only; it connects to nothing."""
from __future__ import annotations

import json
import socket
import sys

import pytest

from awm_engine.sandbox import host
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

FAMILIES = r'''
import json, socket
out = {}
for name, family, kind in (("vsock", 40, socket.SOCK_STREAM), ("unix", socket.AF_UNIX, socket.SOCK_STREAM),
                           ("inet", socket.AF_INET, socket.SOCK_STREAM), ("inet6", socket.AF_INET6, socket.SOCK_STREAM),
                           ("netlink", socket.AF_NETLINK, socket.SOCK_DGRAM), ("alg", 38, socket.SOCK_SEQPACKET),
                           ("packet", 17, socket.SOCK_DGRAM)):
    try:
        s = socket.socket(family, kind)
    except OSError as exc:
        out[name] = type(exc).__name__
        continue
    out[name] = "created"
    if name == "vsock":
        try:
            s.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY))
            s.listen()
            out[name] = "listening"
        except OSError as exc:
            out[name] = "created, " + type(exc).__name__
    s.close()
print(json.dumps(out))
'''


def vsock_on_this_host() -> bool:
    try:
        socket.socket(40, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def test_no_socket_of_a_family_outside_the_network_namespace(tmp_path):
    if not host.protections().namespaces:
        pytest.skip(f"no namespace layer here: {host.protections().off.get('namespaces')}")
    if not vsock_on_this_host():
        pytest.skip("this kernel has no AF_VSOCK (no vsock transport): nothing to escape through here")
    done = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")]), "families").run(
        [sys.executable, "-c", FAMILIES], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["vsock"] not in ("created", "listening") and not out["vsock"].startswith("created"), out
    assert out["alg"] != "created" and out["packet"] != "created", out
    assert out["unix"] == out["inet"] == out["inet6"] == out["netlink"] == "created", out  # what code needs stays
    assert host.protections().network_isolated, host.protections().off  # the probe tries AF_VSOCK too


NETLINK = r'''
import json, socket
out = {}
for name, protocol in (("route", 0), ("sock_diag", 4), ("audit", 9), ("netfilter", 12), ("uevent", 15),
                       ("generic", 16)):
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol).close()
        out[name] = "created"
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
'''


def test_netlink_in_the_sandbox_is_routing_only(tmp_path):
    """Hardening, no exploit shown: the sandbox could open every netlink family — audit, netfilter (nf_tables), the
    kernel's uevents, generic netlink and its dozens of families, each kernel code reachable by untrusted code (the
    source of many privilege escalations). Only routing (what getaddrinfo asks) is needed."""
    if not host.protections().syscall_filter:
        pytest.skip(f"no system-call filter here: {host.protections().off.get('syscall_filter')}")
    done = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")]), "netlink").run(
        [sys.executable, "-c", NETLINK], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["route"] == "created", out
    assert [name for name, what in out.items() if what == "created" and name != "route"] == [], out
