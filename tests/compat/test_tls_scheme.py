"""What a ``tls://`` URL asks for: TLS required under :func:`natsjs_sync.connect` (and with
``tls=`` given), TLS when the server requires it under nats-py's two-step ``NATS().connect()``
(``programs/conn_tls_scheme.py`` shows that part under both clients)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.aio.client import NATS
from natsjs_sync.errors import NoServersTlsCertificateError, NoServersTlsError, SecureConnRequiredError
from natsjs_sync.testing import NatsServer
from tests.certs import CertFiles, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(certs: CertFiles) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key) as server:
        yield server


def _tls_url(server: NatsServer) -> str:
    return "tls://" + server.url.split("://", 1)[1]


def test_two_step_tls_url_to_a_plain_server_connects(shared_server: NatsServer) -> None:
    nc = NATS()
    nc.connect([_tls_url(shared_server)], allow_reconnect=False)
    try:
        nc.flush()
        assert nc.connected_url is not None and nc.connected_url.scheme == "tls"
    finally:
        nc.close()


def test_native_tls_url_to_a_plain_server_is_refused(shared_server: NatsServer) -> None:
    with pytest.raises(NoServersTlsError):
        nats.connect(_tls_url(shared_server), allow_reconnect=False)


def test_two_step_with_a_tls_context_still_requires_tls(shared_server: NatsServer) -> None:
    with pytest.raises(NoServersTlsError):
        NATS().connect([_tls_url(shared_server)], tls=ssl.create_default_context(), allow_reconnect=False)


def test_two_step_tls_url_uses_tls_where_the_server_requires_it(tls_server: NatsServer, certs: CertFiles) -> None:
    with pytest.raises(NoServersTlsCertificateError):  # TLS was used: the system CAs do not know ours
        NATS().connect([_tls_url(tls_server)], allow_reconnect=False)
    with pytest.raises(SecureConnRequiredError):
        NATS().connect([_tls_url(tls_server)], tls=False, allow_reconnect=False)  # nor is it left out
    nc = NATS()
    nc.connect([_tls_url(tls_server)], tls=ssl.create_default_context(cafile=str(certs.ca)), allow_reconnect=False)
    try:
        nc.flush()
    finally:
        nc.close()
