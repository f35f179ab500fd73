"""Authentication against real servers: user/password, token, nkeys, JWT creds, callbacks."""

from __future__ import annotations

import base64
import os
import pathlib

import pytest

import natsjs_sync as nats
from natsjs_sync.nkeys import KeyPair
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.jwt import Operator, format_creds


@pytest.fixture(scope="module")
def nkey_user() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def nkey_server(nkey_user: KeyPair) -> object:
    with NatsServer(jetstream=False, nkeys=[nkey_user.public_key]) as server:
        yield server


def test_nkey_seed_string_and_file(nkey_server: NatsServer, nkey_user: KeyPair, tmp_path: pathlib.Path) -> None:
    with nats.connect(nkey_server.url, nkeys_seed=nkey_user.seed) as nc:
        nc.flush()
        assert nkey_user.seed not in repr(nc._options)
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(nkey_user.seed + "\n")
    with nats.connect(nkey_server.url, nkeys_seed=str(seed_file)) as nc:
        nc.flush()


def test_wrong_nkey_is_refused(nkey_server: NatsServer) -> None:
    other = KeyPair.generate()
    with pytest.raises(nats.AuthorizationError) as err:
        nats.connect(nkey_server.url, nkeys_seed=other.seed)
    assert other.seed not in str(err.value)


def test_invalid_seed_fails_before_connecting() -> None:
    with pytest.raises(nats.AuthorizationError, match="not a valid nkey seed") as err:
        nats.connect("nats://127.0.0.1:1", nkeys_seed="SUNOTAREALSEED")
    assert "SUNOTAREALSEED" not in str(err.value)


@pytest.fixture(scope="module")
def operator_server() -> object:
    op = Operator()
    op.add_account("APP")
    with NatsServer(jetstream=False, config=op.server_config()) as server:
        yield op, server


def test_creds_file(operator_server: tuple[Operator, NatsServer], tmp_path: pathlib.Path) -> None:
    op, server = operator_server
    creds = tmp_path / "app.creds"
    creds.write_text(op.user_creds("APP"))
    with nats.connect(server.url, user_credentials=str(creds)) as nc:
        sub = nc.subscribe("creds.test")
        nc.publish("creds.test", b"authenticated")
        assert sub.next_msg(timeout=2).data == b"authenticated"


def test_expired_creds_are_refused(operator_server: tuple[Operator, NatsServer], tmp_path: pathlib.Path) -> None:
    op, server = operator_server
    creds = tmp_path / "expired.creds"
    creds.write_text(op.user_creds("APP", expires_in=-60))
    with pytest.raises(nats.AuthorizationError):
        nats.connect(server.url, user_credentials=str(creds))


def test_creds_from_another_operator_are_refused(
    operator_server: tuple[Operator, NatsServer], tmp_path: pathlib.Path
) -> None:
    _, server = operator_server
    stranger = Operator("stranger")
    stranger.add_account("APP")
    creds = tmp_path / "stranger.creds"
    creds.write_text(stranger.user_creds("APP"))
    with pytest.raises(nats.AuthorizationError):
        nats.connect(server.url, user_credentials=str(creds))


def test_malformed_creds_fail_before_connecting(tmp_path: pathlib.Path) -> None:
    creds = tmp_path / "bad.creds"
    creds.write_text("this is not a creds file")
    with pytest.raises(nats.AuthorizationError, match="no user JWT"):
        nats.connect("nats://127.0.0.1:1", user_credentials=str(creds))


def test_jwt_and_signature_callbacks(operator_server: tuple[Operator, NatsServer]) -> None:
    op, server = operator_server
    text = op.user_creds("APP")
    from natsjs_sync.auth import parse_creds

    jwt, seed = parse_creds(text)
    kp = KeyPair.from_seed(seed)
    calls: list[str] = []

    def sign(nonce: str) -> bytes:
        calls.append(nonce)
        return kp.sign(nonce.encode())

    with nats.connect(server.url, user_jwt_cb=lambda: jwt, signature_cb=sign) as nc:
        nc.flush()
    assert len(calls) == 1
    # A base64url string is accepted from the signature callback as well.
    b64 = lambda n: base64.urlsafe_b64encode(kp.sign(n.encode())).decode().rstrip("=")  # noqa: E731
    with nats.connect(server.url, user_jwt_cb=lambda: jwt, signature_cb=b64) as nc:
        nc.flush()
    assert format_creds(jwt, seed).count("BEGIN") == 2


def test_dynamic_token_and_user_callbacks() -> None:
    with NatsServer(jetstream=False, token="tok-dyn") as server:
        with nats.connect(server.url, token_cb=lambda: "tok-dyn") as nc:
            nc.flush()
    with NatsServer(jetstream=False, user="u", password="p-dyn") as server:
        with nats.connect(server.url, user_info_cb=lambda: ("u", "p-dyn")) as nc:
            nc.flush()
        with pytest.raises(nats.AuthorizationError) as err:
            nats.connect(server.url, user_info_cb=lambda: ("u", "wrong-secret"))
        assert "wrong-secret" not in str(err.value)


def test_signature_cb_is_required_with_user_jwt_cb() -> None:
    with pytest.raises(ValueError):
        nats.connect("nats://127.0.0.1:1", user_jwt_cb=lambda: "x")


def test_credentials_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with NatsServer(jetstream=False, user="alice", password="hunter2-secret") as server:
        host = server.url.split("//")[1]
        errors: list[Exception] = []
        with nats.connect(f"nats://alice:hunter2-secret@{host}", error_cb=errors.append) as nc:
            nc.flush()
            assert "hunter2-secret" not in repr(nc) + repr(nc._options) + str(nc.servers)
    assert "hunter2-secret" not in caplog.text
    assert not any("hunter2-secret" in str(e) for e in errors)
    assert os.environ.get("NATS_URL", "").find("hunter2") < 0


def test_seed_and_creds_files_may_be_given_as_paths(nkey_server: NatsServer, nkey_user: KeyPair,
                                                    operator_server: tuple[Operator, NatsServer],
                                                    tmp_path: pathlib.Path) -> None:
    # A pathlib.Path raised AttributeError/TypeError from connect(): a web probe answered 500, not 503.
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(nkey_user.seed)
    with nats.connect(nkey_server.url, nkeys_seed=seed_file) as nc:
        nc.flush()
    op, server = operator_server
    creds = tmp_path / "app.creds"
    creds.write_text(op.user_creds("APP"))
    with nats.connect(server.url, user_credentials=creds) as nc:
        nc.flush()
    for kwargs in ({"nkeys_seed": tmp_path / "gone.nk"}, {"user_credentials": tmp_path / "gone.creds"},
                   {"user_credentials": str(tmp_path / "gone.creds")}):
        with pytest.raises(nats.AuthorizationError, match="gone") as err:  # the file named, nothing sent
            nats.connect(server.url, **kwargs)
        assert "does not exist" in str(err.value) or "No such file" in str(err.value)


def test_a_seed_or_creds_file_that_is_no_utf8_text_is_refused_without_its_content(tmp_path: pathlib.Path) -> None:
    """A stray byte in a seed or creds file (a Latin-1 comment, a file saved in another encoding): the
    UnicodeDecodeError of reading it holds the whole file, seed included, in its repr. It is an
    AuthorizationError naming the file, holding nothing of its content, before anything is sent."""
    seed = KeyPair.generate().seed
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed.encode() + b"\n# caf\xe9\n")
    creds_file = tmp_path / "user.creds"
    creds_file.write_bytes(b"# \xff\n" + format_creds("eyJhbGciOiJlZDI1NTE5In0.e30.c2ln", seed).encode())
    for kwargs in ({"nkeys_seed": str(seed_file)}, {"nkeys_seed": seed_file}, {"user_credentials": str(creds_file)}):
        with pytest.raises(nats.AuthorizationError, match="no UTF-8 text") as err:
            nats.connect("nats://127.0.0.1:1", allow_reconnect=False, **kwargs)
        path = str(next(iter(kwargs.values())))
        assert path in str(err.value)
        chain = [err.value, err.value.__cause__, err.value.__context__]
        assert not any(seed in repr(e) or seed[:20] in repr(e) for e in chain), chain


def test_credentials_of_the_wrong_type_are_refused_before_connecting() -> None:
    with NatsServer(jetstream=False, user="u", password="p-cb") as server:
        for kwargs in ({"user": 123, "password": "p-cb"}, {"user": "u", "password": 12345},
                       {"token": b"p-cb"}, {"user_info_cb": "u:p-cb"}, {"token_cb": "p-cb"}):
            with pytest.raises(TypeError) as err:
                nats.connect(server.url, **kwargs)  # type: ignore[arg-type]
            assert "p-cb" not in str(err.value) and "12345" not in str(err.value)
        # nats-py's callable user and password are asked at each connect (they crashed the CONNECT).
        with nats.connect(server.url, user=lambda: "u", password=lambda: "p-cb") as nc:  # type: ignore[arg-type]
            nc.flush()
        with nats.connect(server.url, user="u", password=lambda: "p-cb") as nc:  # type: ignore[arg-type]
            nc.flush()


def test_connect_takes_the_defaults_of_its_options() -> None:
    # connect() hands ConnectOptions only the keywords given: both must have the same defaults.
    import dataclasses
    import inspect

    from natsjs_sync._core.options import ConnectOptions

    fields = {f.name: f.default for f in dataclasses.fields(ConnectOptions)}
    defaults = {name: p.default for name, p in inspect.signature(nats.connect).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name in fields}
    assert defaults and all(fields[name] == value for name, value in defaults.items()), defaults
