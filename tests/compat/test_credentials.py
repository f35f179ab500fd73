"""nats-py's forms of ``user_credentials=``: a path, ``RawCredentials`` (the file's content)
and a ``(jwt_file, nkey_seed_file)`` pair; a malformed file raises nats-py's
``InvalidUserCredentialsError``, which is our ``AuthorizationError`` too.

nats-py signs with the ``nkeys`` package, which the environment may lack, so these run
here against an operator-mode server rather than as programs under both clients.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.aio.client import NATS, RawCredentials, __version__
from natsjs_sync.auth import parse_creds
from natsjs_sync.errors import AuthorizationError, InvalidUserCredentialsError
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.jwt import Operator


@pytest.fixture(scope="module")
def operator_server() -> Iterator[tuple[Operator, NatsServer]]:
    op = Operator()
    op.add_account("APP")
    with NatsServer(jetstream=False, config=op.server_config()) as server:
        yield op, server


def _answers(nc: NATS) -> None:
    nc.subscribe("help", cb=lambda msg: msg.respond(b"OK!"))
    assert nc.request("help", b"?", timeout=5).data == b"OK!"


def test_raw_credentials_are_the_files_content(operator_server: tuple[Operator, NatsServer]) -> None:
    op, server = operator_server
    nc = NATS()
    nc.connect([server.url], user_credentials=RawCredentials(op.user_creds("APP")), allow_reconnect=False)
    try:
        _answers(nc)
    finally:
        nc.close()
    with nats.connect(server.url, user_credentials=RawCredentials(op.user_creds("APP"))) as native:
        _answers(native)  # type: ignore[arg-type]


def test_a_jwt_file_and_a_seed_file(operator_server: tuple[Operator, NatsServer], tmp_path: pathlib.Path) -> None:
    op, server = operator_server
    jwt, seed = parse_creds(op.user_creds("APP"))
    (tmp_path / "user.jwt").write_text(jwt + "\n")
    (tmp_path / "user.nk").write_text(seed + "\n")
    nc = NATS()
    nc.connect([server.url], user_credentials=(str(tmp_path / "user.jwt"), str(tmp_path / "user.nk")),
               allow_reconnect=False)
    try:
        _answers(nc)
    finally:
        nc.close()


def test_a_bad_pair_of_files_fails_before_connecting(tmp_path: pathlib.Path) -> None:
    (tmp_path / "user.jwt").write_text("eyJ.x.y\n")
    (tmp_path / "user.nk").write_text("SUNOTASEED\n")
    with pytest.raises(AuthorizationError, match="holds no valid nkey seed") as err:
        nats.connect("nats://127.0.0.1:1", user_credentials=(str(tmp_path / "user.jwt"), str(tmp_path / "user.nk")))
    assert "SUNOTASEED" not in str(err.value)
    with pytest.raises(AuthorizationError, match="cannot read"):
        nats.connect("nats://127.0.0.1:1", user_credentials=(str(tmp_path / "none.jwt"), str(tmp_path / "user.nk")))


def test_a_malformed_creds_file_is_invalid_user_credentials(tmp_path: pathlib.Path) -> None:
    """nats-py's bad-user.creds: the seed block is cut off after its BEGIN line."""
    creds = tmp_path / "bad-user.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\neyJhbGc.eyJqdGki.sig\n------END NATS USER JWT------\n\n"
                     " -----BEGIN USER NKEY SEED-----\n\n")
    with pytest.raises(InvalidUserCredentialsError) as err:
        NATS().connect(["nats://127.0.0.1:1"], user_credentials=str(creds), allow_reconnect=False)
    assert str(err.value).startswith("nats: invalid user credentials")
    assert isinstance(err.value, AuthorizationError)  # what this client raised before


@pytest.mark.parametrize("content", ["", "garbage", "/etc/hostname", "-----BEGIN NATS USER JWT-----\neyJ.x.y\n"])
def test_raw_credentials_without_a_jwt_and_seed_are_invalid_user_credentials(content: str) -> None:
    """RawCredentials is content, never a file's name: one line was taken for a missing file."""
    with pytest.raises(InvalidUserCredentialsError, match=r"^nats: invalid user credentials"):
        NATS().connect(["nats://127.0.0.1:1"], user_credentials=RawCredentials(content), allow_reconnect=False)


def test_version_is_the_clients() -> None:
    assert __version__ == nats.__version__
