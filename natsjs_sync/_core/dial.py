"""How a connected socket to a server is made: directly (from a chosen local
address), through a SOCKS5 proxy, or by the user's own dialer.

The connect timeout bounds all of it, the proxy's handshake included. Every
``OSError`` becomes a natsjs_sync error here, with ``raise ... from exc``.

A custom dialer is user code that may ignore the seconds it is given, and a
Python thread cannot be stopped from outside. So each call runs on a daemon
thread of its own (``natsjs-dialer-<client name>``) and the connect waits for it
only until its deadline. A call still running then is abandoned, with a warning
logged: it goes on until the dialer returns; a socket it returns later is closed,
an exception it raises is logged. The next attempt to the same server with the
same dialer adopts an abandoned call instead of calling the dialer again, so a
dialer that hangs holds at most one thread per server and connecting client.
"""

from __future__ import annotations

import builtins
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from .._timeout import Deadline
from ..errors import NatsConnectionError, TimeoutError
from ..protocol.socks5 import Socks5Handshake
from . import fork

log = logging.getLogger("natsjs_sync.connection")

#: A custom dialer: given the server's host, port and the seconds left of the
#: connect timeout (``None``: no limit), returns a connected socket (blocking mode).
Dialer = Callable[[str, int, "float | None"], socket.socket]


@dataclass(frozen=True)
class SocksProxy:
    """A SOCKS5 proxy: ``socks5://[user:password@]host[:port]`` (port 1080 by default)."""

    host: str
    port: int = 1080
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> SocksProxy:
        """Read a proxy URL: ``socks5://`` or ``socks5h://`` (the name is resolved by the
        proxy either way), or a bare ``host:port`` as the nats CLI allows.

        Raises:
            TypeError: not a str.
            ValueError: another scheme, no host, a bad port, or a user name without a
                password (the message never quotes the password).
        """
        if not isinstance(url, str):
            raise TypeError(f"socks_proxy must be a str such as 'socks5://host:1080', not {type(url).__name__}")
        text = url.strip()
        if "://" not in text:
            text = "socks5://" + text
        parts = urlsplit(text)
        if parts.scheme.lower() not in ("socks5", "socks5h"):
            raise ValueError(f"socks_proxy must be a socks5:// URL, not {parts.scheme}://")
        try:
            port = parts.port or 1080
        except ValueError:
            # Not quoting what was read as the port: with a '/', '?' or '#' in the password
            # (not percent-encoded), that is the password's start.
            raise ValueError("socks_proxy has a bad port (a password's '/', '?' or '#' must be "
                             "percent-encoded)") from None
        if not parts.hostname:
            raise ValueError("socks_proxy names no host")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("socks_proxy must be socks5://[user:password@]host[:port], with no path")
        username = unquote(parts.username) if parts.username is not None else None
        password = unquote(parts.password) if parts.password is not None else None
        if username is not None and password is None:
            raise ValueError("socks_proxy has a user name but no password (socks5://user:password@host:port)")
        if username is not None and password is not None:
            for text_, what in ((username, "user name"), (password, "password")):
                if not 1 <= len(text_.encode()) <= 255:
                    raise ValueError(f"socks_proxy's {what} must be 1 to 255 bytes long")
        return cls(parts.hostname, port, username, password)

    @property
    def url(self) -> str:
        """The proxy's URL, the password left out."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.username}:***@" if self.username is not None else ""
        return f"socks5://{user}{host}:{self.port}"


@dataclass(frozen=True)
class Network:
    """What stands between the client and its servers (all optional).

    ``ws_compression`` and ``ws_proxy_path`` apply to ``ws://``/``wss://`` servers only.
    """

    dialer: Dialer | None = None
    socks_proxy: SocksProxy | None = None
    source_address: tuple[str, int] | None = None
    ws_compression: bool = False
    ws_proxy_path: str | None = None
    #: The client's name, in the name of a custom dialer's thread.
    client_name: str = ""


#: No proxy, no dialer, no local address: a plain TCP connect.
DIRECT = Network()


def dial(host: str, port: int, url: str, deadline: Deadline, network: Network = DIRECT) -> socket.socket:
    """A connected TCP socket to ``host:port`` (``url`` names it in errors), Nagle off.

    Raises:
        TimeoutError: the connect (and the proxy's handshake) did not finish in time.
        NatsConnectionError: refused, unreachable, the proxy refused, or the dialer failed.
    """
    if network.dialer is not None:
        sock = _custom(network.dialer, host, port, url, deadline, network.client_name)
    elif network.socks_proxy is not None:
        sock = _through_socks(network.socks_proxy, host, port, url, deadline, network.source_address)
    else:
        sock = _tcp(host, port, url, deadline, network.source_address)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass  # a dialer's socket may be no TCP socket (a Unix socket to a local relay)
    return sock


def _tcp(host: str, port: int, url: str, deadline: Deadline, source: tuple[str, int] | None,
         what: str = "") -> socket.socket:
    try:
        return socket.create_connection((host, port), timeout=deadline.remaining(), source_address=source)
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {url}{what} timed out") from exc
    except OSError as exc:
        raise NatsConnectionError(f"cannot connect to {url}{what}: {exc.strerror or exc}") from exc


def _custom(dialer: Dialer, host: str, port: int, url: str, deadline: Deadline,
            client_name: str = "") -> socket.socket:
    sock: object
    try:
        if deadline.remaining() is None:  # no deadline to keep: no thread needed
            sock = dialer(host, port, None)
        else:
            sock = _DIALS.call(dialer, host, port, url, deadline, client_name)
    except (TimeoutError, NatsConnectionError):  # ours (TimeoutError is also the builtin one)
        raise
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {url} timed out (custom dialer)") from exc
    except Exception as exc:  # any failure of the user's dialer is a failed connect: the pool tries the next server
        raise NatsConnectionError(f"the custom dialer could not connect to {url}: {exc!r}") from exc
    return _checked(sock, url)


def _checked(sock: object, url: str) -> socket.socket:
    if not isinstance(sock, socket.socket):
        raise NatsConnectionError(f"the custom dialer returned {type(sock).__name__}, not a connected socket.socket")
    if sock.fileno() == -1:  # every later call on it raises a bare OSError (EBADF)
        raise NatsConnectionError(f"the custom dialer returned a closed socket for {url}")
    return sock


class _DialerCall:
    """One call of a custom dialer on a daemon thread of its own. Thread-safe: the
    registry's lock guards ``waited`` and the outcome."""

    def __init__(self, dialer: Dialer, host: str, port: int, seconds: float | None, client_name: str):
        self.dialer = dialer  # held: the registry's key is its id
        self.key = (id(dialer), host, port)
        self.done = threading.Event()
        self.waited = True  # a connect waits for the outcome (False: abandoned)
        self.result: object = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(host, port, seconds),
                                       name=f"natsjs-dialer-{client_name or 'client'}", daemon=True)

    def _run(self, host: str, port: int, seconds: float | None) -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = self.dialer(host, port, seconds)
        except BaseException as exc:  # handed to the connect that waits, or logged
            error = exc
        _DIALS.finished(self, result, error)


class _Dials:
    """The custom-dialer calls that connects wait for, and those abandoned at a deadline.
    Thread-safe (one lock); reset in a forked child, where none of their threads exist."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned: dict[tuple[int, str, int], list[_DialerCall]] = {}
        fork.track(self)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = {}

    def call(self, dialer: Dialer, host: str, port: int, url: str, deadline: Deadline,
             client_name: str) -> object:
        """What the dialer returns for ``host:port`` within ``deadline``: an abandoned call's
        outcome when one is running, else a new call's.

        Raises:
            TimeoutError: the call did not return in time (it is abandoned).
            Exception: what the dialer raised.
        """
        key = (id(dialer), host, port)
        with self._lock:
            calls = self._abandoned.get(key)
            adopted = calls.pop() if calls else None
            if calls == []:
                del self._abandoned[key]
            if adopted is not None:
                adopted.waited = True
        if adopted is None:
            call = _DialerCall(dialer, host, port, deadline.remaining(), client_name)
            call.thread.start()
        else:
            call = adopted
            log.debug("an earlier call of the custom dialer to %s still runs: waiting for it", url)
        try:
            call.done.wait(deadline.remaining())
        finally:
            with self._lock:
                finished = call.done.is_set()
                if not finished:
                    call.waited = False
                    self._abandoned.setdefault(key, []).append(call)
        if not finished:
            if adopted is None:  # said once a call: the attempts that adopt it fail the same way
                log.warning("the custom dialer did not return within the connect timeout for %s: its call goes on "
                            "in thread %s; a socket it returns later will be closed", url, call.thread.name)
            raise TimeoutError(f"connecting to {url} timed out: the custom dialer did not return in time")
        if call.error is not None:
            raise call.error
        return call.result

    def finished(self, call: _DialerCall, result: object, error: BaseException | None) -> None:
        """The dialer returned: hand the outcome to the connect that waits, or drop it."""
        with self._lock:
            call.result, call.error = result, error
            call.done.set()
            waited = call.waited
            if not waited:
                calls = self._abandoned.get(call.key, [])
                if call in calls:
                    calls.remove(call)
                if not calls:
                    self._abandoned.pop(call.key, None)
        if waited:
            return
        call.result = None
        if isinstance(result, socket.socket):
            result.close()
            log.info("closed the socket an abandoned custom dialer call returned late")
        elif error is not None:
            log.info("an abandoned custom dialer call failed late: %r", error)


_DIALS = _Dials()


def _through_socks(proxy: SocksProxy, host: str, port: int, url: str, deadline: Deadline,
                   source: tuple[str, int] | None) -> socket.socket:
    via = f" through the SOCKS5 proxy {proxy.url}"
    try:
        handshake = Socks5Handshake(host, port, proxy.username, proxy.password)
    except ValueError as exc:  # a host name SOCKS5 cannot carry (over 255 bytes): this server fails, not the connect
        raise NatsConnectionError(f"cannot connect to {url}{via}: {exc}") from exc
    sock = _tcp(proxy.host, proxy.port, url, deadline, source, via)
    try:
        out = handshake.start()
        while True:
            if out:
                sock.settimeout(deadline.remaining())
                sock.sendall(out)
            if handshake.done:
                break
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise builtins.TimeoutError
            sock.settimeout(remaining)
            data = sock.recv(handshake.needed)  # never past the reply: the server's INFO follows it
            if not data:
                raise NatsConnectionError("the proxy closed the connection during its handshake")
            out = handshake.receive(data)
        sock.settimeout(deadline.remaining())
        return sock
    except builtins.TimeoutError as exc:
        sock.close()
        raise TimeoutError(f"connecting to {url}{via} timed out during the proxy's handshake") from exc
    except NatsConnectionError as exc:
        sock.close()
        raise NatsConnectionError(f"cannot connect to {url}{via}: {exc}") from exc
    except OSError as exc:
        sock.close()
        raise NatsConnectionError(f"cannot connect to {url}{via}: {exc.strerror or exc}") from exc
    except BaseException:
        sock.close()
        raise
