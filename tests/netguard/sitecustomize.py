"""Network guard for tests: any Python process started with this folder on PYTHONPATH
can reach loopback addresses only.

Python imports ``sitecustomize`` at start-up, so a kernel (or any child process)
launched with ``PYTHONPATH=tests/netguard`` refuses, before a single packet leaves:

- ``socket.connect`` / ``connect_ex`` / ``sendto`` to an address that is not
  loopback (127.0.0.0/8, ::1) or a Unix socket;
- name lookups (``getaddrinfo``, ``gethostbyname``...) for any host but
  ``localhost`` or a literal loopback address, so no DNS query is sent either.

A refusal raises `NetworkBlocked` (an OSError, as a real network failure would),
whose message starts with "netguard:". A sitecustomize found later on sys.path
(Debian ships one) is still run.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import ipaddress
import os
import socket
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


class NetworkBlocked(OSError):
    """Raised instead of reaching a non-loopback address."""


def _is_loopback_host(host) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host is None or host in _LOCAL_NAMES:
        return host is not None
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock, address, what: str) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix sockets and the like never leave the machine
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback_host(host):
        raise NetworkBlocked(f"netguard: {what} to {address!r} refused (loopback only)")


_connect, _connect_ex, _sendto = (
    socket.socket.connect,
    socket.socket.connect_ex,
    socket.socket.sendto,
)


def _guarded_connect(self, address):
    _check(self, address, "connect")
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    _check(self, address, "connect")
    return _connect_ex(self, address)


def _guarded_sendto(self, data, *args):
    _check(self, args[-1], "sendto")
    return _sendto(self, data, *args)


def _guard_lookup(name: str, original):
    def lookup(host, *args, **kwargs):
        if not _is_loopback_host(host):
            raise NetworkBlocked(f"netguard: {name}({host!r}) refused (loopback only)")
        return original(host, *args, **kwargs)

    lookup.__name__ = name
    return lookup


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
socket.socket.sendto = _guarded_sendto
for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
    setattr(socket, _name, _guard_lookup(_name, getattr(socket, _name)))
socket.NETGUARD_ACTIVE = True  # lets a test see, from inside a process, that the guard is on


def _run_next_sitecustomize() -> None:
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_run_next_sitecustomize()
