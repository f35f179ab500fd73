"""A failed connect is both our error and the lower-level one nats-py lets through.

The TCP and timeout cases run as a program under both clients
(``programs/conn_errors.py``); a certificate needs a TLS server, made here.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import (
    ConnectRefusedError,
    NoServersError,
    NoServersTimeoutError,
    TlsCertificateError,
    TlsHandshakeError,
    connect_error,
)
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.server import free_port
from tests.certs import make_certs

FAST = {"reconnect_time_wait": 0.1, "connect_timeout": 2, "dont_randomize": True}


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        yield server


def test_an_untrusted_certificate_is_an_ssl_error_and_ours(tls_server: NatsServer) -> None:
    errors: list[Exception] = []
    with pytest.raises(ssl.SSLCertVerificationError) as caught:  # the system CAs do not know the test CA
        nats.connect(tls_server.url, allow_reconnect=False, error_cb=errors.append, **FAST)
    err = caught.value
    assert isinstance(err, NoServersError) and isinstance(err, TlsCertificateError)
    assert isinstance(err.__cause__, TlsCertificateError)
    assert isinstance(err.__cause__.__cause__, ssl.SSLCertVerificationError)  # the original, kept
    assert err.verify_code == err.__cause__.__cause__.verify_code
    assert "certificate" in str(err)
    assert errors and isinstance(errors[0], ssl.SSLError)


def test_an_untrusted_certificate_under_nats_py(tls_server: NatsServer) -> None:
    nats_py = pytest.importorskip("nats", reason="nats-py is not installed")

    async def main() -> BaseException:
        try:
            await asyncio.wait_for(nats_py.connect(tls_server.url, allow_reconnect=False, **FAST), 30)
        except BaseException as exc:
            return exc
        raise AssertionError("the connect must fail")

    assert isinstance(asyncio.run(main()), ssl.SSLCertVerificationError)


def test_a_reconnect_reports_the_refused_attempts_as_connection_refused() -> None:
    port = free_port()
    errors: list[Exception] = []
    refused = threading.Event()

    def on_error(e: Exception) -> None:
        errors.append(e)
        if isinstance(e, ConnectionRefusedError):
            refused.set()

    with NatsServer(jetstream=False, port=port) as server:
        nc = nats.connect(server.url, error_cb=on_error, max_reconnect_attempts=-1, **FAST)
    try:
        assert refused.wait(10), errors
        err = next(e for e in errors if isinstance(e, ConnectionRefusedError))
        assert isinstance(err, ConnectRefusedError) and isinstance(err.__cause__, ConnectionRefusedError)
    finally:
        nc.close()


def test_connect_error_keeps_other_errors_as_they_are() -> None:
    plain = nats.ConnectionError("closed the connection while we waited for the server's INFO")
    assert connect_error(plain) is plain
    timeout = nats.TimeoutError("timed out")
    timeout.__cause__ = TimeoutError()
    assert connect_error(timeout) is timeout
    wrapped = nats.ConnectionError("TLS handshake failed")
    wrapped.__cause__ = ssl.SSLError(1, "wrong version number")
    assert type(connect_error(wrapped)) is TlsHandshakeError
    assert issubclass(NoServersTimeoutError, TimeoutError) and issubclass(NoServersTimeoutError, nats.TimeoutError)
