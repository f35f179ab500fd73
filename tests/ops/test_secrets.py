"""Secrets stay secret: no password, token, seed, JWT or creds content in what the command line
prints, in an error message (its str and its repr), in a log record or in the repr of options.

Each test plants known secret values and greps everything shown for them. The command line runs
for real against a server that wants those secrets: every subcommand, on its success path and on
its error paths (a refused password, a mistyped URL, no server).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import pathlib
from collections.abc import Iterator, Sequence

import pytest

import natsjs_sync as nats
from natsjs_sync import natscontext
from natsjs_sync.auth import parse_creds
from natsjs_sync.cli import build_parser, main
from natsjs_sync.contrib.process import SettingsError, parse_settings
from natsjs_sync.errors import InvalidServerUrlError
from natsjs_sync.micro import add_service
from natsjs_sync.natscontext import ContextError
from natsjs_sync.nkeys import KeyPair
from natsjs_sync.testing import NatsServer
from natsjs_sync.testing.jwt import Operator

pytestmark = pytest.mark.usefixtures("config_home")

#: The passwords of the server's two users: what must never be shown.
APP_PW = "pw-App-7Kq2ZxW"
SYS_PW = "pw-Sys-4Jm8RtV"
SERVER_NAME = "secrets-n1"


def assert_secret_free(text: str, secrets: Sequence[str], where: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{where} shows a secret: {text!r}"


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    """A server with a system account and a JetStream account, each user with a password."""
    config = {
        "accounts": {
            "SYS": {"users": [{"user": "sys", "password": SYS_PW}]},
            "APP": {"jetstream": "enabled", "users": [{"user": "app", "password": APP_PW}]},
        },
        "system_account": "SYS",
    }
    with NatsServer(jetstream=True, server_name=SERVER_NAME, config=config) as srv:
        yield srv


def url_with(server: NatsServer, password: str, scheme: str = "nats") -> str:
    return f"{scheme}://app:{password}@127.0.0.1:{server.port}"


# What every subcommand is run with, in this order (a stream is made before it is read ...).
# "{url}" is the server's URL with the password in it, "{plain}" without credentials, "{file}" and
# "{out}" paths of the test.
SYS = ("--server", "{plain}", "--user", "sys", "--password", SYS_PW)  # a URL's user would win
SUCCESS: tuple[tuple[str, ...], ...] = (
    ("demo", "--server", "{url}", "--count", "1"),
    ("pub", "t.secrets", "hello"),
    ("sub", "t.secrets", "--timeout", "0.2"),
    ("req", "svc.echo", "hi", "--timeout", "5"),
    ("reply", "t.reply", "--timeout", "0.2"),
    ("stream", "add", "S", "--subjects", "s.>", "--storage", "memory"),
    ("stream", "ls"),
    ("stream", "info", "S"),
    ("pub", "s.one", "message"),
    ("stream", "get", "S", "1"),
    ("consumer", "add", "S", "C"),
    ("consumer", "ls", "S"),
    ("consumer", "info", "S", "C"),
    ("consumer", "next", "S", "C", "--count", "1", "--timeout", "5"),
    ("server", "ls", *SYS),
    ("server", "info", SERVER_NAME, *SYS),
    ("server", "check", "connection", "--connect-critical", "20s", "--rtt-critical", "20s", "--req-critical", "20s"),
    ("server", "check", "jetstream"),
    ("server", "check", "server", "--name", SERVER_NAME, *SYS),
    ("server", "check", "meta", *SYS),
    ("server", "check", "stream", "--stream", "S"),
    ("server", "check", "consumer", "--stream", "S", "--consumer", "C"),
    ("group", "ls", "S"),
    ("group", "info", "S", "G"),
    ("group", "add", "S", "G", "m1"),
    ("group", "drop", "S", "G", "m1"),
    ("stream", "purge", "S"),
    ("consumer", "rm", "S", "C"),
    ("stream", "rm", "S"),
    ("kv", "add", "B", "--storage", "memory"),
    ("kv", "put", "B", "k", "v"),
    ("kv", "get", "B", "k"),
    ("kv", "ls", "B"),
    ("kv", "history", "B", "k"),
    ("kv", "watch", "B", "k", "--count", "1", "--timeout", "5"),
    ("kv", "del", "B", "k"),
    ("obj", "add", "O", "--storage", "memory"),
    ("obj", "put", "O", "{file}", "--name", "doc"),
    ("obj", "ls", "O"),
    ("obj", "info", "O", "doc"),
    ("obj", "get", "O", "doc", "-o", "{out}"),
    ("obj", "rm", "O", "doc"),
    ("bench", "pub", "--msgs", "10", "--sync-msgs", "10", "--server", "{url}"),
    ("service", "ls", "--timeout", "5", "--stall", "1"),
    ("service", "info", "svc", "--timeout", "5", "--stall", "1"),
    ("service", "stats", "svc", "--timeout", "5", "--stall", "1"),
    ("service", "ping", "svc", "--timeout", "5", "--stall", "1"),
    ("context", "ls"),
    ("context", "show"),
    ("context", "show", "leaky"),
    ("context", "save", "other", "--server", "{url}", "--user", "app", "--password", APP_PW, "--token", APP_PW),
    ("context", "select", "other"),
    ("context", "select", "leaky"),
    ("context", "rm", "other"),
)
#: Checks exit with their Nagios code (a single server's meta group is not a healthy cluster).
ANY_CODE = {("server", "check", "meta")}
#: No group "G" exists: these take their error path (its output is swept too).
ANY_CODE |= {("group", "info"), ("group", "add"), ("group", "drop")}
#: Not run: ``server`` alone runs an embedded nats-server until Ctrl-C; it takes no credentials
#: and connects to nothing.
NOT_RUN = {("server",)}


def leaf_commands() -> set[tuple[str, ...]]:
    """Every command of the parser, as the words that name it."""
    found: set[tuple[str, ...]] = set()

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        if words and parser.get_default("func") is not None:
            found.add(words)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, (*words, name))

    walk(build_parser(), ())
    return found


def command_of(argv: Sequence[str]) -> tuple[str, ...]:
    leaves = leaf_commands()
    return max((tuple(argv[:n]) for n in range(1, 4) if tuple(argv[:n]) in leaves), key=len)


def test_the_sweep_runs_every_command() -> None:
    assert {command_of(argv) for argv in SUCCESS} | NOT_RUN == leaf_commands()


def run(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        argv: Sequence[str]) -> tuple[int, str]:
    """Run the command line; returns its exit code and all it showed (stdout, stderr, log records)."""
    caplog.clear()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # a usage error or a refusal before connecting
        code = exc.code if isinstance(exc.code, int) else 2
        shown = str(exc.code)
    else:
        shown = ""
    out, err = capsys.readouterr()
    records = "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records)
    return code, "\n".join((shown, out, err, records))


@pytest.fixture
def service(server: NatsServer) -> Iterator[None]:
    """A service ``svc`` answering ``svc.echo``, in the account the commands use."""
    with nats.connect(server.url, user="app", password=APP_PW) as nc:
        svc = add_service(nc, name="svc", version="1.0.0")
        svc.add_endpoint("echo", lambda req: req.respond(req.data), subject="svc.echo")
        nc.flush()
        yield
        svc.stop()


def test_every_command_shows_no_secret(server: NatsServer, service: None, tmp_path: pathlib.Path,
                                       capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """On success: the commands connect with a context holding the password twice (in its URL
    and in its password field), or with --server URLs and --password options holding it."""
    caplog.set_level(logging.DEBUG, logger="natsjs_sync")
    url = url_with(server, APP_PW)
    natscontext.save("leaky", url=url, user="app", password=APP_PW, description="password in the URL and field")
    natscontext.select("leaky")
    (tmp_path / "doc.txt").write_text("a document")
    values = {"{url}": url, "{plain}": server.url, "{file}": str(tmp_path / "doc.txt"),
              "{out}": str(tmp_path / "doc.out")}
    for argv in SUCCESS:
        argv = tuple(values.get(word, word) for word in argv)
        code, shown = run(capsys, caplog, ("--context", "leaky", *argv))
        assert code == 0 or command_of(argv) in ANY_CODE, (argv, code, shown)
        assert_secret_free(shown, (APP_PW, SYS_PW), " ".join(argv))


@pytest.mark.parametrize("how", ["refused", "mistyped", "unreachable"])
def test_every_command_shows_no_secret_when_it_fails(how: str, server: NatsServer, tmp_path: pathlib.Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """On failure: the server refuses the password, the URL is mistyped, or no server answers."""
    caplog.set_level(logging.DEBUG, logger="natsjs_sync")
    wrong = "pw-Wrong-9Hd3QsY"
    url = {"refused": url_with(server, wrong), "mistyped": url_with(server, wrong, scheme="nast"),
           "unreachable": f"nats://app:{wrong}@127.0.0.1:1"}[how]
    natscontext.save("broken", url=url, user="app", password=wrong)
    values = {"{url}": url, "{plain}": url, "{file}": str(tmp_path / "doc.txt"), "{out}": str(tmp_path / "doc.out")}
    for argv in SUCCESS:
        if argv[0] == "context":
            argv = ("context", "show", "broken") if argv[1] == "show" else argv
        argv = tuple(values.get(word, word) for word in argv)
        code, shown = run(capsys, caplog, ("--context", "broken", *argv))
        assert code != 0 or argv[0] == "context", (argv, shown)  # every connecting command failed
        assert_secret_free(shown, (wrong, SYS_PW), " ".join(argv))


def test_context_show_masks_every_secret_and_secrets_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    op = Operator()
    op.add_account("APP")
    jwt, seed = parse_creds(op.user_creds("APP"))
    creds = op.user_creds("APP")
    secrets = {
        "url": "nats://alice:pw-InUrl-3Xy@n1:4222,nats://tok-InUrl-8Zq@n2:4222",
        "password": "pw-Field-5Rt", "token": "tok-Field-2Wc", "user_jwt": jwt, "user_seed": seed,
        "nkey": KeyPair.generate().seed,
        "creds": "data:;base64," + base64.b64encode(creds.encode()).decode(),
    }
    # Every kind at once: only a hand-edited file holds them all (a save keeps one kind of credentials).
    path = natscontext.context_path("all")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"user": "alice", **secrets, "unknown_extra": f"nats://bob:pw-Extra-6Nn@n3 {seed}"}))
    code, out, err = run_plain(capsys, "context", "show", "all")
    assert code == 0, err
    hidden = ["pw-InUrl-3Xy", "tok-InUrl-8Zq", "pw-Field-5Rt", "tok-Field-2Wc", jwt, seed, secrets["nkey"],
              secrets["creds"][20:], "pw-Extra-6Nn"]
    assert_secret_free(out + err, hidden, "context show")
    assert "user: alice" in out and "nats://alice:***@n1:4222" in out  # what it is about stays visible
    code, out, _ = run_plain(capsys, "context", "show", "all", "--secrets")
    assert all(value in out for value in secrets.values())
    # References say where a secret is, not what it is: shown.
    natscontext.save("refs", user="alice", password="env://NATS_PW", token="op://Private/nats/token")
    code, out, _ = run_plain(capsys, "context", "show", "refs")
    assert "password: env://NATS_PW" in out and "token: op://Private/nats/token" in out


def run_plain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- errors for bad settings, URLs and contexts

SECRET = "pw-Known-1Bv7"
SEED = KeyPair.generate().seed


def assert_error_secret_free(exc: BaseException, *secrets: str) -> None:
    for text in (str(exc), repr(exc), *(str(p) for p in getattr(exc, "problems", ()))):
        assert_secret_free(text, secrets or (SECRET,), type(exc).__name__)


@pytest.mark.parametrize("url", [
    f"nast://alice:{SECRET}@localhost:4222",        # a mistyped scheme
    f"nats://alice:{SECRET}@localhost:42x22",       # a mistyped port
    f"nats://alice:{SECRET}@[::1:4222",             # a broken IPv6 host
    f"nats://{SECRET}@localhost:99999",             # a token in place of the user
    f"alice:{SECRET}@localhost:4x",                 # no scheme
])
def test_a_bad_server_url_is_an_error_without_its_password(url: str) -> None:
    with pytest.raises(InvalidServerUrlError) as err:
        nats.connect(url)
    assert_error_secret_free(err.value)
    with pytest.raises(SettingsError) as settings_err:
        parse_settings({"servers": ["nast://" + url.split("://")[-1]], "options": {"password": SECRET}})
    assert_error_secret_free(settings_err.value)


def test_settings_errors_quote_no_password_token_or_seed() -> None:
    """Every problem reported names the setting; the secret values set beside it stay masked, even
    where a problem quotes a value."""
    raw = {"servers": f"nats://u:{SECRET}@h:4222,nast://u:{SECRET}@h2", "health": SECRET,
           "options": {"password": SECRET, "token": SECRET, "nkeys_seed": SEED, "pasword": 1}}
    with pytest.raises(SettingsError) as err:
        parse_settings(raw)
    assert len(err.value.problems) == 3
    assert_error_secret_free(err.value, SECRET, SEED)


def test_flask_settings_errors_quote_no_secret() -> None:
    flask = pytest.importorskip("flask")
    from natsjs_sync.contrib.flask import NATS

    app = flask.Flask("secrets")
    app.config.update(NATS_SERVERS=f"nast://alice:{SECRET}@h:4222", NATS_OPTIONS={"token": SECRET, "tokn": 1})
    with pytest.raises(SettingsError) as err:
        NATS(app)
    assert len(err.value.problems) == 2
    assert_error_secret_free(err.value)


def test_unreachable_servers_are_named_without_their_passwords() -> None:
    with pytest.raises(nats.NoServersError) as err:
        nats.connect(f"nats://alice:{SECRET}@127.0.0.1:1", connect_timeout=2)
    assert_error_secret_free(err.value)
    assert "127.0.0.1:1" in str(err.value)


def test_context_errors_quote_no_secret(tmp_path: pathlib.Path) -> None:
    """A seed where a path is expected, a seed of the wrong kind, creds content in the creds
    field, an unresolvable reference: the message names the field, never the value."""
    account_seed = _account_seed()
    cases = {
        "nkey-account-seed": {"nkey": account_seed},
        "nkey-garbled": {"nkey": SEED[:-2] + "AA"},
        "creds-inline": {"creds": f"-----BEGIN NATS USER JWT-----\neyJ{SECRET}\n------END------\n{SEED}"},
        "seed-bad": {"user_jwt": f"eyJ{SECRET}.e30.x", "user_seed": SECRET},
        "url-typo": {"url": f"nast://alice:{SECRET}@h", "password": SECRET, "user": "alice"},
    }
    for name, fields in cases.items():
        natscontext.save(name, **{"url": "nats://127.0.0.1:1", **fields})
        with pytest.raises((ContextError, InvalidServerUrlError, nats.NoServersError)) as err:
            nats.connect(context=name, allow_reconnect=False)
        assert_error_secret_free(err.value, SECRET, SEED, account_seed)
        assert repr(natscontext.load(name)).count(SECRET) == 0


def _account_seed() -> str:
    from natsjs_sync.nkeys import PREFIX_BYTE_ACCOUNT

    return KeyPair.generate(PREFIX_BYTE_ACCOUNT).seed


def test_options_and_credentials_repr_show_no_secret() -> None:
    from natsjs_sync._core.options import ConnectOptions

    options = ConnectOptions.build(f"nats://alice:{SECRET}@h:4222", password=SECRET, token=None,
                                   nkeys_seed=SEED, ws_headers={"Authorization": f"Bearer {SECRET}"})
    assert_secret_free(repr(options), (SECRET, SEED), "ConnectOptions")
    creds = _creds_text()  # given as the file's content, not a path
    with_creds = ConnectOptions.build("nats://h", user_credentials=creds)
    assert_secret_free(repr(with_creds), parse_creds(creds), "ConnectOptions")


def _creds_text() -> str:
    op = Operator()
    op.add_account("APP")
    return op.user_creds("APP")


def test_a_context_connection_logs_no_secret(server: NatsServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="natsjs_sync")
    natscontext.save("logged", url=url_with(server, APP_PW), user="app", password=APP_PW)
    with nats.connect(context="logged", name="logged") as nc:
        nc.publish("t.logged", b"x")
        nc.flush()
        assert_secret_free(repr(nc), (APP_PW,), "Client")
    records = "\n".join(f"{r.getMessage()} {json.dumps(r.__dict__, default=repr)}" for r in caplog.records)
    assert caplog.records and APP_PW not in records


def test_masking_keeps_what_a_message_is_about() -> None:
    """User names, hosts, ports, paths and public nkeys stay; masking twice changes nothing."""
    from natsjs_sync._redact import redact

    public = KeyPair.generate().public_key
    text = (f"nats://alice:{SECRET}@n1:4222,tls://{SECRET}@n2 wss://n3/path alice:{SECRET}@n4:4222 "
            f"/home/me/app.creds {public} {SEED}")
    masked = redact(text)
    assert masked == (f"nats://alice:***@n1:4222,tls://***@n2 wss://n3/path alice:***@n4:4222 "
                      f"/home/me/app.creds {public} ***")
    assert redact(masked) == masked
