"""Nothing in the notebooks or the library reaches the network at run time.

``tests/netguard/sitecustomize.py`` refuses, inside any Python process started
with that folder on PYTHONPATH, every connection and name lookup that is not
for a loopback address, before a packet is sent. These tests check that the
guard really blocks (in a plain process and inside a Jupyter kernel) and that
loopback still works. Every numbered notebook then runs under nbval with the
guard on in its kernel in tests/notebooks/test_portable_outputs.py (its alternate
numerical settings run guarded), so a notebook that reached for the network
fails there, naming the guard's refusal.
No test sends anything anywhere but loopback: the refused addresses are in
TEST-NET-1 (192.0.2.0/24, reserved for documentation) and are never connected.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support import guarded_env

# Run inside a guarded process (plain Python, then a kernel); prints GUARD-OK at the end.
PROBE = textwrap.dedent(
    """
    import socket, sitecustomize
    assert getattr(socket, "NETGUARD_ACTIVE", False), "the guard is not installed"

    # refused before the real connect runs: swap it for a recorder first
    calls = []
    real = sitecustomize._connect
    sitecustomize._connect = lambda sock, address: calls.append(address)
    refused = ((socket.AF_INET, ("192.0.2.1", 80)), (socket.AF_INET6, ("2001:db8::1", 80)))
    for family, address in refused:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.connect(address)
            except sitecustomize.NetworkBlocked as error:
                assert str(error).startswith("netguard: connect"), error
            else:
                raise AssertionError(f"connect to {address} was not refused")
    assert calls == [], f"the real connect ran for {calls}"
    sitecustomize._connect = real

    for call in (lambda: socket.create_connection(("192.0.2.1", 443), timeout=1),
                 lambda: socket.getaddrinfo("example.org", 443),
                 lambda: socket.gethostbyname("example.org")):
        try:
            call()
        except OSError as error:
            assert "netguard:" in str(error), error
        else:
            raise AssertionError("a non-loopback call was not refused")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.sendto(b"x", ("192.0.2.1", 53))
        except sitecustomize.NetworkBlocked:
            pass
        else:
            raise AssertionError("sendto was not refused")

    # loopback still works: a listener on 127.0.0.1 and a connection to it
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(("localhost", server.getsockname()[1]), timeout=5):
            pass
    print("GUARD-OK")
    """
)


def test_guard_blocks_in_a_plain_process() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], env=guarded_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "GUARD-OK"


def test_guard_blocks_inside_a_kernel() -> None:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env=guarded_env(), startup_timeout=120)
    try:
        out: list[str] = []

        def keep(msg: dict) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = kc.execute_interactive(PROBE, timeout=120, output_hook=keep)
        assert reply["content"]["status"] == "ok", "".join(out)
        assert "".join(out).strip() == "GUARD-OK"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
