"""``natsjs-sync server``: run an embedded nats-server, or look at running ones.

- ``server [--port N] [--no-jetstream] [--store-dir DIR]`` runs an embedded
  nats-server until Ctrl-C (the ``server`` extra);
- ``server ls`` lists every server of the cluster, ``server info`` shows one
  (both through the system account's monitoring requests);
- ``server check connection|jetstream|stream|consumer|message|kv|request|credential|server|meta``
  prints what it found as the nats CLI's ``server check`` does (Nagios text, JSON, Prometheus
  text) and exits with the Nagios code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), for cron
  jobs, Nagios, Prometheus and Kubernetes probes.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import math
import re
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._connect import connect
from .._timeout import WAIT_MAX
from ..client import Client
from ..errors import NatsError

if TYPE_CHECKING:
    from ..monitor.check import CheckResult


def _print(*args: object) -> None:
    print(*args, flush=True)


# ---------------------------------------------------------------------------------------------- embedded server


def _port_is_free(port: int) -> bool:
    """Whether nats-server can listen on ``port``: tested as it binds (Go sets ``SO_REUSEADDR``),
    so the TIME_WAIT connections a stopped server leaves behind for a minute do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cmd_server(args: argparse.Namespace) -> int:
    """Run an embedded nats-server until Ctrl-C, SIGTERM or SIGHUP.

    Returns:
        0 after SIGTERM (a service manager's stop), 130 after Ctrl-C and 129 after SIGHUP
        (128 + the signal, as a shell reports it); 1 when the nats-server ends by itself.
    """
    from ..testing import NatsServer
    from . import STOP_SIGNALS, heeded

    if not _port_is_free(args.port):
        raise SystemExit(f"error: port {args.port} is in use (another nats-server?): choose one with --port")
    try:
        server = NatsServer(port=args.port, jetstream=not args.no_jetstream, store_dir=args.store_dir)
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    # Ctrl-C, SIGTERM and SIGHUP only note the signal, from before the start on: the loop below sees
    # it within half a second and stops the server gracefully. An exception raised by a handler could
    # land anywhere (even between the start and the try that stops the server), and setting a
    # threading.Event from a handler can deadlock on its lock.
    signals: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: signals.append(signum))
                for sig in heeded((signal.SIGINT, *STOP_SIGNALS))}
    try:
        try:
            server.start()
        except (RuntimeError, OSError, TimeoutError) as exc:
            raise SystemExit(f"error: nats-server did not start: {exc}") from None
        _print(f"nats-server listening on {server.url} (JetStream {'off' if args.no_jetstream else 'on'}); "
               "Ctrl-C stops it")
        if not args.no_jetstream:
            if args.store_dir:
                _print(f"JetStream data in {server.store_dir}")
            else:
                _print(f"JetStream data in {server.store_dir}: a temporary directory, deleted when the server "
                       "stops (keep it with --store-dir DIR)")
        while not signals and server.is_running:
            time.sleep(0.5)
        if not signals:  # it ended of itself (a crash, the OOM killer, a kill): no clean stop
            assert server.proc is not None
            code = server.proc.returncode
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            last = [line for line in server.read_log().splitlines() if line.strip()][-5:]
            print(f"error: nats-server ended by itself ({how}); the end of its log:"
                  + "".join(f"\n  {line}" for line in last), file=sys.stderr)
            return 1
    finally:
        server.stop()  # SIGTERM: the server writes its store out (SIGKILL after 10 s)
        server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not signals or signals[0] == signal.SIGTERM:
        return 0
    return 128 + signals[0]


# ---------------------------------------------------------------------------------------------- connecting


def _target(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The URL and the NATS context to connect with, found as every command finds them:
    ``--server``, ``$NATS_URL``, ``--context`` / ``$NATS_CONTEXT``, the selected context.

    Raises:
        ContextError: the context named is unknown or unreadable.
    """
    from . import _server_url, context_of

    context = context_of(args)
    try:
        with _server_url(getattr(args, "server", None), False, context) as url:
            return url, context
    except SystemExit:  # no server named anywhere
        return None, context


def _connect(args: argparse.Namespace) -> Client:
    from . import connect_options

    url, context = _target(args)
    if not url:
        raise SystemExit("error: no server given: pass --server URL or --context NAME, or set NATS_URL")
    return connect(url, name="natsjs-cli", context=context, allow_reconnect=False, **connect_options(args))


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
#: No duration reaches this: the longest wait Python's clocks take (about 292 years, a hair under the
#: longest Go's ``time.Duration`` holds, past which the nats CLI's ``ParseDuration`` fails too).
MAX_DURATION = WAIT_MAX


def duration(text: str) -> float:
    """Seconds from ``"1.5"``, ``"500ms"``, ``"2s"``, ``"1m30s"`` (Go's duration syntax, as the nats CLI
    takes); never negative, always under :data:`MAX_DURATION`. argparse's ``type``: a mistake is an
    :class:`argparse.ArgumentTypeError`."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds) or seconds < 0:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (give seconds, or e.g. 500ms, 2s, 1m)")
        return _not_too_long(seconds, text)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (give seconds, or e.g. 500ms, 2s, 1m)")
    return _not_too_long(total, text)


def check_duration(text: str) -> float:
    """Seconds from a check's duration option: :func:`duration`'s syntax and the nats CLI's longer
    units, ``d``, ``w``, ``M`` (30 days) and ``y`` (365 days), as in ``2d`` or ``1w1d``."""
    from ..monitor.check import metadata_duration

    try:
        return duration(text)
    except argparse.ArgumentTypeError:
        try:
            return _not_too_long(metadata_duration(text), text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (give seconds, or e.g. 500ms, 2s, 1m, "
                                             "2h, 7d, 1w)") from None


def _not_too_long(seconds: float, text: str) -> float:
    if seconds >= MAX_DURATION:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} is not under {MAX_DURATION:.0f} s (292 years)")
    return seconds


# ---------------------------------------------------------------------------------------------- ls, info


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def _uptime(start: datetime.datetime | None, now: datetime.datetime | None) -> str:
    if start is None or now is None:
        return "-"
    secs = int((now - start).total_seconds())
    days, secs = divmod(secs, 86400)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours) + [f"{minutes}m"] * bool(minutes)
    return "".join(parts) + f"{secs}s"


def cmd_ls(args: argparse.Namespace) -> int:
    from ..monitor import SystemClient
    from . import timeout_of

    with _connect(args) as nc:
        replies = SystemClient(nc, timeout=timeout_of(args)).ping(expected=args.expect)
    replies.sort(key=lambda r: (r.server.cluster or "", r.server.name))
    header = ("NAME", "CLUSTER", "VERSION", "JS", "CONNS", "SUBS", "SLOW", "MEMORY", "CPU", "UPTIME", "RTT")
    rows = [header]
    for r in replies:
        s, d = r.server, r.data
        rows.append((s.name, s.cluster or "-", s.version, "yes" if s.jetstream else "no", str(d.connections),
                     str(d.subscriptions), str(d.slow_consumers), _bytes(d.mem), f"{d.cpu:.0f}%",
                     _uptime(d.start, s.time), f"{r.elapsed * 1000:.1f} ms"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        _print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    clusters = sorted({r.server.cluster or "-" for r in replies})
    _print(f"{len(replies)} server(s) in {len(clusters)} cluster(s): {', '.join(clusters) or '-'}; "
           f"{sum(r.data.connections for r in replies)} connection(s)")
    if args.expect and len(replies) < args.expect:
        print(f"error: {len(replies)} of the {args.expect} expected servers answered", file=sys.stderr, flush=True)
        return 1
    return 0


def _is_server_id(text: str) -> bool:
    return len(text) == 56 and text.startswith("N") and text.isalnum() and text.isupper()


def cmd_info(args: argparse.Namespace) -> int:
    from ..monitor import ServerFilter, SystemClient
    from . import timeout_of

    with _connect(args) as nc:
        client = SystemClient(nc, timeout=timeout_of(args))
        target = args.target or str(nc.server_info.get("server_id", ""))
        if _is_server_id(target):
            replies = client.varz(server=target)
        else:
            replies = client.varz(servers=ServerFilter(name=target))
            replies = [r for r in replies if r.server.name == target] or replies
    if not replies:
        raise SystemExit(f"error: no server named {target!r} answered")
    for r in replies:
        s, v = r.server, r.data
        js = v.jetstream or {}
        meta = js.get("meta") or {}
        lines = [
            ("Name", s.name), ("ID", s.id), ("Version", f"{v.version} (go {v.go}, git {v.git_commit})"),
            ("Cluster", s.cluster or "-"), ("Domain", s.domain or "-"),
            ("Listening", f"{v.host}:{v.port}"), ("Started", str(v.start)), ("Uptime", v.uptime),
            ("Connections", f"{v.connections} now, {v.total_connections} since start"),
            ("Subscriptions", str(v.subscriptions)), ("Slow consumers", str(v.slow_consumers)),
            ("Routes", str(v.routes)), ("Leaf nodes", str(v.leafnodes)),
            ("Messages", f"{v.in_msgs} in, {v.out_msgs} out"),
            ("Bytes", f"{_bytes(v.in_bytes)} in, {_bytes(v.out_bytes)} out"),
            ("Memory", _bytes(v.mem)), ("CPU", f"{v.cpu:.0f}% of {v.cores} cores"),
            ("Max payload", _bytes(v.max_payload)),
            ("JetStream", "off" if not s.jetstream else f"on, meta leader {meta.get('leader') or '-'}"),
            ("System account", v.system_account or "-"),
        ]
        width = max(len(k) for k, _ in lines)
        for key, value in lines:
            _print(f"{key.rjust(width)}: {value}")
    return 0


# ---------------------------------------------------------------------------------------------- check


#: The checks of a connected client by kind: the function's name in ``monitor.check`` and the
#: parsed arguments it takes by position. Every keyword-only parameter of a check is read from the
#: parsed argument of the same name (see :func:`_thresholds`), so a new option needs no dispatch code.
_CHECKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "jetstream": ("check_jetstream", ()),
    "server": ("check_server", ("name",)),
    "meta": ("check_meta", ()),
    "stream": ("check_stream", ("stream",)),
    "consumer": ("check_consumer", ("stream", "consumer")),
    "message": ("check_message", ("stream",)),
    "kv": ("check_kv", ("bucket",)),
    "request": ("check_request", ("subject",)),
}
#: Each kind's aliases, as the nats CLI's.
_ALIASES = {"connection": ["conn"], "meta": ["raft"], "jetstream": ["js"], "request": ["req"]}


def _thresholds(check: Callable[..., Any], args: argparse.Namespace) -> dict[str, Any]:
    """The keyword-only arguments of ``check`` (thresholds, ``timeout``), taken from ``args`` by name.

    Raises:
        AttributeError: the kind's parser has no option for one of them (a bug: the check answers UNKNOWN).
    """
    from . import timeout_of

    params = inspect.signature(check).parameters.values()
    return {p.name: timeout_of(args) if p.name == "timeout" else getattr(args, p.name)
            for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _empty_result(kind: str, args: argparse.Namespace) -> CheckResult:
    """The result a check of ``kind`` would have, with no findings yet: the nats CLI's suite and name."""
    from ..monitor.check import CheckResult

    names = {
        "connection": ("connections", "Connection"), "jetstream": ("jetstream", "JetStream"),
        "meta": ("meta", "JetStream Meta Cluster"), "message": ("message", "Stream Message"),
        "credential": ("credential", "Credential"),
        "stream": ("stream", getattr(args, "stream", None)), "kv": ("kv", getattr(args, "bucket", None)),
        "server": ("server", getattr(args, "name", None)), "request": ("request", getattr(args, "subject", None)),
        "consumer": ("consumer", f"{getattr(args, 'stream', '')}_{getattr(args, 'consumer', '')}"),
    }
    return CheckResult(*names.get(kind, (kind, None)))


def _run_check(kind: str, args: argparse.Namespace) -> CheckResult:
    """Run the check of ``kind`` with the parsed arguments; never raises."""
    from ..monitor import check as checks
    from ..monitor.check import without_credentials
    from . import connect_options

    try:
        if kind == "credential":
            return checks.check_credential(args.credential, **_thresholds(checks.check_credential, args))
        url, context = _target(args)
        if not url:
            result = _empty_result(kind, args)
            result.unknown("no server given: pass --server URL or --context NAME, or set NATS_URL")
            return result
        if kind == "connection":
            options = connect_options(args)
            del options["connect_timeout"]  # the check's timeout, one of its thresholds
            return checks.check_connection(url, **_thresholds(checks.check_connection, args), context=context,
                                           **options)
        try:
            nc = _connect(args)
        except (NatsError, OSError) as exc:
            result = _empty_result(kind, args)
            result.critical(f"cannot connect to {without_credentials(url)}: {without_credentials(str(exc))}")
            return result
        name, positional = _CHECKS[kind]
        check: Callable[..., CheckResult] = getattr(checks, name)
        with nc:
            return check(nc, *(getattr(args, a) for a in positional), **_thresholds(check, args))
    except Exception as exc:  # a probe must answer with a status line, never a traceback
        result = _empty_result(kind, args)
        result.unknown(f"the check itself failed: {type(exc).__name__}: {exc}")
        return result


def _write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it (mode 0600), as the nats
    CLI's ``--outfile``: a collector reading the file never sees half of it."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
    try:
        # surrogateescape: bytes of the command line that are not UTF-8 go out as given, as to stdout.
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def cmd_check(args: argparse.Namespace) -> int:
    """Run one check; print it (or write it to ``--outfile``) in ``--format``; return the exit code
    the nats CLI's would (the Nagios status; 0 in Prometheus format). Never a traceback."""
    result = _run_check(args.kind, args)
    text = result.render(args.format, args.namespace)
    if args.outfile:
        try:
            _write_atomically(args.outfile, text + "\n")
        except OSError as exc:
            print(f"error: cannot write {args.outfile}: {exc}", file=sys.stderr, flush=True)
            return 1
    else:
        _print(text)
    return result.exit_code(args.format)


def _header(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` or ``KEY:VALUE`` (the nats CLI's map flags): argparse's ``type``."""
    m = re.fullmatch(r"([^:=]+)[:=](.*)", text, re.DOTALL)
    if not m:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return m.group(1), m.group(2)


class _HeaderMap(argparse.Action):
    """Collects repeated ``KEY=VALUE`` options into one dict."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        current = dict(getattr(namespace, self.dest, None) or {})
        key, value = values
        current[key] = value
        setattr(namespace, self.dest, current)


def _add_output_options(p: argparse.ArgumentParser, top: bool) -> None:
    """``--format``, ``--namespace``, ``--outfile``: on ``check`` (with their defaults) and on each
    kind (given there, they win), so they go before or after the kind, as with the nats CLI."""
    from ..monitor.check import DEFAULT_NAMESPACE, FORMATS

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    p.add_argument("--format", choices=FORMATS, default=default("nagios"),
                   help="render the result as Nagios text (default), JSON, Prometheus text or a table for people")
    p.add_argument("--namespace", default=default(DEFAULT_NAMESPACE), metavar="NAME",
                   help=f"the prefix of the Prometheus metric names (default {DEFAULT_NAMESPACE})")
    p.add_argument("--outfile", default=default(None), metavar="FILE",
                   help="write the result to FILE (replaced whole, mode 0600) instead of stdout")


def _register_checks(check: argparse.ArgumentParser) -> None:
    _add_output_options(check, top=True)
    kinds = check.add_subparsers(dest="check", required=True, metavar="KIND")
    optional_int: dict[str, Any] = dict(type=int, default=None)
    optional_secs: dict[str, Any] = dict(type=check_duration, default=None, metavar="DURATION")

    def add_kind(name: str, help: str) -> argparse.ArgumentParser:  # noqa: A002 - argparse's keyword
        parser = kinds.add_parser(name, help=help, aliases=_ALIASES.get(name, []))
        _add_output_options(parser, top=False)
        parser.set_defaults(func=cmd_check, kind=name)
        return parser

    p = add_kind("connection", "connect, measure the round trip, request through the server")
    for name, warn, crit, what in (("connect", 0.5, 1.0, "connecting"), ("rtt", 0.5, 1.0, "the round trip"),
                                   ("req", 0.5, 1.0, "a request answered through the server")):
        p.add_argument(f"--{name}-warn", type=check_duration, default=warn, metavar="DURATION",
                       help=f"WARNING when {what} takes this long (default {warn * 1000:.0f}ms)")
        p.add_argument(f"--{name}-critical", type=check_duration, default=crit, metavar="DURATION",
                       help=f"CRITICAL when {what} takes this long (default {crit:.0f}s)")

    p = add_kind("jetstream", "the account's JetStream: limits and every stream's replicas")
    limits: tuple[tuple[str, float | None, float | None], ...] = (
        ("mem", 75, 90), ("store", 75, 90), ("streams", None, None), ("consumers", None, None))
    for name, pct_warn, pct_crit in limits:
        p.add_argument(f"--{name}-warn", type=float, default=pct_warn, metavar="PERCENT",
                       help=f"WARNING over this percent of the account's {name} limit (below 0: off)"
                       + (f" (default {pct_warn:.0f})" if pct_warn else ""))
        p.add_argument(f"--{name}-critical", type=float, default=pct_crit, metavar="PERCENT",
                       help=f"CRITICAL over this percent of the account's {name} limit (below 0: off)"
                       + (f" (default {pct_crit:.0f})" if pct_crit else ""))
    p.add_argument("--replicas", action=argparse.BooleanOptionalAction, default=True,
                   help="check the streams' replicas (default; --no-replicas does not)")
    p.add_argument("--replica-lag-critical", **optional_int, metavar="OPS",
                   help="CRITICAL when a stream replica is this many operations behind")
    p.add_argument("--replica-seen-critical", **optional_secs,
                   help="CRITICAL when a stream replica was not seen for this long")

    p = add_kind("server", "one server by name answers and is healthy (system account)")
    p.add_argument("--name", required=True, help="the server's name")
    for flag, param, what in (("cpu", "cpu", "percent of CPU"), ("mem", "memory", "bytes of memory"),
                              ("conn", "connections", "client connections"),
                              ("subs", "subscriptions", "subscriptions")):
        kind: dict[str, Any] = dict(type=float) if flag == "cpu" else dict(type=int)
        p.add_argument(f"--{flag}-warn", **kind, dest=f"{param}_warn", default=None, metavar="N",
                       help=f"WARNING at N {what}")
        p.add_argument(f"--{flag}-critical", **kind, dest=f"{param}_critical", default=None, metavar="N",
                       help=f"CRITICAL at N {what}")
    p.add_argument("--uptime-warn", **optional_secs, help="WARNING when up for less than this (it restarted)")
    p.add_argument("--uptime-critical", **optional_secs, help="CRITICAL when up for less than this")
    p.add_argument("--js-required", action="store_true", help="CRITICAL without JetStream")
    p.add_argument("--auth-required", action="store_true", help="CRITICAL when it does not require authentication")
    p.add_argument("--tls-required", action="store_true", help="CRITICAL when it does not require TLS")

    p = add_kind("meta", "the JetStream meta group: leader, peers, quorum (system account)")
    p.add_argument("--expect", **optional_int, metavar="N", help="CRITICAL unless the group has N servers")
    p.add_argument("--lag-critical", **optional_int, metavar="OPS",
                   help="CRITICAL when a peer is this many operations behind")
    p.add_argument("--seen-critical", **optional_secs, help="CRITICAL when a peer was not seen for this long")

    p = add_kind("stream", "a stream: leader, replicas, messages, mirror and sources "
                           "(thresholds also from its metadata)")
    p.add_argument("--stream", required=True, help="the stream to check")
    p.add_argument("--peer-expect", **optional_int, metavar="N", help="CRITICAL unless it has N replicas")
    p.add_argument("--peer-lag-critical", **optional_int, metavar="OPS",
                   help="CRITICAL when a replica is this many operations behind")
    p.add_argument("--peer-seen-critical", **optional_secs, help="CRITICAL when a replica was not seen for this long")
    p.add_argument("--msgs-warn", **optional_int, metavar="N", help="WARNING with N messages or fewer")
    p.add_argument("--msgs-critical", **optional_int, metavar="N", help="CRITICAL with N messages or fewer")
    p.add_argument("--subjects-warn", **optional_int, metavar="N",
                   help="WARNING with N subjects or more (N or fewer unless below --subjects-critical)")
    p.add_argument("--subjects-critical", **optional_int, metavar="N",
                   help="CRITICAL with N subjects or more (N or fewer unless --subjects-warn is below it)")
    p.add_argument("--lag-critical", **optional_int, metavar="MSGS",
                   help="CRITICAL when a mirror or source is this many messages behind")
    p.add_argument("--seen-critical", **optional_secs,
                   help="CRITICAL when a mirror or source was not seen for this long")
    p.add_argument("--min-sources", **optional_int, metavar="N", help="CRITICAL with fewer sources")
    p.add_argument("--max-sources", **optional_int, metavar="N", help="CRITICAL with more sources")

    p = add_kind("consumer", "a consumer: pending, ack pending, redelivered, waiting, last delivery and ack "
             "(thresholds also from its metadata)")
    p.add_argument("--stream", required=True, help="the consumer's stream")
    p.add_argument("--consumer", required=True, help="the consumer to check")
    p.add_argument("--outstanding-ack-critical", **optional_int, metavar="N",
                   help="CRITICAL with N messages awaiting an ack")
    p.add_argument("--waiting-critical", **optional_int, metavar="N", help="CRITICAL with N pull requests waiting")
    p.add_argument("--unprocessed-critical", **optional_int, metavar="N",
                   help="CRITICAL with N messages not yet delivered")
    p.add_argument("--redelivery-critical", **optional_int, metavar="N",
                   help="CRITICAL with N redelivered messages awaiting an ack")
    p.add_argument("--last-delivery-critical", **optional_secs,
                   help="CRITICAL when nothing was delivered for this long")
    p.add_argument("--last-ack-critical", **optional_secs, help="CRITICAL when nothing was acked for this long")
    p.add_argument("--pinned", action="store_true", default=None,
                   help="CRITICAL unless the consumer has the pinned_client priority policy and every group a "
                        "pinned client")

    p = add_kind("message", "a stream's last message on a subject: its age and its body")
    p.add_argument("--stream", required=True, help="the stream holding the message")
    p.add_argument("--subject", default=">", help="the subject to read the last message of (a literal subject)")
    p.add_argument("--age-warn", **optional_secs, help="WARNING when the message is older than this")
    p.add_argument("--age-critical", **optional_secs, help="CRITICAL when the message is older than this")
    p.add_argument("--content", default=".", metavar="REGEX",
                   help="CRITICAL unless the body contains a match of this regular expression")
    p.add_argument("--body-timestamp", action="store_true",
                   help="the body is a Unix time in seconds: the message's age is taken from it")

    p = add_kind("kv", "a key-value bucket: it exists, a key has a value, how many values")
    p.add_argument("--bucket", required=True, help="the bucket to check")
    p.add_argument("--key", default=None, help="CRITICAL unless this key has a value (not deleted or purged)")
    p.add_argument("--values-warn", type=int, default=-1, metavar="N",
                   help="WARNING with N values or more (N or fewer when below --values-critical); -1: off")
    p.add_argument("--values-critical", type=int, default=-1, metavar="N",
                   help="CRITICAL with N values or more (N or fewer when below --values-warn); -1: off")

    p = add_kind("request", "a request-reply service: it answers, in time, with the body and headers expected")
    p.add_argument("--subject", required=True, help="the subject to send the request to")
    p.add_argument("--payload", default="", help="the request's body")
    p.add_argument("--headers", type=_header, action=_HeaderMap, default=None, metavar="KEY=VALUE",
                   help="a header of the request (repeatable; KEY:VALUE too)")
    p.add_argument("--match-payload", default=None, metavar="REGEX",
                   help="CRITICAL unless the reply's body contains a match of this regular expression")
    p.add_argument("--match-headers", type=_header, action=_HeaderMap, default=None, metavar="KEY=VALUE",
                   help="CRITICAL unless the reply has this header with this value (repeatable)")
    p.add_argument("--response-warn", **optional_secs, help="WARNING when the answer takes longer")
    p.add_argument("--response-critical", **optional_secs, help="CRITICAL when the answer takes longer")

    p = add_kind("credential", "a credentials file's or JWT's expiry (offline: reads only the file)")
    p.add_argument("--credential", required=True, metavar="FILE", help="the .creds file (or a file with a JWT)")
    p.add_argument("--validity-warn", **optional_secs, help="WARNING when it expires within this")
    p.add_argument("--validity-critical", **optional_secs, help="CRITICAL when it expires within this")
    p.add_argument("--require-expiry", action=argparse.BooleanOptionalAction, default=True,
                   help="CRITICAL when it never expires (default; --no-require-expiry allows it)")


def register(sub: Any) -> None:
    """Add ``server`` (and its ``ls``, ``info``, ``check``) to the command line's subcommands."""
    from . import positive_int

    p = sub.add_parser("server", help="run an embedded nats-server until Ctrl-C; ls, info, check running ones",
                       description="Without a subcommand: run an embedded nats-server until Ctrl-C.")
    p.add_argument("--port", type=int, default=4222, help="the port to listen on (default 4222)")
    p.add_argument("--no-jetstream", action="store_true", help="run without JetStream")
    p.add_argument("--store-dir", metavar="DIR",
                   help="keep JetStream data in DIR (default: a temporary directory, deleted on exit)")
    p.set_defaults(func=cmd_server)
    actions = p.add_subparsers(dest="server_action", metavar="{ls,info,check}")

    q = actions.add_parser("ls", help="list every server of the cluster (system account)")
    q.add_argument("--expect", type=positive_int, default=None, metavar="N",
                   help="wait for N servers; exit 1 when fewer answer")
    q.set_defaults(func=cmd_ls)

    q = actions.add_parser("info", help="one server's state and configuration (system account)")
    q.add_argument("target", nargs="?", default=None, metavar="SERVER",
                   help="the server's name or id (default: the one connected to)")
    q.set_defaults(func=cmd_info)

    q = actions.add_parser("check", help="a health check as the nats CLI's: Nagios, JSON or Prometheus output",
                           description="A health check, as the nats CLI's 'server check': one Nagios line "
                                       "that starts with the status word (or JSON, Prometheus text: "
                                       "--format), and the Nagios exit code (0 OK, 1 WARNING, 2 CRITICAL, "
                                       "3 UNKNOWN; 0 in Prometheus format); a usage error is UNKNOWN too.",
                           nagios=True)
    _register_checks(q)
