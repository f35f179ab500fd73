"""The ``natsjs-sync`` command line (also ``python -m natsjs_sync``).

``demo``, ``bench`` and ``server`` start an embedded nats-server (from the
``server`` extra) unless ``--server`` or ``--context`` names one. The global
options (:data:`GLOBAL_OPTIONS`) are taken before or after any command's name:
every parser made by :class:`CommandParser` has them. User mistakes end with a
one-line message on stderr and a non-zero exit code, never a traceback. Ctrl-C,
SIGTERM and SIGHUP stop every command cleanly (an embedded server is stopped
too) with exit code 128 + the signal's number: 130, 143, 129 (``server`` exits 0
on SIGTERM, a service manager's stop). Times are printed in one format, local
time ``YYYY-MM-DD HH:MM:SS``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from .. import __version__
from .._connect import connect
from .._redact import redact
from ..client import Client
from ..errors import AuthorizationError, NatsError, NoServersError, SecureConnRequiredError
from ..msg import Msg
from ._parser import ArgumentParser


def _print(*args: object) -> None:
    print(*args, flush=True)


def _note(*args: object) -> None:
    """A line for the person at the terminal (stderr), not part of the output."""
    print(*args, file=sys.stderr, flush=True)


def when(t: datetime.datetime | None) -> str:
    """The one timestamp format of the command line; ``-`` for none (the server's
    zero time ``0001-01-01`` included)."""
    if t is None or t.year < 1970:
        return "-"
    return t.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def payload_text(data: bytes) -> str:
    """``data`` as text when it is printable UTF-8, else its size and an escaped preview."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\n\r" for c in text):
        return text
    preview = repr(data[:64])[2:-1]  # escaped as in a bytes literal
    return f"<{len(data)} bytes, binary> {preview}" + ("..." if len(data) > 64 else "")


def parse_headers(values: Sequence[str] | None) -> dict[str, list[str]] | None:
    """``--header "Key: value"`` (or ``Key=value``) options as message headers."""
    if not values:
        return None
    headers: dict[str, list[str]] = {}
    for item in values:
        sep = ":" if ":" in item else "="
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise ValueError(f"bad --header {item!r}: give it as 'Key: value'")
        headers.setdefault(key.strip(), []).append(value.strip())
    return headers


def read_stdin(what: str) -> bytes:
    """The data of a command given none: stdin (saying so when it is a terminal)."""
    if sys.stdin.isatty():
        _note(f"reading {what} from stdin; end with Ctrl-D (or give it as an argument)")
    return sys.stdin.buffer.read()


def _async_error(err: Exception) -> None:
    if isinstance(err, OSError) and not isinstance(err, (AuthorizationError, SecureConnRequiredError)):
        return  # a lost connection or a failed attempt: the disconnected/reconnected lines tell it
    _note(f"-- error: {redact(str(err))}")


class _ReconnectNotices:
    """Connect options that show a lost and a regained connection as one line each
    (not a line per failed attempt); other asynchronous errors get a line too.

    Closing a client reports a disconnect as well (as nats-py does): once
    :attr:`client` is set, that one is not shown.
    """

    def __init__(self) -> None:
        self.client: Client | None = None

    def options(self) -> dict[str, Any]:
        return dict(disconnected_cb=self._disconnected, reconnected_cb=lambda: _note("-- reconnected"),
                    error_cb=_async_error, max_reconnect_attempts=-1)

    def _disconnected(self) -> None:
        if self.client is None or not self.client.is_closed:
            _note("-- disconnected; reconnecting ...")


#: The default of the global ``--timeout``, as in the nats CLI.
DEFAULT_TIMEOUT = 5.0


def connect_options(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`~natsjs_sync.connect`'s keywords for the global connection options given:
    ``--user`` (a token when no ``--password``, or an empty one, is given, as the nats CLI takes it),
    ``--password``, ``--creds``, ``--nkey`` and ``--timeout`` (the connect's timeout).
    Credentials given here replace a context's as a group; the others of the context stay."""
    options: dict[str, Any] = {"connect_timeout": timeout_of(args)}
    user, password = getattr(args, "user", None), getattr(args, "password", None)
    if user and not password:  # an empty --password is none, as for the nats CLI (Go's empty string)
        options["token"] = user
    elif user is not None or password is not None:
        options["user"], options["password"] = user or "", password or ""
    if getattr(args, "creds", None):
        options["user_credentials"] = args.creds
    if getattr(args, "nkey", None):
        options["nkeys_seed"] = args.nkey
    return options


def timeout_of(args: argparse.Namespace, default: float = DEFAULT_TIMEOUT) -> float:
    """Seconds of the global ``--timeout`` (checked by :func:`main`), ``default`` when not given."""
    value = getattr(args, "timeout", None)
    return default if value is None else float(value)


@contextlib.contextmanager
def _connect_with_notices(args: argparse.Namespace, url: str, context: str | None = None) -> Iterator[Client]:
    notices = _ReconnectNotices()
    with connect(url, name="natsjs-cli", context=context, **connect_options(args), **notices.options()) as nc:
        notices.client = nc
        yield nc


def context_of(args: argparse.Namespace) -> str | None:
    """The NATS context a command connects with: ``--context`` (default ``$NATS_CONTEXT``),
    else the one the nats CLI selected, else none.

    As in the nats CLI, ``--server`` and ``$NATS_URL`` replace only the context's URL: its
    credentials, TLS files and JetStream settings still apply; ``--no-context`` uses none.
    """
    if getattr(args, "no_context", None):
        return None
    name = getattr(args, "context", None) or os.environ.get("NATS_CONTEXT")
    if name:
        return str(name)
    from ..natscontext import selected_context

    return selected_context()


@contextlib.contextmanager
def _embedded_server() -> Iterator[str]:
    """Start a nats-server with JetStream for the command (the ``server`` extra), say so, stop it after."""
    from ..testing import NatsServer

    try:
        server = NatsServer(jetstream=True)
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    try:  # a signal may stop the command while the server starts: it is stopped then too
        try:
            server.start()
        except (RuntimeError, OSError) as exc:  # it exited at once, or never became ready
            raise SystemExit(f"error: nats-server did not start: {exc}") from None
        _print(f"started an embedded nats-server {server.url} (JetStream in {server.store_dir})")
        yield server.url
    finally:
        server.close()
        _print("stopped the embedded nats-server")


@contextlib.contextmanager
def _server_url(url: str | None, embedded_ok: bool, context: str | None = None) -> Iterator[str]:
    """Yield ``url``, or ``$NATS_URL`` (as in the nats CLI, both win over a context's URL),
    or the URL of the NATS ``context``, or the URL of an embedded server we start."""
    url = url or os.environ.get("NATS_URL")
    if not url and context:
        url = _context_url(context)
    if url:
        yield url
        return
    if not embedded_ok:
        raise SystemExit("error: no server given: pass --server URL or --context NAME, or set NATS_URL")
    with _embedded_server() as url:
        yield url


def _context_url(context: str) -> str:
    from .._core.options import DEFAULT_SERVER
    from ..natscontext import load

    return load(context).server_url() or DEFAULT_SERVER


def _shown(url: str) -> str:
    from ..monitor.check import without_credentials

    return without_credentials(url)


@contextlib.contextmanager
def own_server_unless_named(args: argparse.Namespace) -> Iterator[tuple[str, str | None]]:
    """The server of ``demo`` and ``bench``: the one ``--server`` or ``--context`` names, else
    an embedded one started for the run. Either way a line on stdout names it.

    Unlike the other commands these do not look at ``$NATS_URL``, ``$NATS_CONTEXT`` or the
    context the nats CLI selected: on a NATS user's machine those may lead to a production
    cluster, where a demo or a benchmark has no business. A note on stderr says when one of
    them was passed over.

    Yields:
        The server URL and the NATS context to connect with (``None`` for none).

    Raises:
        ContextError: ``--context`` names a context that is unknown or unreadable.
        SystemExit: no server was named and no nats-server binary is installed.
    """
    context: str | None = None if getattr(args, "no_context", None) else args.context
    if args.server or context:
        url = args.server or _context_url(str(context))
        source = "--server" if args.server else f"NATS context {context!r}"
        _print(f"using the server given by {source}: {_shown(url)}")
        yield url, context
        return
    from ..natscontext import selected_context

    passed_over = [f"${name}" for name in ("NATS_URL", "NATS_CONTEXT") if os.environ.get(name)]
    selected = selected_context()
    if selected:
        passed_over.append(f"the selected context {selected!r}")
    if passed_over:
        _note(f"note: not using {' or '.join(passed_over)}; pass --server URL or --context NAME to use a server "
              "of yours")
    with _embedded_server() as url:
        yield url, None


def cmd_demo(args: argparse.Namespace) -> int:
    with own_server_unless_named(args) as (url, context):
        with connect(url, name="natsjs-demo", context=context, **connect_options(args)) as nc:
            info = nc.server_info
            _print(f"connected to {_shown(nc.connected_url or url)} (server {info.get('version')}, "
                   f"max_payload {nc.max_payload})")

            sub = nc.subscribe("demo.>")
            _print("subscribed to demo.>")
            for i in range(args.count):
                nc.publish(f"demo.greeting.{i}", f"hello #{i}".encode(), headers={"Demo-Seq": str(i)})
            nc.flush()
            _print(f"published {args.count} messages to demo.greeting.*")
            for _ in range(args.count):
                msg = sub.next_msg(timeout=5.0)
                headers: dict[str, str] = msg.headers or {}
                _print(f"  received {msg.subject}: {msg.data.decode()} (Demo-Seq={headers.get('Demo-Seq')})")
            sub.unsubscribe()

            def answer(msg: Msg) -> None:
                msg.respond(b"pong: " + msg.data)

            nc.subscribe("demo.service", queue="workers", cb=answer)
            nc.flush()
            reply = nc.request("demo.service", b"ping", timeout=5.0)
            _print(f"request demo.service 'ping' -> reply {reply.data.decode()!r}")
            _print(f"round-trip time {nc.rtt() * 1e6:.0f} us")
            nc.drain(timeout=5.0)
            _print("drained and closed")
    return 0


def cmd_pub(args: argparse.Namespace) -> int:
    headers = parse_headers(args.header)
    context = context_of(args)
    with _server_url(args.server, False, context) as url, \
            connect(url, name="natsjs-cli", context=context, **connect_options(args)) as nc:
        data = args.data.encode() if args.data is not None else read_stdin("the message")
        for _ in range(args.count):
            nc.publish(args.subject, data, headers=headers)
        nc.flush()
        _print(f"published {args.count} message(s) to {args.subject}")
    return 0


def print_msg(msg: Msg, label: str, raw: bool) -> None:
    """A received message: a header line, its headers, its data (bytes as they are with ``raw``)."""
    if raw:
        sys.stdout.buffer.write(msg.data)
        sys.stdout.flush()
        return
    _print(f"{label} {msg.subject}: {payload_text(msg.data)}")
    headers = msg.headers
    if headers:
        for key in headers:
            for value in headers.get_all(key):
                _print(f"    {key}: {value}")


def cmd_sub(args: argparse.Namespace) -> int:
    context = context_of(args)
    with _server_url(args.server, False, context) as url, _connect_with_notices(args, url, context) as nc:
        sub = nc.subscribe(args.subject, queue=args.queue)
        (_note if args.raw else _print)(f"listening on {args.subject}")
        received = 0
        deadline = time.monotonic() + args.stop_after if args.stop_after else None
        while args.count == 0 or received < args.count:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            try:
                msg = sub.next_msg(timeout=remaining if remaining is not None else None)
            except NatsError:
                break
            received += 1
            print_msg(msg, f"[#{received}]", args.raw)
    return 0


@contextlib.contextmanager
def client_for(args: argparse.Namespace, embedded_ok: bool = False, long_running: bool = False) -> Iterator[Client]:
    """A client on ``--server`` (or ``$NATS_URL``; an embedded server when allowed).

    ``long_running`` commands never give up reconnecting and show a lost and a
    regained connection as one line each on stderr.
    """
    context = context_of(args)
    with _server_url(getattr(args, "server", None), embedded_ok, context) as url:
        if long_running:
            with _connect_with_notices(args, url, context) as nc:
                yield nc
        else:
            with connect(url, name="natsjs-cli", context=context, **connect_options(args)) as nc:
                yield nc


def add_server_option(p: argparse.ArgumentParser) -> None:
    """Nothing to add any more: ``--server`` is a global option, on every :class:`CommandParser`.

    Kept so that a command module written before still builds its parser.
    """


def cmd_reply(args: argparse.Namespace) -> int:
    with client_for(args, long_running=True) as nc:
        done = threading.Event()
        answered = [0]

        def answer(msg: Msg) -> None:
            msg.respond(args.data.encode() if args.data is not None else msg.data)
            answered[0] += 1
            _print(f"[#{answered[0]}] answered a request on {msg.subject}")
            if args.count and answered[0] >= args.count:
                done.set()

        nc.subscribe(args.subject, queue=args.queue, cb=answer)
        nc.flush()
        _print(f"answering requests on {args.subject}" + (f" (queue {args.queue})" if args.queue else ""))
        done.wait(args.stop_after or None)
    return 0


def cmd_req(args: argparse.Namespace) -> int:
    headers = parse_headers(args.header)
    context = context_of(args)
    with _server_url(args.server, False, context) as url, \
            connect(url, name="natsjs-cli", context=context, **connect_options(args)) as nc:
        data = args.data.encode() if args.data is not None else read_stdin("the request")
        reply = nc.request(args.subject, data, timeout=timeout_of(args), headers=headers)
        if reply.headers or args.raw:
            print_msg(reply, "reply on", args.raw)
        else:
            _print(payload_text(reply.data))
    return 0


#: The options every command takes, before or after its name (``natsjs-sync --context prod pub x y``
#: and ``natsjs-sync pub x y --context prod`` are one command): the flags and the keywords of
#: ``add_argument``. :class:`CommandParser` adds them to every parser, so a new command has them too.
#: They are the nats CLI's connection options, under its names; a command that gives one of these
#: flags a meaning of its own (``sub --timeout``: stop after) has its own in its parser.
GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--server", "-s"), dict(
        metavar="URL",
        help="the server URL(s), comma-separated (default: $NATS_URL, else the NATS context's); with a "
             "context, only its URL is replaced. demo and bench start an embedded nats-server unless "
             "--server or --context is given")),
    (("--context",), dict(
        metavar="NAME",
        help="connect with this NATS context, as the nats CLI does (default: $NATS_CONTEXT, else the "
             "selected context); see 'context ls'")),
    (("--no-context",), dict(
        action="store_true",
        help="use no NATS context: neither --context, $NATS_CONTEXT nor the selected one (as the nats CLI's "
             "--no-context)")),
    (("--user",), dict(
        metavar="USER",
        help="the user name; without --password, a token (as the nats CLI takes it). Credentials given "
             "here replace the context's")),
    (("--password",), dict(metavar="PASSWORD", help="the password of --user")),
    (("--creds",), dict(metavar="FILE", help="a user credentials file (.creds: user JWT and nkey seed)")),
    (("--nkey",), dict(metavar="FILE", help="a user nkey seed file")),
    (("--timeout",), dict(
        metavar="DURATION",
        help="how long to wait for the server: the connect and each answer, e.g. 500ms, 2s, 1m "
             "(default 5s, or the command's own)")),
)

class CommandParser(ArgumentParser):
    """The command line's argument parser: every one of them, at any depth of subcommands, takes
    the :data:`GLOBAL_OPTIONS` and lists them in its help. Not thread-safe (build, then parse).

    A global option given before a command's name is kept when the command's parser does not
    see it again (its parsers default it to "not given"); given after, it wins.

    Args:
        nagios: usage errors end with a Nagios ``UNKNOWN`` line on stdout and exit code 3
            instead of argparse's exit code 2 (which Nagios reads as CRITICAL); the parsers of
            its subcommands inherit it.
        top: the outermost parser, where the global options get their defaults (``None``).
    """

    def __init__(self, *args: Any, nagios: bool = False, top: bool = False, **kwargs: Any) -> None:
        # A command's own option with a global option's flag (sub's --timeout) replaces it in its parser.
        kwargs.setdefault("conflict_handler", "resolve")
        super().__init__(*args, **kwargs)
        self.nagios = nagios
        self._commands: dict[str, CommandParser] = {}
        group = self.add_argument_group("global options (before or after the command)")
        for flags, options in GLOBAL_OPTIONS:
            group.add_argument(*flags, **options, default=None if top else argparse.SUPPRESS)
        # The innermost parser that took part, for errors found after parsing (see main()).
        self.set_defaults(_command_parser=self)

    def add_subparsers(self, **kwargs: Any) -> Any:
        """As :meth:`argparse.ArgumentParser.add_subparsers`; the commands' parsers are
        :class:`CommandParser` too (with this one's ``nagios``), and :meth:`commands` lists them."""
        kwargs.setdefault("parser_class", functools.partial(CommandParser, nagios=self.nagios))
        action = super().add_subparsers(**kwargs)
        self._commands = action.choices
        return action

    def commands(self) -> dict[str, CommandParser]:
        """The parsers of this parser's subcommands, by name (empty when it has none); a command's
        aliases (``context -`` for ``context previous``) are not listed again."""
        seen: set[int] = set()
        unique: dict[str, CommandParser] = {}
        for name, parser in self._commands.items():
            if id(parser) not in seen:
                seen.add(id(parser))
                unique[name] = parser
        return unique

    def error(self, message: str) -> NoReturn:
        """A usage error: one line on stderr (the command, the message, where help is), exit code 2;
        a Nagios check's is its status line on stdout and exit code 3 (UNKNOWN)."""
        if not self.nagios:
            self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
        from ..monitor.check import CheckResult

        self.print_usage(sys.stderr)
        result = CheckResult(self.prog.rsplit(" ", 1)[-1])
        result.unknown(message)
        _print(result.line())
        sys.exit(3)


def build_parser() -> CommandParser:
    """The whole command line's parser (also read by the docs' command reference)."""
    parser = CommandParser(prog="natsjs-sync", description="Synchronous NATS and JetStream client", top=True)
    parser.add_argument("--version", action="version", version=f"natsjs-sync {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="publish, subscribe and request on an embedded server (or the one named)",
                       description="Publish, subscribe and make a request. Runs on an embedded nats-server "
                                   "unless --server or --context names one; $NATS_URL, $NATS_CONTEXT and the "
                                   "selected context are not used.")
    p.add_argument("--count", type=positive_int, default=3, help="messages to publish (default 3)")
    p.set_defaults(func=cmd_demo)

    header_help = "a message header 'Key: value' (repeatable)"
    p = sub.add_parser("pub", help="publish a message (DATA, or stdin when none is given)")
    p.add_argument("subject", help="the subject to publish to")
    p.add_argument("data", nargs="?", default=None, help="the message (default: read from stdin)")
    p.add_argument("--header", "-H", action="append", metavar="'KEY: VALUE'", help=header_help)
    p.add_argument("--count", type=positive_int, default=1, help="publish the message this many times (default 1)")
    p.set_defaults(func=cmd_pub)

    p = sub.add_parser("sub", help="print messages of a subject")
    p.add_argument("subject", help="the subject to listen on (wildcards * and > allowed)")
    p.add_argument("--queue", help="join this queue group (each message goes to one member)")
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", **STOP_AFTER)
    p.add_argument("--raw", action="store_true", help="write only the messages' data, bytes as they are")
    p.set_defaults(func=cmd_sub)

    p = sub.add_parser("req", help="send a request (DATA, or stdin when none is given) and print the reply")
    p.add_argument("subject", help="the subject to send the request to")
    p.add_argument("data", nargs="?", default=None, help="the request (default: read from stdin)")
    p.add_argument("--header", "-H", action="append", metavar="'KEY: VALUE'", help=header_help)
    p.add_argument("--raw", action="store_true", help="write only the reply's data, bytes as they are")
    p.set_defaults(func=cmd_req)

    p = sub.add_parser("reply", help="answer requests (with DATA, or echo them)")
    p.add_argument("subject", help="the subject to answer requests on")
    p.add_argument("data", nargs="?", default=None, help="the answer (default: the request's own data)")
    p.add_argument("--queue", help="join this queue group (each request goes to one member)")
    p.add_argument("--count", type=count_or_zero, default=0, help="stop after this many (0: never)")
    p.add_argument("--timeout", **STOP_AFTER)
    p.set_defaults(func=cmd_reply)

    from . import advisories, bench, context, groups, jetstream, server, service, stores, trace

    server.register(sub)
    jetstream.register(sub)
    advisories.register(sub)
    stores.register(sub)
    bench.register(sub)
    service.register(sub)
    context.register(sub)
    groups.register(sub)
    trace.register(sub)
    return parser


def positive_int(text: str) -> int:
    """An ``int`` option that must be 1 or more (a count, a size): argparse's ``type``."""
    return _int_at_least(text, 1)


def count_or_zero(text: str) -> int:
    """An ``int`` option that must be 0 or more (``0``: no limit): argparse's ``type``."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {'positive' if least == 1 else 'zero or more'}, not {value}")
    return value


def stop_after(text: str) -> float:
    """A duration option where 0 means never (``sub --timeout``): argparse's ``type``."""
    from .server import duration

    seconds = duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    return seconds


#: ``--timeout`` of the commands that run until stopped: their own option (not the global one,
#: which a ``--timeout`` given before the command's name still is: the connect's).
STOP_AFTER: dict[str, Any] = dict(dest="stop_after", type=stop_after, default=0.0, metavar="DURATION",
                                  help="stop after this long, e.g. 90s, 5m (0: never)")


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: the command stops as on Ctrl-C (a BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` takes it for an error)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop a command as Ctrl-C does: a service manager's stop, a closed terminal.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def heeded(signals: Sequence[int]) -> tuple[int, ...]:
    """Those of ``signals`` that this process was not started ignoring: a command run under
    ``nohup`` (SIGHUP ignored) outlives its terminal, and one run in the background by a shell
    (SIGINT ignored) is no Ctrl-C's to stop."""
    return tuple(sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """While the command runs, SIGTERM and SIGHUP raise :class:`_Stopped` in the main thread, so
    every ``finally`` runs (an embedded server is stopped) instead of the process just dying. A
    second signal during that clean-up is ignored, and so is a signal the process was started
    ignoring (:func:`heeded`). Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    handled = heeded(STOP_SIGNALS)

    def stop(signum: int, _frame: object) -> None:
        for sig in handled:
            signal.signal(sig, signal.SIG_IGN)
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _check_timeout(args: argparse.Namespace) -> None:
    """The global ``--timeout`` (taken as text, so that its error comes from the command's own
    parser: a check's is UNKNOWN) as seconds; a usage error when it is no positive duration."""
    from .server import duration

    value = getattr(args, "timeout", None)
    if not isinstance(value, str):
        return
    try:
        seconds = duration(value)
    except argparse.ArgumentTypeError as exc:
        args._command_parser.error(f"argument --timeout: {exc}")
    if seconds <= 0:
        args._command_parser.error(f"argument --timeout: {value!r} is not a positive duration")
    args.timeout = seconds


def _unreachable(exc: NoServersError) -> str:
    return (f"error: no NATS server reachable ({redact(str(exc))}); start one with 'natsjs-sync server', or "
            "name one with --server URL or --context NAME")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # reported by the command's own parser: a check's usage error is UNKNOWN, not 2
        args._command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _check_timeout(args)
    try:
        with _stop_on_signals():
            return int(args.func(args))
    except NoServersError as exc:
        print(_unreachable(exc), file=sys.stderr)
        return 1
    except NatsError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError) as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except _Stopped as stop:
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())
