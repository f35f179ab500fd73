"""The NATS client: connect, publish, subscribe, request, flush, drain, close.

:class:`Client` is a facade over the core in :mod:`natsjs_sync._core` (see
its :mod:`~natsjs_sync._core.connection` module for the threads and locks).
Life cycle: CONNECTED -> (socket lost) RECONNECTING -> CONNECTED ... -> CLOSED.
While reconnecting, publishes wait in the write buffer, bounded by
``pending_size``; on reconnect the subscriptions are restored first and the
buffer is sent after them. After ``os.fork()`` the child's copy of a client
drops everything it inherited and connects afresh on first use.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._core import spi
from ._core.connection import Connection, Stats, as_payload
from ._core.options import (
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    ConnectOptions,
    ErrorCallback,
    EventCallback,
    check_callback,
)
from ._core.writer import FLUSH_THRESHOLD
from ._timeout import USE_DEFAULT, Deadline, TimeoutArg
from .msg import Msg
from .protocol.connection import ConnState
from .protocol.headers import HeadersInput
from .protocol.subjects import publish_subject, validate_subscribe_subject
from .subscription import MsgHandler, Subscription

if TYPE_CHECKING:
    from .jetstream import JetStream

__all__ = ["Client", "Stats", "check_callback", "connect"]

_CONNECTED = ConnState.CONNECTED


class Client:
    """A connection to NATS (and its reconnects). Thread-safe: share one per process.

    Make one with :func:`natsjs_sync.connect`. Used as a context manager it
    closes at the end of the block.
    """

    def __init__(self, options: ConnectOptions):
        self._conn = Connection(options)
        self._options = options
        self.name = options.name
        spi.register(self, self._conn)

    # ------------------------------------------------------------------ properties

    @property
    def is_connected(self) -> bool:
        """True while connected (also while draining)."""
        return self._conn.is_connected

    @property
    def is_reconnecting(self) -> bool:
        return self._conn.state is ConnState.RECONNECTING

    @property
    def is_closed(self) -> bool:
        return self._conn.state is ConnState.CLOSED

    @property
    def is_draining(self) -> bool:
        return self._conn.state in (ConnState.DRAINING_SUBS, ConnState.DRAINING_PUBS)

    @property
    def connected_url(self) -> str | None:
        """The URL (without credentials) of the server we are connected to."""
        addr = self._conn.addr
        return addr.url if addr is not None and self.is_connected else None

    @property
    def servers(self) -> list[str]:
        """The URLs of the server pool, discovered servers included."""
        return [a.url for a in self._conn.pool.addresses]

    @property
    def discovered_servers(self) -> list[str]:
        """The URLs of servers the cluster announced (not given to :func:`connect`)."""
        return [a.url for a in self._conn.pool.addresses if a.discovered]

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's INFO, as a dict."""
        return self._conn.server_info

    @property
    def max_payload(self) -> int:
        """The largest message (headers plus data) the server accepts."""
        return self._conn.max_payload

    @property
    def client_id(self) -> int | None:
        """The id the server gave this connection."""
        return self._conn.info.get("client_id")

    @property
    def last_error(self) -> Exception | None:
        """The last asynchronous error (server -ERR, slow consumer, lost connection)."""
        return self._conn.last_error

    @property
    def pending_data_size(self) -> int:
        """Bytes in the write buffer (held there while reconnecting)."""
        return len(self._conn.writer.buffer)

    @property
    def stats(self) -> Stats:
        """Message and byte counters, reconnects and errors received."""
        return self._conn.stats

    def new_inbox(self) -> str:
        """A new unique inbox subject under this client's inbox prefix."""
        return self._conn.new_inbox()

    # ------------------------------------------------------------------ publishing

    def publish(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Publish a message. Returns once it is in the write buffer.

        Small publishes are coalesced: a flusher thread sends the buffer, so a
        loop of publishes costs a few large writes. Use :meth:`flush` to know the
        server has them. While reconnecting, messages wait in the buffer (up to
        ``pending_size`` bytes) and are sent after the subscriptions are restored.

        Args:
            subject: where to publish (no wildcards).
            payload: the data, any bytes-like object (its size in bytes is sent).
            reply: an optional reply subject.
            headers: an optional mapping of header key to a value or list of values.

        Raises:
            BadSubjectError: invalid subject or reply subject (or too long for the server).
            BadHeaderError: a header key or value that cannot be sent.
            MaxPayloadError: headers plus payload exceed the server's max_payload.
            TypeError: payload is not bytes-like.
            OutboundBufferLimitError: reconnecting and the buffer is full.
            ConnectionClosedError: the client is closed.
        """
        conn = self._conn
        if headers is not None or reply is not None:
            conn.publish(subject, payload, reply, headers)
            return
        # The hot path, kept inline: one format, one lock, one append.
        subj = publish_subject(subject)
        if payload.__class__ is bytes:
            size = len(payload)
        else:
            payload, size = as_payload(payload)
        if size > conn.max_payload:
            raise conn.too_big(size)
        frame = b"PUB %b %d\r\n%b\r\n" % (subj, size, payload)  # type: ignore[str-format]
        machine = conn.machine
        if machine.state is not _CONNECTED:
            conn.ready()
        writer = conn.writer
        with conn.lock:
            if machine.state is not _CONNECTED:
                conn.check_writable(len(frame))
            buffer = writer.buffer
            buffer += frame
            stats = conn.stats
            stats.out_msgs += 1
            stats.out_bytes += size
            if len(buffer) <= FLUSH_THRESHOLD:
                if not writer.flush_requested:
                    writer.flush_requested = True
                    writer.cond.notify()
                return
        writer.send_now()

    def publish_now(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Like :meth:`publish`, but send the buffer from this thread before returning.

        For latency-bound single messages (replies, requests): it skips the hop
        to the flusher thread. In a loop, prefer :meth:`publish`.
        """
        self._conn.publish_now(subject, payload, reply, headers)

    # ------------------------------------------------------------------ subscribing

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: MsgHandler | None = None,
        *,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Subscription:
        """Express interest in ``subject`` (wildcards allowed).

        Subscriptions survive reconnects: they are restored (with what remains
        of ``max_msgs``) before anything buffered is sent.

        Args:
            subject: the subject, e.g. ``"orders.*"`` or ``"orders.>"``.
            queue: join this queue group: each message goes to one member.
            cb: call ``cb(msg)`` for every message, in order, on the client's
                dispatcher threads; without it, read with
                :meth:`Subscription.next_msg` or iterate.
            max_msgs: unsubscribe automatically after this many messages.
            pending_msgs_limit: messages held before dropping (slow consumer);
                ``0`` or negative: no limit.
            pending_bytes_limit: payload bytes held before dropping; ``0`` or negative: no limit.

        Raises:
            BadSubjectError: invalid subject or queue.
            TypeError: ``cb`` is not a plain function (an ``async def`` is refused).
            ConnectionClosedError: the client is closed or draining.
        """
        validate_subscribe_subject(subject, queue)
        check_callback(cb)
        return self._conn.subscribe(subject, queue, cb, max_msgs=max_msgs, pending_msgs_limit=pending_msgs_limit,
                                    pending_bytes_limit=pending_bytes_limit)

    # ------------------------------------------------------------------ request, flush

    def request(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        timeout: TimeoutArg = 1.0,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """Publish a request and wait for the first reply.

        A request made while reconnecting waits in the buffer and goes out after
        the reconnect, within ``timeout``. A request already sent when the
        connection breaks fails at once: its reply may be lost.

        Args:
            timeout: seconds to wait for the reply (``None``: for ever).

        Raises:
            NoRespondersError: nobody is subscribed to ``subject``.
            TimeoutError: no reply within ``timeout`` seconds.
            NatsConnectionError: the connection broke while waiting.
            ConnectionClosedError: the client closed while waiting.
            ValueError, TypeError: a bad ``timeout`` (nothing is sent).
        """
        return self._conn.request(subject, payload, Deadline.of(timeout, 1.0), headers)

    def flush(self, timeout: TimeoutArg = 10.0) -> None:
        """Send everything buffered and wait until the server has processed it.

        While reconnecting, this waits (within ``timeout``) for the reconnect and
        for the server to confirm what was buffered.

        Raises:
            TimeoutError: no PONG within ``timeout`` seconds.
            NatsConnectionError: the connection broke after the PING was sent.
            ConnectionClosedError: the client is closed.
        """
        self._conn.flush(Deadline.of(timeout, 10.0))

    def rtt(self, timeout: TimeoutArg = 10.0) -> float:
        """The round-trip time to the server, in seconds."""
        start = time.perf_counter()
        self.flush(timeout)
        return time.perf_counter() - start

    # ------------------------------------------------------------------ drain, close

    def drain(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Stop taking messages, let every subscription finish its queue, flush, close.

        Called from a callback of this client (where waiting would wait for
        that very callback), the drain goes on in the background and this
        returns at once; a drain failure then goes to ``error_cb``.

        Raises:
            TimeoutError: draining took longer than ``timeout`` (default: the
                ``drain_timeout`` of :func:`connect`); the client is closed anyway.
        """
        self._conn.drain(Deadline.of(timeout, self._options.drain_timeout))

    def close(self) -> None:
        """Flush what is buffered (best effort, at most a second) and close. Wakes every waiter.

        Waiting calls (request, flush, next_msg) raise ConnectionClosedError.
        Safe to call more than once and from any thread, callbacks included;
        returns promptly even when the server has stopped reading.
        """
        self._conn.close(flush=True)

    def jetstream(
        self,
        domain: str | None = None,
        api_prefix: str = "$JS.API",
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 5.0,
    ) -> JetStream:
        """A JetStream context on this connection (cheap: it owns no thread or subscription).

        Args:
            domain: the JetStream domain (changes the API prefix to ``$JS.<domain>.API``).
            api_prefix: a custom API prefix (for imported JetStream APIs).
            timeout: default seconds for every JetStream API call and sync publish.
            publish_async_max_pending: async publishes in flight before
                ``publish_async`` blocks.
            publish_async_stall_wait: how long ``publish_async`` blocks on a
                full window before it raises TimeoutError.
        """
        from .jetstream import JetStream

        return JetStream(self, domain=domain, api_prefix=api_prefix, timeout=timeout,
                         publish_async_max_pending=publish_async_max_pending,
                         publish_async_stall_wait=publish_async_stall_wait)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        parts = ["<natsjs_sync.Client", self.name or "", self._conn.state.value, self.connected_url or ""]
        return " ".join(p for p in parts if p) + ">"


def connect(
    servers: str | Sequence[str] | None = None,
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | Callable[[], str] | None = None,
    nkeys_seed: str | None = None,
    user_credentials: str | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[str], bytes | str] | None = None,
    token_cb: Callable[[], str] | None = None,
    user_info_cb: Callable[[], tuple[str, str]] | None = None,
    tls: ssl.SSLContext | bool | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    connect_timeout: float = 2.0,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_time_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_jitter_tls: float = 1.0,
    retry_on_failed_connect: bool = False,
    no_randomize: bool = False,
    pending_size: int = 2 * 1024 * 1024,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    write_timeout: float | None = 60.0,
    no_echo: bool = False,
    verbose: bool = False,
    pedantic: bool = False,
    inbox_prefix: str = "_INBOX",
    drain_timeout: float | None = 30.0,
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
    max_callback_threads: int = 64,
    error_cb: ErrorCallback | None = None,
    disconnected_cb: EventCallback | None = None,
    reconnected_cb: EventCallback | None = None,
    closed_cb: EventCallback | None = None,
    discovered_server_cb: EventCallback | None = None,
    lame_duck_mode_cb: EventCallback | None = None,
) -> Client:
    """Connect to a NATS server and return a :class:`Client`.

    Args:
        servers: a URL, a comma-separated list or a sequence of URLs
            (``nats://[user:pass@]host:port``, ``tls://host:port``); default: the
            ``NATS_URL`` environment variable, else ``nats://127.0.0.1:4222``.
        name: a client name shown in the server's monitoring and thread names.
        user, password, token: credentials (URL credentials win). ``token`` may
            be a callable, asked at every (re)connect.
        nkeys_seed: a user nkey seed (``SU...``) or the path of a file holding it.
        user_credentials: the path of a ``.creds`` file (user JWT plus seed).
        user_jwt_cb, signature_cb: dynamic JWT credentials: the JWT, and the
            signature of the server's nonce (bytes, or base64url text).
        token_cb, user_info_cb: dynamic token, or ``(user, password)``, asked
            for at every (re)connect.
        tls: ``True`` or an :class:`ssl.SSLContext` to use TLS; ``False`` to
            refuse it (SecureConnRequiredError when the server requires it);
            ``None`` uses TLS for ``tls://`` URLs and servers that require it.
        tls_hostname: the name the server's certificate is checked against
            (default: the host of its URL).
        tls_handshake_first: start with the TLS handshake, before the server's INFO.
        connect_timeout: seconds for TCP connect plus handshake, per server.
        allow_reconnect: reconnect when the connection breaks (else close).
        max_reconnect_attempts: failed attempts in a row before a server is
            dropped from the pool (negative: never).
        reconnect_time_wait: seconds between attempts on the same server.
        reconnect_jitter, reconnect_jitter_tls: random extra wait, up to this.
        retry_on_failed_connect: when no server answers the first time, return
            a client that keeps trying in the background under the reconnect
            settings (publishes wait in the buffer; requests and flush wait
            within their timeouts), instead of raising NoServersError.
        no_randomize: keep the server order instead of shuffling it.
        pending_size: bytes buffered while reconnecting; more raises
            OutboundBufferLimitError.
        ping_interval: seconds between keep-alive PINGs (``0`` turns them off).
        max_outstanding_pings: unanswered PINGs after which the connection is stale.
        write_timeout: seconds a write may wait for a server that does not read
            (``None``: for ever); then the connection is lost and reconnects.
        no_echo: do not receive our own publishes.
        verbose: ask the server to acknowledge every command with ``+OK``
            (debugging only; the client ignores the acknowledgements).
        pedantic: ask the server for strict protocol checking (debugging only).
        inbox_prefix: prefix of reply inboxes.
        drain_timeout: default seconds for :meth:`Client.drain`.
        pending_msgs_limit, pending_bytes_limit: default slow-consumer limits per
            subscription (``0`` or negative: no limit).
        max_callback_threads: the most threads running callbacks at once.
        error_cb: called with asynchronous errors (server -ERR, slow consumers,
            lost connections, exceptions from subscription callbacks).
        disconnected_cb, reconnected_cb, closed_cb: connection events.
        discovered_server_cb: called when the server announces new cluster members.
        lame_duck_mode_cb: called when the server enters lame duck mode.

    Every callback runs on the client's dispatcher, never on the reader thread;
    connection callbacks run in order.

    Raises:
        NoServersError: no server could be reached (the causes are in the message).
        AuthorizationError: the server refused the credentials.
        SecureConnRequiredError: the server requires TLS and ``tls=False``.
        TypeError, ValueError: a bad argument (named in the message).
    """
    args = dict(locals())
    client = Client(ConnectOptions.build(args.pop("servers"), **args))
    client._conn.start()
    return client
