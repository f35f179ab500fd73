"""NATS contexts (ADR-21): ``connect(context=)``, the CLI's ``--context`` and ``context`` commands,
and the files shared with the nats CLI and natsio's ``natsio.natscontext``.

Every test points ``XDG_CONFIG_HOME`` and ``HOME`` at its own folder: the real
``~/.config/nats`` is never read or written.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync import natscontext
from natsjs_sync.auth import parse_creds
from natsjs_sync.cli import main
from natsjs_sync.msg import Msg
from natsjs_sync.natscontext import ContextError
from natsjs_sync.nkeys import KeyPair
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.jwt import Operator
from tests import natsio_env
from tests.certs import CertFiles, make_certs

pytestmark = pytest.mark.usefixtures("config_home")


def context_file(name: str) -> pathlib.Path:
    return natscontext.config_dir() / "context" / f"{name}.json"


#: The fields of a context file as the current nats CLI writes them, in its order (jsm.go's
#: natscontext/context.go, the settings struct; json.MarshalIndent writes every field).
NATS_CLI_FIELDS = (
    "description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey", "cert", "key", "ca", "nsc",
    "jetstream_domain", "jetstream_api_prefix", "jetstream_event_prefix", "inbox_prefix", "user_jwt", "user_seed",
    "color_scheme", "tls_first", "windows_cert_store", "windows_cert_match_by", "windows_cert_match",
    "windows_ca_certs_match",
)


def write_as_the_nats_cli(name: str, **fields: object) -> pathlib.Path:
    """A context file as the nats CLI writes it: every field, empty ones too, two-space indents."""
    settings: dict[str, object] = {key: "" for key in NATS_CLI_FIELDS}
    settings.update(tls_first=False, windows_ca_certs_match=None)
    settings.update(fields)
    path = context_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))
    return path


def round_trip(nc: nats.Client, subject: str = "ctx.check") -> None:
    sub = nc.subscribe(subject)
    nc.publish(subject, b"through the context")
    assert sub.next_msg(timeout=5).data == b"through the context"


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A listening socket that is never answered: its backlog shows whether a client tried it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield f"nats://127.0.0.1:{sock.getsockname()[1]}", sock
    sock.close()


def assert_never_dialled(sock: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        sock.accept()[0].close()


# ---------------------------------------------------------------- each kind of credential


def test_user_and_password() -> None:
    with NatsServer(jetstream=False, user="alice", password="pw-ctx") as server:
        natscontext.save("userpass", url=server.url, user="alice", password="pw-ctx")
        with nats.connect(context="userpass") as nc:
            round_trip(nc)
        # Explicit credentials win, as a group: the context's password is not used with them.
        with pytest.raises(nats.AuthorizationError):
            nats.connect(context="userpass", user="alice", password="wrong", allow_reconnect=False)


def test_token() -> None:
    with NatsServer(jetstream=False, token="tok-ctx") as server:
        natscontext.save("tok", url=server.url, token="tok-ctx")
        with nats.connect(context="tok") as nc:
            round_trip(nc)


def test_nkey_seed_file_with_a_home_relative_path(config_home: pathlib.Path) -> None:
    user = KeyPair.generate()
    (config_home / "user.nk").write_text(user.seed + "\n")
    with NatsServer(jetstream=False, nkeys=[user.public_key]) as server:
        natscontext.save("nk", url=server.url, nkey="~/user.nk")
        with nats.connect(context="nk") as nc:
            round_trip(nc)


@pytest.fixture(scope="module")
def operator_server() -> Iterator[tuple[Operator, NatsServer]]:
    op = Operator()
    op.add_account("APP")
    with NatsServer(jetstream=False, config=op.server_config()) as server:
        yield op, server


def test_creds_file_from_an_operator_mode_server(operator_server: tuple[Operator, NatsServer],
                                                 config_home: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    op, server = operator_server
    (config_home / "app.creds").write_text(op.user_creds("APP"))
    monkeypatch.setenv("CREDS_HOME", str(config_home))
    natscontext.save("creds", url=server.url, creds="$CREDS_HOME/app.creds")  # $VARS expand, as in orbit.go
    with nats.connect(context="creds") as nc:
        round_trip(nc)


def test_user_jwt_and_user_seed_as_the_nats_cli_saves_them(operator_server: tuple[Operator, NatsServer]) -> None:
    """``nats context save NAME --jwt JWT --seed SEED`` writes ``user_jwt`` and ``user_seed``
    (natscli cli/context_command.go: WithUserJWT, WithUserSeed); jsm.go's natscontext/context.go
    (NATSOptions) connects with the two, read literally or through a reference. Such a context
    was refused here ("needs the nkey field")."""
    op, server = operator_server
    jwt, seed = parse_creds(op.user_creds("APP"))
    write_as_the_nats_cli("jwt", url=server.url, user_jwt=jwt, user_seed=seed)
    with nats.connect(context="jwt") as nc:
        round_trip(nc)


def test_our_save_of_a_jwt_is_read_by_the_nats_cli_as_jwt_auth(operator_server: tuple[Operator, NatsServer],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """jsm.go's natscontext/context.go (NATSOptions) reads ``nkey`` before ``user_jwt``: a context
    we saved with ``user_jwt`` + ``nkey`` was nkey-only auth there, and its Validate refuses to save
    the two together. We save the seed of a JWT in ``user_seed``, with the nats CLI's flags."""
    op, server = operator_server
    jwt, seed = parse_creds(op.user_creds("APP"))
    code, _, err = run(capsys, "context", "save", "ours", "--server", server.url, "--jwt", jwt, "--seed", seed)
    assert code == 0, err
    saved = json.loads(context_file("ours").read_text())
    assert (saved["user_jwt"], saved["user_seed"], saved["nkey"]) == (jwt, seed, "")
    with nats.connect(context="ours") as nc:
        round_trip(nc)


def test_a_jwt_context_saved_by_an_older_natsjs_sync_keeps_working_and_is_saved_as_the_nats_cli_reads_it(
        operator_server: tuple[Operator, NatsServer], config_home: pathlib.Path) -> None:
    op, server = operator_server
    jwt, seed = parse_creds(op.user_creds("APP"))
    (config_home / "user.nk").write_text(seed)
    write_as_the_nats_cli("old", url=server.url, user_jwt=jwt, nkey="~/user.nk")  # as we wrote it before
    with nats.connect(context="old") as nc:
        round_trip(nc)
    natscontext.save("old", description="saved again")
    saved = json.loads(context_file("old").read_text())
    assert (saved["user_jwt"], saved["user_seed"], saved["nkey"]) == (jwt, "file://~/user.nk", "")
    with nats.connect(context="old") as nc:
        round_trip(nc)


def test_a_user_jwt_alone_is_a_bearer_jwt_sent_unsigned(operator_server: tuple[Operator, NatsServer]) -> None:
    """jsm.go's natscontext/context.go (NATSOptions): ``user_jwt`` without ``user_seed`` connects with
    the JWT and no signature, which a server accepts for a bearer JWT only."""
    op, server = operator_server
    bearer, _ = parse_creds(op.user_creds("APP", bearer=True))
    write_as_the_nats_cli("bearer", url=server.url, user_jwt=bearer)
    with nats.connect(context="bearer") as nc:
        round_trip(nc)
    signed_only, _ = parse_creds(op.user_creds("APP"))
    write_as_the_nats_cli("not-bearer", url=server.url, user_jwt=signed_only)
    with pytest.raises(nats.AuthorizationError):
        nats.connect(context="not-bearer", allow_reconnect=False)


def test_one_kind_of_credentials_per_context_as_the_nats_cli_saves() -> None:
    """jsm.go's natscontext/context.go (Validate, numCreds): user, creds, nkey, nsc and user_jwt
    exclude each other in a saved context."""
    with pytest.raises(ContextError, match=r"'two'.*one kind of credentials.*user, creds"):
        natscontext.save("two", user="alice", creds="/some/app.creds")
    assert not context_file("two").exists()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_tls_with_a_client_certificate(certs: CertFiles) -> None:
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key, tls_ca=certs.ca,
                    tls_verify=True) as server:
        natscontext.save("mtls", url=server.url, cert=str(certs.client_cert), key=str(certs.client_key),
                         ca=str(certs.ca))
        with nats.connect(context="mtls") as nc:
            round_trip(nc)
        # Without the client certificate the same server refuses: the context's cert was what got us in.
        natscontext.save("ca-only", url=server.url, ca=str(certs.ca))
        with pytest.raises(nats.NatsError):
            nats.connect(context="ca-only", allow_reconnect=False, connect_timeout=5)


def test_tls_first(certs: CertFiles) -> None:
    with NatsServer(jetstream=False, tls_cert=certs.server_cert, tls_key=certs.server_key,
                    tls_handshake_first=True) as server:
        natscontext.save("first", url=server.url, ca=str(certs.ca), tls_first=True)
        with nats.connect(context="first") as nc:
            round_trip(nc)


# ---------------------------------------------------------------- what a context gives, and what wins


def inbox_seen(nc: nats.Client, responder: nats.Client) -> str:
    """The reply subject a request of ``nc`` carries, as a responder sees it."""
    replies: list[str] = []

    def answer(msg: Msg) -> None:
        replies.append(msg.reply or "")
        msg.respond(b"ok")

    sub = responder.subscribe("ctx.inbox", cb=answer)
    responder.flush()
    try:
        assert nc.request("ctx.inbox", b"", timeout=5).data == b"ok"
    finally:
        sub.unsubscribe()
    return replies[0]


def test_empty_name_is_nats_context_else_the_selected_one(shared_server: NatsServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    natscontext.save("picked", url=shared_server.url, inbox_prefix="_PICKED")
    natscontext.save("env", url=shared_server.url, inbox_prefix="_ENV")
    with pytest.raises(ContextError, match="no context"):
        nats.connect(context="")
    natscontext.select("picked")
    assert (natscontext.config_dir() / "context.txt").read_text().strip() == "picked"
    with nats.connect(shared_server.url) as responder:
        with nats.connect(context="") as nc:
            assert inbox_seen(nc, responder).startswith("_PICKED.")
        monkeypatch.setenv("NATS_CONTEXT", "env")
        with nats.connect(context="") as nc:
            assert inbox_seen(nc, responder).startswith("_ENV.")
        # A name given, and explicit arguments, win over both.
        with nats.connect(context="picked", inbox_prefix="_MINE") as nc:
            assert inbox_seen(nc, responder).startswith("_MINE.")


def test_a_context_file_by_its_absolute_path(shared_server: NatsServer, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "app" / "nats.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"url": shared_server.url, "inbox_prefix": "_FILE"}))
    with nats.connect(context=str(path)) as nc, nats.connect(shared_server.url) as responder:
        assert inbox_seen(nc, responder).startswith("_FILE.")
    assert natscontext.load(str(path)).name == "nats"
    with pytest.raises(ContextError, match="unknown context 'gone'"):
        nats.connect(context=str(tmp_path / "gone.json"))


def test_explicit_servers_win_over_the_context_url(shared_server: NatsServer,
                                                   listener: tuple[str, socket.socket]) -> None:
    url, sock = listener
    natscontext.save("elsewhere", url=url)
    with nats.connect(shared_server.url, context="elsewhere") as nc:
        round_trip(nc)
    assert_never_dialled(sock)


def test_a_comma_separated_url_list(shared_server: NatsServer, listener: tuple[str, socket.socket]) -> None:
    url, _ = listener
    natscontext.save("two", url=f"{url}, {shared_server.url}")
    # The first URL never answers (it costs the whole connect_timeout); the second must fit
    # in one too, on a loaded machine: 3 s for what takes milliseconds.
    with nats.connect(context="two", no_randomize=True, connect_timeout=3) as nc:
        assert nc.connected_url is not None and str(shared_server.port) in nc.connected_url


def test_jetstream_domain_and_api_prefix(shared_server: NatsServer) -> None:
    # A relay answers requests on $JS.hub.API.> with the server's own answer on $JS.API.>: the
    # context's JetStream calls succeed only if they went to the domain's subjects.
    relayed: list[str] = []
    with nats.connect(shared_server.url) as spy, nats.connect(shared_server.url) as upstream:
        def relay(msg: Msg) -> None:
            relayed.append(msg.subject)
            msg.respond(upstream.request("$JS.API." + msg.subject[len("$JS.hub.API."):], msg.data, timeout=5).data)

        spy.subscribe("$JS.hub.API.>", cb=relay)
        spy.flush()
        natscontext.save("hub", url=shared_server.url, jetstream_domain="hub")
        with nats.connect(context="hub") as nc:
            nc.jetstream(timeout=10).account_info()
            assert relayed == ["$JS.hub.API.INFO"]
            nc.jetstream(domain="").account_info()  # an explicit domain wins ("": none, the local API)
            with pytest.raises(nats.JetStreamNotEnabledError, match=r"\$JS\.elsewhere\.API"):
                nc.jetstream(domain="elsewhere").account_info()
            assert relayed == ["$JS.hub.API.INFO"]
        natscontext.save("hub-prefix", url=shared_server.url, jetstream_api_prefix="$JS.hub.API")
        with nats.connect(context="hub-prefix") as nc:
            nc.jetstream(timeout=10).account_info()
            assert relayed == ["$JS.hub.API.INFO"] * 2


# ---------------------------------------------------------------- clear errors, before any connection


def test_unknown_context(listener: tuple[str, socket.socket]) -> None:
    with pytest.raises(ContextError, match=r"unknown context 'nope'"):
        nats.connect(context="nope")
    with pytest.raises(ContextError, match="invalid context name"):
        nats.connect(context="../escape")


@pytest.mark.parametrize(("settings", "field"), [
    ({"creds": "/nonexistent/app.creds"}, "creds"),
    ({"nkey": "~/missing.nk"}, "nkey"),
    ({"ca": "/nonexistent/ca.pem"}, "ca"),
    ({"cert": "/nonexistent/client.pem"}, "key"),
    ({"socks_proxy": "http://127.0.0.1:3128"}, "socks_proxy"),
    ({"windows_cert_store": "windowscurrentuser"}, "windows_cert_store"),
    ({"tls_first": "yes"}, "tls_first"),
    ({"token": 42}, "token"),
])
def test_a_setting_that_cannot_be_honoured_is_named(settings: dict[str, object], field: str,
                                                    listener: tuple[str, socket.socket]) -> None:
    url, sock = listener
    natscontext.save("broken", url=url, **settings)
    with pytest.raises(ContextError) as err:
        nats.connect(context="broken")
    assert "'broken'" in str(err.value) and f"{field}:" in str(err.value)
    assert_never_dialled(sock)


def test_a_file_that_is_not_a_json_object() -> None:
    context_file("junk").parent.mkdir(parents=True)
    context_file("junk").write_text("[1, 2]")
    with pytest.raises(ContextError, match=r"'junk'.*JSON object"):
        nats.connect(context="junk")


def test_a_file_that_is_no_utf8_text_is_a_context_error_without_its_content(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A stray byte in a hand-edited context file: the error names the context and the file, holds
    nothing of its content (a UnicodeDecodeError's repr holds the whole file, passwords included),
    and 'context ls' still lists the other contexts, this one as unreadable."""
    natscontext.save("good", url="nats://n1:4222", description="a context")
    context_file("latin").write_bytes(b'{"url": "nats://127.0.0.1:1", "user": "alice", '
                                      b'"password": "pw-Latin-8Qx", "description": "caf\xe9"}')
    with pytest.raises(ContextError, match=r"'latin'.*no UTF-8 text") as err:
        nats.connect(context="latin")
    assert all("pw-Latin-8Qx" not in repr(e) for e in (err.value, err.value.__cause__, err.value.__context__))
    code, out, _ = run(capsys, "context", "ls")
    lines = [line.split(None, 1) for line in out.splitlines()]
    assert code == 0 and lines[0] == ["good", "a context"] and lines[1][0] == "latin", out
    assert lines[1][1].startswith("(unreadable: context 'latin'")
    assert "pw-Latin-8Qx" not in out
    # A reference resolving to bytes that are no text: refused by name, the bytes nowhere in the error.
    natscontext.save("binary", url="nats://127.0.0.1:1", user="alice",
                     password="data:;base64," + base64.b64encode(b"pw-Bytes-3Kd\xff").decode())
    with pytest.raises(ContextError, match="password: a data: reference: does not resolve to UTF-8") as err:
        nats.connect(context="binary")
    assert err.value.__context__ is None


# ---------------------------------------------------------------- the command line


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_global_context_and_the_selected_one(capsys: pytest.CaptureFixture[str]) -> None:
    with NatsServer(jetstream=False, token="cli-tok") as server, \
            nats.connect(server.url, token="cli-tok") as watcher:
        sub = watcher.subscribe("cli.ctx")
        watcher.flush()
        assert run(capsys, "context", "save", "prod", "--server", server.url, "--token", "cli-tok")[0] == 0
        code, _, err = run(capsys, "--context", "prod", "pub", "cli.ctx", "one")
        assert code == 0, err
        assert sub.next_msg(timeout=5).data == b"one"
        # Neither --server nor --context: no context selected yet, so no server.
        with pytest.raises(SystemExit, match="no server given"):
            main(["pub", "cli.ctx", "two"])
        assert run(capsys, "context", "select", "prod")[0] == 0
        code, _, err = run(capsys, "pub", "cli.ctx", "two")
        assert code == 0, err
        assert sub.next_msg(timeout=5).data == b"two"
        code, _, err = run(capsys, "req", "cli.nobody", "x", "--timeout", "5")  # the connect's bound too
        assert code == 1 and "no responders" in err.lower()
        code, _, err = run(capsys, "--context", "nope", "pub", "cli.ctx", "three")
        assert code == 1 and "unknown context 'nope'" in err


def test_cli_ls_show_select_save_rm(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "context", "ls")
    assert code == 0 and "no contexts" in out
    code, out, _ = run(capsys, "context", "save", "a", "--server", "nats://127.0.0.1:4222", "--password", "hush",
                       "--user", "u", "--description", "first", "--select")
    assert code == 0 and out.splitlines()[-1] == "selected context a"
    assert run(capsys, "context", "save", "b", "--description", "second")[0] == 0
    code, out, _ = run(capsys, "context", "ls")
    assert out.splitlines() == ["a*  first", "b   second"]
    code, out, _ = run(capsys, "context", "show")
    assert "NATS context a (selected)" in out and "user: u" in out and "hush" not in out
    code, out, _ = run(capsys, "context", "show", "a", "--secrets")
    assert "password: hush" in out
    code, _, err = run(capsys, "context", "rm", "a")
    assert code == 1 and "selected" in err
    assert run(capsys, "context", "select", "b")[0] == 0
    assert run(capsys, "context", "rm", "a")[0] == 0
    assert natscontext.known_contexts() == ["b"]
    assert run(capsys, "context", "rm", "b")[0] == 0
    assert natscontext.known_contexts() == [] and natscontext.selected_context() is None
    code, _, err = run(capsys, "context", "select", "gone")
    assert code == 1 and "unknown context 'gone'" in err


# The file as the nats CLI (Go, natscontext's settings struct) writes it: every field, in this order,
# two-space indents; fields a newer nats CLI knows and we do not, too.
GO_WRITTEN = """{
  "description": "written by nats",
  "url": "%(url)s",
  "socks_proxy": "",
  "token": "",
  "user": "alice",
  "password": "pw-go",
  "creds": "",
  "nkey": "",
  "cert": "",
  "key": "",
  "ca": "",
  "nsc": "",
  "jetstream_domain": "",
  "jetstream_api_prefix": "",
  "jetstream_event_prefix": "",
  "inbox_prefix": "_GO",
  "user_jwt": "",
  "user_seed": "",
  "color_scheme": "",
  "tls_first": false,
  "windows_cert_store": "",
  "windows_cert_match_by": "",
  "windows_cert_match": "",
  "windows_ca_certs_match": null,
  "a_future_field": {"kept": [1, 2]}
}
"""


def test_cli_save_changes_one_field_and_keeps_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    context_file("go").parent.mkdir(parents=True)
    context_file("go").write_text(GO_WRITTEN % {"url": "nats://127.0.0.1:4222"})
    assert run(capsys, "context", "save", "go", "--description", "changed here")[0] == 0
    after = json.loads(context_file("go").read_text())
    before = json.loads(GO_WRITTEN % {"url": "nats://127.0.0.1:4222"})
    assert after == {**before, "description": "changed here"}
    assert list(after) == list(before)  # the nats CLI's field order, then the others
    assert oct(context_file("go").stat().st_mode & 0o777) == "0o600"


# ---------------------------------------------------------------- with another client: natsio (Python 3.13)

def natsio_python() -> str:
    return natsio_env.natsio_python("natsio.natscontext")


# natsio loads a context (by name, or the selected one when none is given), connects with it
# and sends one request; it prints the context's description and the reply.
NATSIO_REQUEST = textwrap.dedent("""
    import asyncio, sys
    import natsio.natscontext as natscontext

    async def main():
        name = sys.argv[1] or None
        ctx = natscontext.load(name)
        nc = await natscontext.connect(name)
        try:
            reply = await nc.request("interop.ctx", b"from natsio", timeout=10)
        finally:
            await nc.close()
        print(ctx.name, "|", ctx.description, "|", reply.data.decode())

    asyncio.run(main())
""")


def natsio_request(python: str, name: str, server: NatsServer) -> tuple[str, str]:
    """Run natsio's request through the context ``name``; returns (its output, the reply inbox seen)."""
    replies: list[str] = []
    got = threading.Event()

    def answer(msg: Msg) -> None:
        replies.append(msg.reply or "")
        msg.respond(b"answered by natsjs_sync")
        got.set()

    with nats.connect(server.url, user="alice", password="pw-go") as responder:
        responder.subscribe("interop.ctx", cb=answer)
        responder.flush()
        proc = subprocess.run([python, "-c", NATSIO_REQUEST, name], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert got.is_set()
    return proc.stdout.strip(), replies[0]


def test_a_context_saved_by_our_cli_is_used_by_natsio(capsys: pytest.CaptureFixture[str]) -> None:
    python = natsio_python()
    with NatsServer(jetstream=False, user="alice", password="pw-go") as server:
        assert run(capsys, "context", "save", "ours", "--server", server.url, "--user", "alice",
                   "--password", "pw-go", "--inbox-prefix", "_OURS", "--description", "saved by natsjs-sync",
                   "--select")[0] == 0
        out, inbox = natsio_request(python, "", server)  # natsio finds it through our context.txt
    assert out == "ours | saved by natsjs-sync | answered by natsjs_sync"
    assert inbox.startswith("_OURS.")


def test_a_nats_cli_file_is_used_by_natsio_and_by_us_and_survives_our_save(
        capsys: pytest.CaptureFixture[str]) -> None:
    python = natsio_python()
    with NatsServer(jetstream=False, user="alice", password="pw-go") as server:
        context_file("go").parent.mkdir(parents=True)
        context_file("go").write_text(GO_WRITTEN % {"url": server.url})
        out, inbox = natsio_request(python, "go", server)
        assert out == "go | written by nats | answered by natsjs_sync" and inbox.startswith("_GO.")
        with nats.connect(context="go") as nc, nats.connect(server.url, user="alice", password="pw-go") as other:
            round_trip(nc)
            assert inbox_seen(nc, other).startswith("_GO.")
        assert run(capsys, "context", "save", "go", "--description", "saved again by natsjs-sync")[0] == 0
        out, inbox = natsio_request(python, "go", server)
        assert out == "go | saved again by natsjs-sync | answered by natsjs_sync" and inbox.startswith("_GO.")


# ---------------------------------------------------------------- the nats CLI's fields and secret references


def test_our_save_writes_the_nats_cli_fields_in_its_order(capsys: pytest.CaptureFixture[str]) -> None:
    """Every field of jsm.go's settings struct (natscontext/context.go), in its order, whatever the
    flags given; natscli's ``context save`` flags (cli/context_command.go, nats/main.go) each set theirs."""
    code, _, err = run(capsys, "context", "save", "all", "--server", "nats://a:4222", "--description", "d",
                       "--socks-proxy", "socks5://p:1080", "--js-event-prefix", "$JS.EV", "--colors", "cyan",
                       "--inbox-prefix", "_I", "--js-domain", "hub", "--js-api-prefix", "$JS.X.API", "--tlsfirst")
    assert code == 0, err
    saved = json.loads(context_file("all").read_text())
    assert tuple(saved) == NATS_CLI_FIELDS
    assert saved["windows_ca_certs_match"] is None and saved["tls_first"] is True
    assert (saved["socks_proxy"], saved["jetstream_event_prefix"], saved["color_scheme"]) == (
        "socks5://p:1080", "$JS.EV", "cyan")


@pytest.fixture
def password_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, user="alice", password="pw-from-a-reference") as server:
        yield server


def data_uri(text: str) -> str:
    return "data:;base64," + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("kind", ["env", "file", "data", "op"])
def test_a_password_reference_is_resolved(kind: str, password_server: NatsServer, config_home: pathlib.Path,
                                          monkeypatch: pytest.MonkeyPatch, tool_bin: pathlib.Path) -> None:
    """jsm.go's natscontext/context.go (NATSOptions: resolveLiteral on password) and its resolvers
    (resolver_env.go, resolver_file.go, resolver_data.go, resolver_op.go): the password is the
    variable, the file's content less its line end, the decoded payload, ``op read``'s output. It
    was sent as written (``env://NATS_CTX_PW`` as the password)."""
    secret = "pw-from-a-reference"
    monkeypatch.setenv("NATS_CTX_PW", secret)
    (config_home / "pw.txt").write_text(secret + "\n")
    fake_tool(tool_bin, "op", OP_READ)
    reference = {"env": "env://NATS_CTX_PW", "file": "file://~/pw.txt", "data": data_uri(secret),
                 "op": "op://Private/nats/password"}[kind]
    write_as_the_nats_cli("ref", url=password_server.url, user="alice", password=reference)
    with nats.connect(context="ref") as nc:
        round_trip(nc)
    if kind == "op":
        assert tool_calls(tool_bin, "op") == [["read", "op://Private/nats/password"]]


def test_token_creds_and_nkey_references_are_resolved(operator_server: tuple[Operator, NatsServer],
                                                      config_home: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """jsm.go's natscontext/context.go: ``creds`` and ``nkey`` are paths (or ``file://``) read by
    the client, or any other reference resolved to the creds text or the seed (buildCredsOption,
    buildNkeyOption); ``token`` is resolved as the password is."""
    op, server = operator_server
    creds = op.user_creds("APP")
    monkeypatch.setenv("NATS_CTX_CREDS", creds)
    (config_home / "app.creds").write_text(creds)
    for name, ref in (("env", "env://NATS_CTX_CREDS"), ("data", data_uri(creds)), ("file", "file://~/app.creds")):
        write_as_the_nats_cli(name, url=server.url, creds=ref)
        with nats.connect(context=name) as nc:
            round_trip(nc)
    user = KeyPair.generate()
    monkeypatch.setenv("NATS_CTX_SEED", user.seed)
    monkeypatch.setenv("NATS_CTX_TOKEN", "tok-from-env")
    with NatsServer(jetstream=False, nkeys=[user.public_key]) as nkey_server:
        write_as_the_nats_cli("nk", url=nkey_server.url, nkey="env://NATS_CTX_SEED")
        with nats.connect(context="nk") as nc:
            round_trip(nc)
    with NatsServer(jetstream=False, token="tok-from-env") as token_server:
        write_as_the_nats_cli("tok", url=token_server.url, token="env://NATS_CTX_TOKEN")
        with nats.connect(context="tok") as nc:
            round_trip(nc)


def test_embedded_credentials_work_where_the_files_are_not(operator_server: tuple[Operator, NatsServer],
                                                           config_home: pathlib.Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``nats context save --embed`` (natscli cli/context_command.go; jsm.go resolver_data.go,
    embedFileCredentials) stores the creds file's content as a ``data:`` reference."""
    op, server = operator_server
    (config_home / "app.creds").write_text(op.user_creds("APP"))
    code, _, err = run(capsys, "context", "save", "emb", "--server", server.url, "--creds", "~/app.creds", "--embed")
    assert code == 0, err
    (config_home / "app.creds").unlink()
    assert json.loads(context_file("emb").read_text())["creds"].startswith("data:;base64,")
    with nats.connect(context="emb") as nc:
        round_trip(nc)


def test_nsc_references_run_nsc_as_the_nats_cli_does(operator_server: tuple[Operator, NatsServer],
                                                     config_home: pathlib.Path, tool_bin: pathlib.Path) -> None:
    """jsm.go's natscontext/resolver_nsc.go: an ``nsc://operator/account/user`` reference runs
    ``nsc generate profile`` and reads the creds file its JSON names; the legacy ``nsc`` field
    gives the servers (``operator.service``) as well (context.go: expand, ServerURL, Creds)."""
    op, server = operator_server
    (config_home / "app.creds").write_text(op.user_creds("APP"))
    profile = {"user_creds": str(config_home / "app.creds"), "operator": {"service": [server.url]}}
    fake_tool(tool_bin, "nsc", NSC_PROFILE % json.dumps(profile))
    write_as_the_nats_cli("creds-ref", url=server.url, creds="nsc://Test/APP/user")
    with nats.connect(context="creds-ref") as nc:
        round_trip(nc)
    write_as_the_nats_cli("legacy", nsc="nsc://Test/APP/user")
    with nats.connect(context="legacy") as nc:
        round_trip(nc)
    assert tool_calls(tool_bin, "nsc") == [["generate", "profile", "nsc://Test/APP/user"]] * 2


def test_a_legacy_nsc_lookup_is_saved_as_the_nats_cli_saves_it(operator_server: tuple[Operator, NatsServer],
                                                               config_home: pathlib.Path, tool_bin: pathlib.Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """jsm.go's Registry.Save (migrateNSCLookup): the legacy ``nsc`` field becomes ``creds:
    nsc://...``, with the servers nsc names as the ``url`` when none is set; creds given win over
    it (saving them beside a legacy lookup was refused as two kinds of credentials)."""
    op, server = operator_server
    (config_home / "app.creds").write_text(op.user_creds("APP"))
    profile = {"user_creds": str(config_home / "app.creds"), "operator": {"service": [server.url]}}
    fake_tool(tool_bin, "nsc", NSC_PROFILE % json.dumps(profile))
    write_as_the_nats_cli("legacy", nsc="nsc://Test/APP/user")
    code, _, err = run(capsys, "context", "save", "legacy", "--description", "migrated")
    assert code == 0, err
    saved = json.loads(context_file("legacy").read_text())
    assert (saved["nsc"], saved["creds"], saved["url"]) == ("", "nsc://Test/APP/user", server.url)
    with nats.connect(context="legacy") as nc:
        round_trip(nc)
    calls = len(tool_calls(tool_bin, "nsc"))
    write_as_the_nats_cli("override", nsc="nsc://Test/APP/user")
    code, _, err = run(capsys, "context", "save", "override", "--server", server.url, "--creds", "~/app.creds")
    assert code == 0, err
    saved = json.loads(context_file("override").read_text())
    assert (saved["nsc"], saved["creds"]) == ("", "~/app.creds")
    assert len(tool_calls(tool_bin, "nsc")) == calls  # creds given: nsc is not needed, nor run


@pytest.mark.parametrize(("fields", "field", "why"), [
    ({"user": "alice", "password": "env://NATS_CTX_UNSET"}, "password",
     "env://NATS_CTX_UNSET: the environment variable NATS_CTX_UNSET is not set"),
    ({"token": "file:///nonexistent/token"}, "token", "file:///nonexistent/token: cannot read"),
    ({"user": "alice", "password": "op://Private/nats/password"}, "password",
     "needs the 'op' command, which is not on PATH"),
    ({"creds": "nsc://Test/APP/user"}, "creds", "needs the 'nsc' command, which is not on PATH"),
    ({"nsc": "nsc://Test/APP/user"}, "nsc", "needs the 'nsc' command, which is not on PATH"),
    ({"creds": "vault://kv/nats"}, "creds", "no resolver for vault: references"),
    ({"nkey": "vault://kv/nats"}, "nkey", "no resolver for vault: references"),
    ({"ca": "env://NATS_CA"}, "ca", "env: references are not supported here"),
    ({"user_jwt": "eyJhbGciOiJub25lIn0.e30.", "user_seed": "data:;base64,!!"}, "user_seed", "not base64"),
])
def test_a_reference_that_cannot_be_resolved_is_refused_by_name(
        fields: dict[str, str], field: str, why: str, listener: tuple[str, socket.socket],
        tool_bin: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before any connection (nothing sent), naming the context, the field and the reference;
    ``op`` and ``nsc`` are looked for on PATH, as the nats CLI does (here: neither is there)."""
    url, sock = listener
    monkeypatch.delenv("NATS_CTX_UNSET", raising=False)
    monkeypatch.setenv("PATH", str(tool_bin))  # an empty folder: no op, no nsc
    write_as_the_nats_cli("unresolved", url=url, **fields)
    with pytest.raises(ContextError) as err:
        nats.connect(context="unresolved")
    assert "'unresolved'" in str(err.value) and f"{field}: " in str(err.value) and why in str(err.value)
    assert_never_dialled(sock)


# Stand-ins for programs not installed here, run exactly as the nats CLI runs them: the 1Password
# CLI ('op read REF' prints the field's value and a line end) and nsc ('nsc generate profile REF'
# prints a JSON profile). Each records its arguments, one JSON line per call.
OP_READ = """
if sys.argv[1:] == ["read", "op://Private/nats/password"]:
    print("pw-from-a-reference")
else:
    sys.exit("[ERROR] could not read secret: no such item")
"""
NSC_PROFILE = """
print(%r)
"""


@pytest.fixture
def tool_bin(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A folder first on PATH, for :func:`fake_tool`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


def fake_tool(folder: pathlib.Path, name: str, body: str) -> None:
    """An executable ``name`` in ``folder`` (first on PATH) running ``body`` after recording its arguments."""
    script = folder / name
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"with open({str(folder / (name + '.calls'))!r}, 'a') as log:\n"
                      "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n" + textwrap.dedent(body))
    script.chmod(0o755)


def tool_calls(folder: pathlib.Path, name: str) -> list[list[str]]:
    calls = folder / (name + ".calls")
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


# ---------------------------------------------------------------- saved as the nats CLI reads and writes them


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_a_data_reference_wrapped_over_lines_is_read(line_end: str, operator_server: tuple[Operator, NatsServer]
                                                     ) -> None:
    """`base64 user.creds` wraps its output at 76 columns: Go's StdEncoding (jsm.go resolver_data.go)
    skips the line ends, and so do we (it was refused as 'not base64', quoting the payload)."""
    op, server = operator_server
    encoded = base64.b64encode(op.user_creds("APP").encode()).decode()
    wrapped = line_end.join(textwrap.wrap(encoded, 76))
    write_as_the_nats_cli("wrapped", url=server.url, creds="data:;base64," + wrapped)
    with nats.connect(context="wrapped") as nc:
        round_trip(nc)


def test_a_failed_embed_saves_nothing(config_home: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """natscli's ``context save --embed`` embeds (reads every file) before it saves (jsm.go's
    SaveEmbedded: Embed, then Save): a file that cannot be read leaves the context as it was."""
    assert run(capsys, "context", "save", "kept", "--server", "nats://n1:4222", "--description", "before")[0] == 0
    before = context_file("kept").read_bytes()
    code, _, err = run(capsys, "context", "save", "kept", "--creds", str(config_home / "missing.creds"),
                       "--description", "after", "--embed")
    assert code == 1 and "creds" in err and "missing.creds" in err
    assert context_file("kept").read_bytes() == before
    code, _, err = run(capsys, "context", "save", "new", "--nkey", str(config_home / "missing.nk"), "--embed")
    assert code == 1 and "nkey" in err
    assert not context_file("new").exists() and natscontext.known_contexts() == ["kept"]


def test_an_inline_nkey_seed_is_saved_as_the_nats_cli_reads_it(capsys: pytest.CaptureFixture[str]) -> None:
    """jsm.go reads a bare ``nkey`` as the path of a seed file (buildNkeyOption); an inline seed is
    saved as the ``data:`` reference its data resolver reads (EncodeDataURI), and ``embedded()``
    turns one into it too. It was written bare: the nats CLI looked for a file named like the seed."""
    user = KeyPair.generate()
    as_data = "data:;base64," + base64.b64encode(user.seed.encode()).decode()
    with NatsServer(jetstream=False, nkeys=[user.public_key]) as server:
        code, _, err = run(capsys, "context", "save", "inline", "--server", server.url, "--nkey", user.seed)
        assert code == 0, err
        assert json.loads(context_file("inline").read_text())["nkey"] == as_data
        with nats.connect(context="inline") as nc:
            round_trip(nc)
        code, out, _ = run(capsys, "context", "show", "inline")
        assert user.seed not in out and "nkey: ***" in out
    unsaved = natscontext.NatsContext("unsaved", None, {"nkey": user.seed})
    assert unsaved.embedded().settings["nkey"] == as_data
    assert json.loads(unsaved.to_json())["nkey"] == as_data


def test_a_user_without_a_password_is_saved_as_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    """natscli's ``context save --user X`` without ``--password`` saves X as the token
    (cli/context_command.go, createCommand); it was saved as the user and shown unmasked."""
    with NatsServer(jetstream=False, token="tok-as-user-3Jd") as server:
        code, _, err = run(capsys, "context", "save", "tok", "--server", server.url, "--user", "tok-as-user-3Jd")
        assert code == 0, err
        saved = json.loads(context_file("tok").read_text())
        assert (saved["token"], saved["user"]) == ("tok-as-user-3Jd", "")
        with nats.connect(context="tok") as nc:
            round_trip(nc)
        code, out, _ = run(capsys, "context", "show", "tok")
        assert "tok-as-user-3Jd" not in out and "token: ***" in out
    # With a password (given now, or saved before), --user is the user's name.
    assert run(capsys, "context", "save", "up", "--user", "alice", "--password", "pw-1")[0] == 0
    assert run(capsys, "context", "save", "up", "--user", "bob")[0] == 0
    saved = json.loads(context_file("up").read_text())
    assert (saved["user"], saved["password"], saved["token"]) == ("bob", "pw-1", "")


def test_a_context_loaded_from_its_path_is_saved_back_there(tmp_path: pathlib.Path) -> None:
    """jsm.go's Context.Save writes a context loaded from a file (NewFromFile) back to that file;
    it went to the context folder instead, leaving the file as it was."""
    path = tmp_path / "team" / "shared.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"url": "nats://n1:4222", "description": "shared", "x_other_tool": 1}))
    saved = natscontext.load(str(path)).with_settings(description="changed").save()
    assert saved.path == path
    assert json.loads(path.read_text())["description"] == "changed"
    assert json.loads(path.read_text())["x_other_tool"] == 1
    assert natscontext.known_contexts() == []
    # A rename is a new context in the context folder, as in jsm.go.
    renamed = natscontext.NatsContext("copy", saved.path, saved.settings).save()
    assert renamed.path == context_file("copy")


def test_the_config_folders_are_made_owner_only(config_home: pathlib.Path) -> None:
    """jsm.go makes the folders with MkdirAll(..., 0700): the nats/ folder too, which was made
    with the umask's mode (0755)."""
    old = os.umask(0o022)
    try:
        natscontext.save("private", url="nats://n1:4222")
    finally:
        os.umask(old)
    for folder in (config_home / ".config", natscontext.config_dir(), natscontext.context_dir()):
        assert oct(folder.stat().st_mode & 0o777) == "0o700", folder


def test_ls_skips_files_that_are_no_context(capsys: pytest.CaptureFixture[str]) -> None:
    """As jsm.go's FileBackend.List: empty files, other suffixes and names that fail the name rule
    ('..', a backslash) are skipped; they cannot be loaded or selected. They were listed as unreadable."""
    natscontext.save("good", url="nats://n1:4222", description="a context")
    for name in ("a..b.json", "back\\slash.json", "empty.json", "notes.txt"):
        (natscontext.context_dir() / name).write_text("" if name == "empty.json" else '{"url": "nats://h"}')
    assert natscontext.known_contexts() == ["good"]
    code, out, _ = run(capsys, "context", "ls")
    assert code == 0 and out.splitlines() == ["good   a context"]


def test_select_keeps_the_previous_one_and_previous_goes_back(capsys: pytest.CaptureFixture[str]) -> None:
    """jsm.go's FileSelector writes the context selected until now to previous-context.txt;
    natscli's ``context previous`` (alias ``-``) selects it again."""
    for name in ("one", "two"):
        natscontext.save(name, url="nats://n1:4222")
    code, out, _ = run(capsys, "context", "previous")
    assert code == 0 and "no previous context" in out and natscontext.selected_context() is None
    natscontext.select("one")
    assert natscontext.previous_context() is None
    natscontext.select("two")
    assert (natscontext.config_dir() / "previous-context.txt").read_text() == "one"
    assert natscontext.previous_context() == "one"
    assert run(capsys, "context", "previous") == (0, "selected context one\n", "")
    assert (natscontext.selected_context(), natscontext.previous_context()) == ("one", "two")
    assert run(capsys, "context", "-") == (0, "selected context two\n", "")
    assert (natscontext.selected_context(), natscontext.previous_context()) == ("two", "one")
    assert oct((natscontext.config_dir() / "previous-context.txt").stat().st_mode & 0o777) == "0o600"
