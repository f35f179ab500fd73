"""TLS against real servers with certificates made at test time."""

from __future__ import annotations

import pathlib
import ssl
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.testing import NatsServer
from tests.certs import CertFiles, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


def trusting(certs: CertFiles, client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if client_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


@pytest.fixture(scope="module")
def tls_server(certs: CertFiles) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        yield server


def test_tls_url_with_trusted_ca(tls_server: NatsServer, certs: CertFiles) -> None:
    assert tls_server.url.startswith("tls://")
    with nats.connect(tls_server.url, tls=trusting(certs)) as nc:
        sub = nc.subscribe("tls.x")
        nc.publish("tls.x", b"secret")
        assert sub.next_msg(timeout=2).data == b"secret"


def test_server_requiring_tls_is_honoured_on_a_nats_url(tls_server: NatsServer, certs: CertFiles) -> None:
    plain_url = tls_server.url.replace("tls://", "nats://")
    with nats.connect(plain_url, tls=trusting(certs)) as nc:
        nc.flush()


def test_unknown_ca_fails_verification(tls_server: NatsServer) -> None:
    with pytest.raises(nats.NoServersError, match="verif"):
        nats.connect(tls_server.url)  # the system CAs do not know our test CA


def test_tls_false_refuses_a_server_that_requires_tls(tls_server: NatsServer) -> None:
    with pytest.raises(nats.SecureConnRequiredError):
        nats.connect(tls_server.url.replace("tls://", "nats://"), tls=False)


def test_hostname_is_checked(certs: CertFiles) -> None:
    with NatsServer(jetstream=False, tls_cert=certs.wrong_host_cert, tls_key=certs.wrong_host_key) as server:
        with pytest.raises(nats.NoServersError, match=r"verif|match|hostname|IP"):
            nats.connect(server.url, tls=trusting(certs))


def test_mutual_tls(certs: CertFiles) -> None:
    with NatsServer(
        jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key, tls_ca=certs.ca, tls_verify=True
    ) as server:
        with nats.connect(server.url, tls=trusting(certs, client_cert=True)) as nc:
            nc.flush()
        with pytest.raises(nats.NatsError):
            nats.connect(server.url, tls=trusting(certs), connect_timeout=2)


def test_tls_handshake_first(certs: CertFiles) -> None:
    with NatsServer(
        jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key, tls_handshake_first=True
    ) as server:
        with nats.connect(server.url, tls=trusting(certs), tls_handshake_first=True) as nc:
            nc.flush()


def test_tls_reconnect(certs: CertFiles) -> None:
    import threading

    reconnected = threading.Event()
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        with nats.connect(server.url, tls=trusting(certs), reconnect_time_wait=0.1, reconnect_jitter_tls=0.05,
                          reconnected_cb=reconnected.set) as nc:
            sub = nc.subscribe("tls.rc")
            nc.flush()
            server.restart(kill=True)
            assert reconnected.wait(10)
            nc.publish("tls.rc", b"again")
            assert sub.next_msg(timeout=5).data == b"again"


def test_bad_tls_argument() -> None:
    with pytest.raises(TypeError):
        nats.connect("nats://127.0.0.1:1", tls="yes")  # type: ignore[arg-type]


def test_paths_are_not_needed_in_user_code(certs: CertFiles) -> None:
    assert pathlib.Path(certs.ca).exists()


def test_the_reader_and_writers_share_one_tls_connection_safely(tls_server: NatsServer, certs: CertFiles) -> None:
    # A TLS connection is one OpenSSL object: while the reader reads, callbacks and callers write
    # (here a responder in the same client answers requests). Unserialised, a read that met a
    # concurrent write could take OpenSSL's "want" state for an end of stream and drop the
    # connection ("the server closed the connection") with the server fine (16 of 40 connects).
    lost: list[BaseException] = []
    for _ in range(12):
        with nats.connect(tls_server.url, tls=trusting(certs), error_cb=lost.append,
                          max_reconnect_attempts=0) as nc:
            nc.subscribe("tls.echo", cb=lambda m: m.respond(m.data))
            nc.flush()
            for i in range(50):
                assert nc.request("tls.echo", b"x" * (i * 97), timeout=10).data == b"x" * (i * 97)
            assert nc.stats.reconnects == 0
    assert not lost


def test_a_requester_never_reads_a_tls_connection_itself(tls_server: NatsServer, certs: CertFiles) -> None:
    # TLS holds decrypted bytes a wait on the socket does not see: the reader thread reads alone.
    with nats.connect(tls_server.url, tls=trusting(certs), requester_reads=True) as nc:
        sub = nc.subscribe("tls.role")
        nc.publish("tls.role", b"tls")
        assert sub.next_msg(timeout=5).data == b"tls"
        session = nc._conn.read_session
        assert session is not None and session.role is None


def test_a_tls_socket_from_a_custom_dialer_is_shared_safely(certs: CertFiles) -> None:
    # A dialer may do the TLS itself (the server wants the handshake first): its socket is one
    # OpenSSL connection too, and the reader and the writers must take turns in it as well.
    import socket

    ctx = trusting(certs)

    def dial(host: str, port: int, timeout: float | None) -> socket.socket:
        return ctx.wrap_socket(socket.create_connection((host, port), timeout=timeout), server_hostname=host)

    lost: list[BaseException] = []
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key,
                    tls_handshake_first=True) as server:
        for _ in range(25):
            with nats.connect(server.url, tls=ctx, custom_dialer=dial, error_cb=lost.append,
                              max_reconnect_attempts=0) as nc:
                nc.subscribe("tls.dialed", cb=lambda m: m.respond(m.data))
                nc.flush()
                for i in range(50):
                    assert nc.request("tls.dialed", b"x" * (i * 97), timeout=10).data == b"x" * (i * 97)
                assert nc.stats.reconnects == 0
    assert not lost
