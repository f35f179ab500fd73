"""The one validator of the web integrations' settings (contrib.settings): it refuses what connect()
and check_health() would refuse, and nothing else; it checks what the app will really use (NATS_URL
too); its messages name the setting and never hide what is not a secret."""

from __future__ import annotations

import pathlib
import ssl
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

import natsjs_sync as nats
from natsjs_sync.contrib.flask import NATS
from natsjs_sync.contrib.process import ProcessClient, SettingsError, parse_settings
from natsjs_sync.contrib.settings import check_connect_options
from natsjs_sync.nkeys import KeyPair
from natsjs_sync.testing import NatsServer, free_port
from natsjs_sync.testing.jwt import Operator


async def _async_cb(*args: Any) -> None:
    pass


def _cb(*args: Any) -> None:
    pass


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """A valid creds file and seed file, and paths where none is."""
    root = tmp_path_factory.mktemp("credentials")
    op = Operator()
    op.add_account("APP")
    (root / "app.creds").write_text(op.user_creds("APP"))
    (root / "user.nk").write_text(KeyPair.generate().seed)
    return {"creds": root / "app.creds", "seed": root / "user.nk", "missing": root / "missing.creds"}


class _Made:
    """A value made for each run: from the test's files, or used up once read (a generator)."""

    def __init__(self, make: Callable[[dict[str, pathlib.Path]], Any], label: str):
        self.make, self.label = make, label

    def __repr__(self) -> str:
        return self.label


#: (keyword, value) pairs; "{port}" in a URL is a port nobody listens on.
CASES: list[tuple[str, Any]] = [
    ("name", 123), ("name", b"x"), ("name", "ok"),
    ("user", 123), ("user", _cb), ("user", "u"),
    ("password", 123), ("password", _cb), ("password", "p"),
    ("token", 123), ("token", b"tok"), ("token", _cb), ("token", "t"),
    ("token_cb", "notcallable"), ("token_cb", _async_cb), ("user_info_cb", "notcallable"),
    ("user_jwt_cb", "notcallable"), ("user_jwt_cb", _cb), ("signature_cb", "notcallable"),
    ("nkeys_seed", "SUNOTASEED"), ("nkeys_seed", 123),
    ("nkeys_seed", _Made(lambda f: f["seed"], "Path(seed)")), ("nkeys_seed", _Made(lambda f: str(f["seed"]), "seed")),
    ("nkeys_seed", _Made(lambda f: f["missing"], "Path(missing)")),
    ("user_credentials", _Made(lambda f: f["creds"], "Path(creds)")),
    ("user_credentials", _Made(lambda f: str(f["creds"]), "creds")),
    ("user_credentials", _Made(lambda f: f["missing"], "Path(missing)")),
    ("user_credentials", _Made(lambda f: str(f["missing"]), "missing")),
    ("context", "no-such-context-xyz"), ("context", 5),
    ("tls", True), ("tls", ssl.create_default_context()), ("tls", "yes"), ("tls", 1),
    ("tls_hostname", 123), ("tls_handshake_first", "yes"),
    ("connect_timeout", "2s"), ("connect_timeout", -1), ("connect_timeout", 0), ("connect_timeout", float("inf")),
    ("connect_timeout", float("nan")), ("connect_timeout", True),
    ("allow_reconnect", 0), ("max_reconnect_attempts", 1.5), ("max_reconnect_attempts", "3"),
    ("max_reconnect_attempts", -5), ("reconnect_time_wait", None), ("reconnect_jitter", -1),
    ("ping_interval", 0), ("ping_interval", None), ("pending_size", -1), ("pending_size", "1"),
    ("max_outstanding_pings", 0), ("write_timeout", None), ("write_timeout", "x"),
    ("no_echo", "yes"), ("verbose", 1), ("inbox_prefix", ""), ("inbox_prefix", "a b"),
    ("inbox_prefix", b"_MYINBOX"), ("inbox_prefix", 5), ("drain_timeout", None), ("drain_timeout", -1),
    ("pending_msgs_limit", -1), ("pending_msgs_limit", 1.5), ("max_callback_threads", 0),
    ("error_cb", "x"), ("error_cb", _async_cb), ("error_cb", _cb), ("closed_cb", _async_cb),
    ("retry_on_failed_connect", True), ("no_randomize", "yes"),
    # nats-py's keywords, which connect() takes too
    ("dont_randomize", True), ("flush_timeout", 5.0), ("flush_timeout", "5"), ("nkeys_seed_str", "SUNOTASEED"),
    ("flusher_queue_size", 1024), ("ws_connection_headers", {"Authorization": "Bearer x"}),
    ("ws_connection_headers", {"Authorization": 5}), ("reconnect_to_server_handler", lambda servers, info: (None, 0)),
    ("reconnect_to_server_handler", "x"), ("skip_subject_validation", True), ("bogus_option", 1),
    # the servers, as connect()'s first argument
    ("servers", "nats://127.0.0.1:{port},"), ("servers", " nats://127.0.0.1:{port} , nats://127.0.0.1:{port}"),
    ("servers", {"nats://127.0.0.1:{port}"}),
    ("servers", _Made(lambda f: (u for u in ["nats://127.0.0.1:{port}"]), "generator")),
    ("servers", ""), ("servers", ","), ("servers", []), ("servers", 5), ("servers", [b"nats://127.0.0.1:{port}"]),
    ("servers", "http://127.0.0.1:{port}"), ("servers", "nats://127.0.0.1:99999"), ("servers", ["nats://[::1:4222"]),
]


def _value(value: Any, files: dict[str, pathlib.Path], port: int) -> Any:
    if isinstance(value, _Made):
        value = value.make(files)
    if isinstance(value, str) and "{port}" in value:
        return value.format(port=port)
    if isinstance(value, (set, list)):
        return type(value)(v.format(port=port) if isinstance(v, str) else v for v in value)
    if isinstance(value, Iterator):
        return (v.format(port=port) for v in value)
    return value


def _connect_refuses(key: str, value: Any, port: int) -> str | None:
    """What connect() says of the input before it connects (``None``: it took it and went on)."""
    url = f"nats://127.0.0.1:{port}"  # nobody listens: a connect that gets this far fails with NoServersError
    try:
        if key == "servers":
            nc = nats.connect(value, connect_timeout=2)
        else:
            nc = nats.connect(url, **{"connect_timeout": 2, key: value})
    except nats.NoServersError:
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    nc.close()  # retry_on_failed_connect: a client, still trying
    return None


def _case_id(key: str, value: Any) -> str:
    if isinstance(value, (str, bytes, int, float, dict, list, set, _Made)):
        shown = repr(value)
    else:  # a function or an SSLContext: its name, never its address
        shown = getattr(value, "__name__", type(value).__name__)
    return f"{key}={shown:.30}"


@pytest.mark.parametrize(("key", "value"), CASES, ids=[_case_id(k, v) for k, v in CASES])
def test_the_settings_refuse_what_connect_refuses_and_nothing_else(key: str, value: Any,
                                                                   files: dict[str, pathlib.Path]) -> None:
    """Agreement on every input, by construction: the validator calls what connect() calls before it
    opens anything. Only a server can tell the rest (whether one answers, accepts the credentials,
    requires TLS, passes the TLS handshake): such settings pass here and fail, as a NatsError (a 503
    of the health endpoint), on first use."""
    port = free_port()
    refused = _connect_refuses(key, _value(value, files, port), port)
    settings = ({"servers": _value(value, files, port)} if key == "servers"
                else {"servers": f"nats://127.0.0.1:{port}", "options": {key: _value(value, files, port)}})
    try:
        parse_settings(settings, framework="flask")
        problems: list[str] = []
    except SettingsError as exc:
        problems = exc.problems
    assert bool(problems) == (refused is not None), (problems, refused)
    if key != "servers":
        assert all(p.startswith(f"NATS_OPTIONS['{key}']: ") for p in problems), problems  # the keyword named


def test_servers_are_read_as_connect_reads_them(nats_server: NatsServer) -> None:
    # A generator was refused (and a set, and a trailing comma); a generator checked first was
    # then found empty by the client.
    holder = ProcessClient(url for url in [nats_server.url])
    try:
        assert holder().is_connected
    finally:
        holder.close()
    assert parse_settings({"servers": f" {nats_server.url} ,"}).servers == (nats_server.url,)


@pytest.mark.parametrize("framework", ["flask", "django", "python"])
def test_nats_url_is_checked_when_it_is_what_the_app_will_use(framework: str, nats_server: NatsServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The documented default server was never checked: a typo there passed start-up, then every probe failed.
    monkeypatch.setenv("NATS_URL", "nats://alice:S3cretPW@127.0.0.1:99999")
    with pytest.raises(SettingsError) as info:
        if framework == "flask":
            NATS(Flask("u"))
        elif framework == "django":
            parse_settings({}, framework="django")
        else:
            ProcessClient()
    where = {"flask": "NATS_SERVERS", "django": "NATS['servers']", "python": "servers"}[framework]
    assert info.value.problems == [f"NATS_URL (the environment variable used since {where} is not set): bad port "
                                   "or host in server URL 'nats://alice:***@127.0.0.1:99999'"], info.value.problems
    assert parse_settings({"servers": nats_server.url}).servers == (nats_server.url,)  # not what the app uses then
    monkeypatch.setenv("NATS_URL", nats_server.url)
    holder = ProcessClient()
    try:
        assert holder().connected_url == nats_server.url
    finally:
        holder.close()


def test_files_given_as_paths_work_and_a_missing_one_is_a_503_not_a_500(files: dict[str, pathlib.Path],
                                                                        tmp_path: pathlib.Path) -> None:
    # A pathlib.Path passed init_app, then connect() raised TypeError/AttributeError: every probe a 500.
    op = Operator()
    op.add_account("APP")
    creds = tmp_path / "app.creds"
    creds.write_text(op.user_creds("APP"))
    with NatsServer(jetstream=False, config=op.server_config()) as server:
        app = Flask("paths")
        app.config.update(NATS_SERVERS=server.url, NATS_OPTIONS={"user_credentials": creds},
                          NATS_HEALTH={"jetstream": False}, NATS_HEALTH_URL="/healthz/nats")
        ext = NATS(app)
        web = app.test_client()
        try:
            assert web.get("/healthz/nats").status_code == 200
            ext.holder(app).close()
            creds.unlink()  # gone after start-up: the next connect fails as NATS does
            answer = web.get("/healthz/nats")
            assert (answer.status_code, answer.json) == (503, {"status": "fail"})
        finally:
            ext.holder(app).close()
    app = Flask("missing")
    app.config.update(NATS_OPTIONS={"user_credentials": files["missing"]})
    with pytest.raises(SettingsError, match=r"NATS_OPTIONS\['user_credentials'\]: cannot read the credentials file"):
        NATS(app)  # and missing at start-up: the app does not start


@pytest.mark.parametrize("password", ["nats", "e", "127", "4222"])
def test_messages_never_mask_what_is_not_a_secret(password: str) -> None:
    # A known password was masked as a substring: 'nats' masked the scheme ('***://h'), 'e' every 'e'.
    with pytest.raises(SettingsError) as info:
        parse_settings({"servers": "nats://127.0.0.1:4x22", "options": {"user": "alice", "password": password,
                                                                        "connect_timeout": "2s"}})
    assert info.value.problems == [
        "NATS['options']['connect_timeout']: connect_timeout must be a number of seconds or None, not str",
        "NATS['servers']: bad port or host in server URL 'nats://127.0.0.1:4x22'"]
    with pytest.raises(SettingsError) as info:  # where a secret stands in a message, it is masked whole
        parse_settings({"servers": f"nast://alice:{password}@127.0.0.1:4222", "options": {"password": password}})
    assert info.value.problems == ["NATS['servers']: unsupported URL scheme 'nast' in 'nast://alice:***@127.0.0.1:4222'"]


def test_a_dotted_path_into_a_module_still_loading_is_looked_up_on_first_use(tmp_path: pathlib.Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A one-file app checks its settings at import (Django's setup(), Flask's init_app), before it
    # defines the functions they name; a mistyped path into any other module is still refused.
    (tmp_path / "oneapp.py").write_text(textwrap.dedent("""
        from natsjs_sync.contrib.process import parse_settings

        SETTINGS = parse_settings({"on_connect": [f"{__name__}.declare"], "health_details": f"{__name__}.ops"})
        try:
            parse_settings({"on_connect": ["json.no_such_function"]})
        except ValueError as exc:
            REFUSED = str(exc)

        def declare(nc):
            pass

        def ops(request):
            return True
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import oneapp  # type: ignore[import-not-found]

        assert oneapp.SETTINGS.on_connect == ("oneapp.declare",)
        assert "'json.no_such_function' cannot be used" in oneapp.REFUSED
        with pytest.raises(SettingsError, match=r"oneapp\.declar'"):  # loaded now: a typo is a typo
            parse_settings({"on_connect": ["oneapp.declar"]})
    finally:
        sys.modules.pop("oneapp", None)


def test_health_settings_that_could_never_pass_are_refused() -> None:
    # NATS_HEALTH={"timeout": 0} passed start-up, then every probe of a healthy app failed.
    for health, named in (({"timeout": 0}, "NATS_HEALTH['timeout']: timeout is the whole check's budget"),
                          ({"timeout": 0.0}, "NATS_HEALTH['timeout']: "),
                          ({"domain": "hub east"}, "NATS_HEALTH['domain']: the check's JetStream requests"),
                          ({"api_prefix": "$JS.*.API"}, "NATS_HEALTH['api_prefix']: the check's JetStream"),
                          ({"streams": ["S" * 5000]}, "NATS_HEALTH['streams']: the check's JetStream requests")):
        app = Flask("h")
        app.config.update(NATS_SERVERS="nats://127.0.0.1:4222", NATS_HEALTH=health)
        with pytest.raises(SettingsError) as info:
            NATS(app)
        assert len(info.value.problems) == 1 and info.value.problems[0].startswith(named), info.value.problems


def _check(options: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    check_connect_options(options, "NATS_OPTIONS", problems)
    return problems


def test_each_keyword_at_fault_is_named_and_pairs_pass_together() -> None:
    assert _check({"user_jwt_cb": _cb, "signature_cb": _cb}) == []  # one needs the other
    assert _check({"user_jwt_cb": _cb, "signature_cb": _cb, "connect_timeout": "x", "tls": "y"}) == [
        "NATS_OPTIONS['connect_timeout']: connect_timeout must be a number of seconds or None, not str",
        "NATS_OPTIONS['tls']: tls must be an ssl.SSLContext or a bool, not str"]
    assert _check({"user_jwt_cb": _cb}) == [
        "NATS_OPTIONS['user_jwt_cb']: user_jwt_cb needs signature_cb to sign the server's nonce"]


def test_process_client_checks_on_connect_and_retry_wait(nats_server: NatsServer) -> None:
    # A str on_connect was split into letters ('o', 's', ...) at the first call; a bad retry_wait passed.
    holder = ProcessClient(nats_server.url, on_connect=f"{__name__}.record_call")
    _RECORDED.clear()
    try:
        holder()
        assert len(_RECORDED) == 1
    finally:
        holder.close()
    for kwargs, named in (({"on_connect": [42]}, "on_connect holds 42"),
                          ({"on_connect": 42}, "on_connect is a dotted path"),
                          ({"on_connect": "nowhere.declare"}, "on_connect: 'nowhere.declare' cannot be used"),
                          ({"retry_wait": "1"}, "retry_wait must be a number of seconds"),
                          ({"retry_wait": -5}, "retry_wait must be >= 0"),
                          ({"retry_wait": None}, "retry_wait must be a finite number of seconds"),
                          ({"retry_wait": float("inf")}, "retry_wait must be a finite number of seconds")):
        with pytest.raises(SettingsError) as info:
            ProcessClient(nats_server.url, **kwargs)
        assert len(info.value.problems) == 1 and info.value.problems[0].startswith(named), info.value.problems


_RECORDED: list[object] = []


def record_call(nc: nats.Client) -> None:
    """An ``on_connect`` callable named by its dotted path."""
    _RECORDED.append(nc)
