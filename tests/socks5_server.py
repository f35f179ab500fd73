"""A small SOCKS5 proxy (RFC 1928, CONNECT only; RFC 1929 user/password when asked), run
as its own process by the tests: ``python tests/socks5_server.py [--user U --password P]``.

It prints ``PORT <n>`` once it listens on 127.0.0.1, then ``CONNECT <host> <port>`` for each
connection it makes (host as the client sent it: a name means the proxy resolved it).
Written from the RFCs for the tests; no library involved.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(client: socket.socket, user: str | None, password: str | None, lock: threading.Lock) -> None:
    try:
        version, count = _exactly(client, 2)
        methods = _exactly(client, count)
        want = 2 if user is not None else 0
        if version != 5 or want not in methods:
            client.sendall(b"\x05\xff")
            return
        client.sendall(bytes([5, want]))
        if want == 2:
            _ver, ulen = _exactly(client, 2)
            got_user = _exactly(client, ulen).decode()
            (plen,) = _exactly(client, 1)
            got_password = _exactly(client, plen).decode()
            ok = got_user == user and got_password == password
            client.sendall(b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                return
        _ver, cmd, _rsv, atyp = _exactly(client, 4)
        if atyp == 1:
            host = socket.inet_ntop(socket.AF_INET, _exactly(client, 4))
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))
        else:
            (n,) = _exactly(client, 1)
            host = _exactly(client, n).decode()
        (port,) = struct.unpack("!H", _exactly(client, 2))
        if cmd != 1:
            client.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return
        with lock:
            print(f"CONNECT {host} {port}", flush=True)
        try:
            upstream = socket.create_connection((host, port), timeout=10)
        except OSError:
            client.sendall(b"\x05\x05\x00\x01" + bytes(6))  # connection refused
            return
        upstream.settimeout(None)
        bound_host, bound_port = upstream.getsockname()[:2]
        client.sendall(b"\x05\x00\x00\x01" + socket.inet_aton(bound_host) + struct.pack("!H", bound_port))
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)
    except (OSError, ValueError):
        pass
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0))
    lock = threading.Lock()
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    # Ends with its parent: the tests hold its stdin open and close it (or die).
    threading.Thread(target=lambda: (sys.stdin.read(), listener.close()), daemon=True).start()
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve, args=(client, args.user, args.password, lock), daemon=True).start()


if __name__ == "__main__":
    main()
