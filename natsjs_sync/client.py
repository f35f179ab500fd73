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

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._core import spi
from ._core.connection import Connection
from ._core.options import (
    ConnectOptions,
    check_callback,
)
from ._core.pool import parse_server_url
from ._core.stats import Stats
from ._timeout import USE_DEFAULT, Deadline, TimeoutArg
from .errors import ConnectionClosedError
from .msg import Msg
from .protocol.connection import ConnState
from .protocol.headers import HeadersInput, encode_headers
from .protocol.subjects import validate_subscribe_subject
from .subscription import MsgHandler, Subscription

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .codecs import Codec, TypedSubject
    from .jetstream import JetStream
    from .request_many import ReplyIterator

__all__ = ["Client", "Stats", "check_callback"]


class Client:
    """A connection to NATS (and its reconnects). Thread-safe: share one per process.

    Make one with :func:`natsjs_sync.connect`. Used as a context manager it
    closes at the end of the block.
    """

    def __init__(self, options: ConnectOptions):
        self._conn = Connection(options)
        self._outlet = self._conn.writer.outlet
        self._options = options
        self.name = options.name
        spi.register(self, self._conn)

    def _start(self, deadline: Deadline | None = None) -> None:
        """Connect (the first time, within ``deadline`` as a whole if given); see :func:`natsjs_sync.connect`."""
        self._conn.start(deadline)

    # ------------------------------------------------------------------ properties

    @property
    def is_connected(self) -> bool:
        """True while connected (also while draining)."""
        return self._conn.is_connected

    @property
    def is_reconnecting(self) -> bool:
        """True while the connection is lost and the client is trying servers again."""
        return self._conn.state is ConnState.RECONNECTING

    @property
    def is_closed(self) -> bool:
        """True once the client is closed (by :meth:`close`, a drain or running out of reconnects); it cannot be reused.
        """
        return self._conn.state is ConnState.CLOSED

    @property
    def is_draining(self) -> bool:
        """True while :meth:`drain` runs (subscriptions first, then pending publishes)."""
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

    def set_server_pool(self, servers: Sequence[str]) -> None:
        """Replace the server pool; the next reconnect chooses from the new one.

        The connection in use stays (it is not moved to a server of the new
        pool); a server that was in the old pool keeps its count of failed
        attempts. The pool is shuffled unless ``no_randomize``, and servers the
        cluster announces keep joining it. An empty pool closes the client at
        the next disconnect (no server left to reconnect to).

        Args:
            servers: server URLs, as :func:`connect` takes them in a list.

        Raises:
            ConnectionClosedError: the client is closed.
            InvalidServerUrlError: a URL that is no NATS URL (nothing is changed then).
            TypeError: ``servers`` is a single ``str`` rather than a list of them.
        """
        if isinstance(servers, str):
            raise TypeError("set_server_pool takes a list of server URLs, not one str")
        if self.is_closed:
            raise ConnectionClosedError("the connection is closed")
        addrs = [parse_server_url(url) for url in servers]  # all checked before anything changes
        self._conn.pool.replace(addrs)

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
        loop of publishes costs a few large writes. A publish that takes the
        buffer past ``pending_size`` (or 1 MiB, whichever is less) sends it from
        this thread before returning. Use :meth:`flush` to know the
        server has them. While reconnecting, messages wait in the buffer (up to
        ``pending_size`` bytes) and are sent after the subscriptions are restored.

        Args:
            subject: where to publish (no wildcards).
            payload: the data, any bytes-like object (its size in bytes is sent).
            reply: an optional reply subject (``None`` or ``""``: none, as nats-py's default ``""``).
            headers: an optional mapping of header key to a value or list of values.

        Raises:
            BadSubjectError: invalid subject or reply subject (or too long for the server).
            BadHeaderError: a header key or value that cannot be sent.
            MaxPayloadError: headers plus payload exceed the server's max_payload.
            TypeError: payload is not bytes-like.
            OutboundBufferLimitError: reconnecting and the buffer is full.
            ConnectionClosedError: the client is closed.
        """
        if not reply:
            if headers is None:
                if self._outlet(subject, payload):
                    return  # the common case in one call (compiled where built; see _core/outlet.py)
            elif payload.__class__ is bytes:
                # With headers, the same call lays out the HPUB frame around their block
                # (encoded once per distinct set of str pairs, see encode_headers).
                try:
                    block = encode_headers(headers)
                except Exception:  # the general path raises it (after checking the subject)
                    pass
                else:
                    if self._outlet(subject, payload, block):
                        return
        self._conn.publish(subject, payload, reply, headers)

    def publish_now(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        reply: str | None = None,
        headers: HeadersInput | None = None,
    ) -> None:
        """Like :meth:`publish`, but send the buffer from this thread before returning.

        For latency-bound single messages (replies, requests): it skips the hop
        to the flusher thread. In a loop, prefer :meth:`publish`. It waits for
        the socket as the flusher would, up to ``write_timeout``; called from a
        thread that must not wait on the socket (inside the client's own reader
        or timer), it leaves the sending to the flusher and returns at once.
        While reconnecting, the message waits in the buffer as with :meth:`publish`.

        Args:
            subject: where to publish (no wildcards).
            payload: the data, any bytes-like object.
            reply: an optional reply subject (``None`` or ``""``: none).
            headers: an optional mapping of header key to a value or list of values.

        Raises:
            BadSubjectError, BadHeaderError, MaxPayloadError, TypeError,
                OutboundBufferLimitError, ConnectionClosedError: as :meth:`publish`.
            TimeoutError: the server did not take the bytes within
                ``write_timeout``: the connection is dropped (and reconnected
                when allowed) and this message is lost with it.
            NatsConnectionError: the write that carried this message failed:
                it is lost with the connection, which is being replaced.
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
        return self._conn.request(subject, payload, timeout, headers)  # it makes the deadline first

    def typed(self, subject: str, type_: type[_T], codec: Codec | None = None,
              reply_type: Any = Any) -> TypedSubject[_T]:
        """A typed view of ``subject``: publish values, request, subscribe to decoded messages.

        ``nc.typed("orders.new", Order).publish(order)``. The untyped calls
        are unchanged (and no slower). See :doc:`codecs`.

        Args:
            type_: the type of the values (a msgspec Struct, dataclass, TypedDict,
                plain type or pydantic model).
            codec: the encoding (default :data:`~natsjs_sync.codecs.JSON`).
            reply_type: what :meth:`TypedSubject.request <natsjs_sync.codecs.TypedSubject.request>`
                decodes replies to.
        """
        from .codecs.typed import TypedSubject

        return TypedSubject(self, subject, type_, codec, reply_type)

    def flush(self, timeout: TimeoutArg = 10.0) -> None:
        """Send everything buffered and wait until the server has processed it.

        While reconnecting, this waits (within ``timeout``) for the reconnect and
        for the server to confirm what was buffered.

        A flush that returns vouches for every message published before it. When a
        connection is lost with messages written to it and not yet confirmed (by a
        PONG, or a reply to a later request), they may never have arrived: every
        flush asked for until one has said so then raises instead, those made during
        the outage included. Publish again what must arrive (or use JetStream, whose
        acks say what was stored); the next flush vouches again.

        Raises:
            TimeoutError: no PONG within ``timeout`` seconds.
            NatsConnectionError: the connection broke after the PING was sent, or
                messages published before this flush may have been lost with a
                connection ("may not have arrived").
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

        First every JetStream ``consume()``/``messages()`` stops pulling and
        each ``consume()`` handler takes what was delivered, while its acks
        still go out; then the subscriptions drain.

        Called from a callback of this client (where waiting would wait for
        that very callback), the drain goes on in the background and this
        returns at once; a drain failure then goes to ``error_cb``. When its
        flush says an earlier outage may have swallowed publishes (see
        :meth:`flush`), that goes to ``error_cb`` too and the drain goes on.

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
        publish_async_timeout: float | None = None,
        publish_async_error_cb: Callable[[Msg, Exception], object] | None = None,
    ) -> JetStream:
        """A JetStream context on this connection (cheap: it owns no thread or subscription).

        Args:
            domain: the JetStream domain (changes the API prefix to ``$JS.<domain>.API``).
            api_prefix: a custom API prefix (for imported JetStream APIs). When neither
                is given (``api_prefix`` left at ``$JS.API``), those of the connection's
                NATS context (``connect(context=)``); ``domain=""`` is the local API.
            timeout: default seconds for every JetStream API call and sync publish.
            publish_async_max_pending: async publishes in flight before
                ``publish_async`` blocks.
            publish_async_stall_wait: how long ``publish_async`` blocks on a
                full window before it raises TimeoutError.
            publish_async_timeout: seconds an async publish waits for its PubAck
                (default: ``timeout``).
            publish_async_error_cb: ``cb(msg, exc)`` for every async publish of
                this context that fails (refused, or no PubAck in time), on the
                client's dispatcher; ``msg`` is what was published, to publish again.
        """
        from .jetstream import JetStream

        if domain is None and api_prefix == "$JS.API":  # neither given: the connection's context decides
            domain = self._options.jetstream_domain
            api_prefix = self._options.jetstream_api_prefix or api_prefix
        return JetStream(self, domain=domain, api_prefix=api_prefix, timeout=timeout,
                         publish_async_max_pending=publish_async_max_pending,
                         publish_async_stall_wait=publish_async_stall_wait,
                         publish_async_timeout=publish_async_timeout,
                         publish_async_error_cb=publish_async_error_cb)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        parts = ["<natsjs_sync.Client", self.name or "", self._conn.state.value, self.connected_url or ""]
        return " ".join(p for p in parts if p) + ">"

    def request_many(
        self,
        subject: str,
        payload: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersInput | None = None,
        timeout: TimeoutArg = USE_DEFAULT,
        max_messages: int | None = None,
        stall: float | None = None,
        sentinel: bool | Callable[[Msg], bool] | None = None,
    ) -> ReplyIterator:
        """Send a request and iterate over every reply (scatter-gather, streamed answers).

        The replies end on ``max_messages``, the total ``timeout`` (default 1 s),
        a ``stall`` between replies, or a sentinel reply (``sentinel=True``: an
        empty payload). Returns a :class:`natsjs_sync.request_many.ReplyIterator`
        (also a context manager with ``close()``); see
        :func:`natsjs_sync.request_many.request_many` for every argument.

        Raises:
            BadSubjectError, BadHeaderError, MaxPayloadError, TypeError, ValueError:
                invalid arguments, before anything is sent.
            NoRespondersError: while iterating, nobody was subscribed to ``subject``.
            ConnectionClosedError: the client is closed.
        """
        from .request_many import request_many

        return request_many(self, subject, payload, headers=headers, timeout=timeout,
                            max_messages=max_messages, stall=stall, sentinel=sentinel)


def __getattr__(name: str) -> Any:
    # ``natsjs_sync.client.connect`` keeps working; the function lives in ``_connect``.
    if name == "connect":
        from ._connect import connect

        return connect
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
