"""Typed messages and typed views: values in, decoded values out, the untyped API unchanged.

A typed view wraps an object of the untyped API and adds a type and a codec:

- :class:`TypedSubject` (``nc.typed(subject, T)``, ``js.typed(subject, T)``):
  publish values, request with a value and get a decoded reply, subscribe to
  decoded messages.
- :class:`TypedReader` (``sub.typed(T)``, ``consumer.typed(T)``): every way of
  reading messages (``next_msg``/``next``, iteration, ``fetch``, ``messages``,
  ``consume``) yields :class:`TypedMsg` instead of :class:`~natsjs_sync.Msg`.
- :class:`TypedKeyValue` (``kv.typed(T)``) and :class:`TypedObjectStore`
  (``obs.typed(T)``).

The views add one decode (or encode) per message and nothing to the untyped
calls: nothing here is imported by the publish or delivery paths.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import spi
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg, resolve
from ..errors import PayloadDecodeError, ProtocolError, TimeoutError
from ..protocol import _compiled
from ..protocol.headers import Headers, HeadersInput, encode_headers
from ..protocol.jetstream.ackreply import MsgMetadata
from ..protocol.subjects import publish_subject
from .base import Codec, codec_for, codec_of_block, content_type_of, unknown_content_type
from .msgspec_codecs import JSON

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.context import JetStream
    from ..jetstream.kv import Entry, KeyValue, KeyValueOp
    from ..jetstream.object_models import ObjectInfo, ObjectMeta
    from ..jetstream.object_store import ObjectStore
    from ..msg import Msg
    from ..subscription import Subscription

T = TypeVar("T")
R = TypeVar("R")

#: ``on_decode_error(msg, error)``: where a message that does not decode goes
#: instead of failing the loop (a dead-letter path: log it, ``msg.term()`` it,
#: publish it elsewhere). The message is not acknowledged for you.
DecodeErrorHandler = Callable[["Msg", PayloadDecodeError], None]


def pick_codec(raw_headers: bytes | None, headers: Any, codec: Codec | None, type_: object) -> Codec:
    """The codec a payload is read with: its ``content-type`` header's, else ``codec``, else JSON.

    Args:
        raw_headers: the header block as received (recognised without parsing
            when it is exactly one a codec writes).
        headers: a callable returning the parsed headers (asked only when needed).
        codec: the caller's codec, for payloads without the header (and used as
            well when it claims the header's content type).

    Raises:
        PayloadDecodeError: a content type no registered codec reads.
    """
    if raw_headers is None:
        return codec or JSON
    known = codec_of_block(raw_headers)
    if known is not None:
        if codec is not None and codec.content_type == known.content_type:
            return codec
        return known
    try:
        parsed = headers()
    except ProtocolError as exc:
        # Any publisher's header block reaches the reader as it was sent: one that
        # does not parse leaves the payload's format unknown, a message that does not decode.
        raise PayloadDecodeError(f"the header block does not parse ({exc})", type=type_) from None
    ct = content_type_of(parsed)
    if ct is None:
        return codec or JSON
    if codec is not None and codec_claims(codec, ct):
        return codec
    found = codec_for(ct)
    if found is None:
        raise unknown_content_type(ct, type_)
    return found


def codec_claims(codec: Codec, content_type: str) -> bool:
    """``codec`` writes or reads ``content_type`` (parameters ignored)."""
    ct = content_type.split(";", 1)[0].strip().lower()
    return ct == codec.content_type.lower() or ct in (a.lower() for a in codec.aliases)


def codec_decode(codec: Codec, data: Any, type_: type[T]) -> T:
    """``codec.decode(data, type_)``, with what a codec of the user's raises for bad
    input (a ``ValueError``, or a ``RecursionError`` of a parser at its nesting
    limit) turned into the :class:`~natsjs_sync.errors.PayloadDecodeError` every
    reader expects: a dead-letter callback gets it, a loop goes on.
    """
    try:
        return codec.decode(data, type_)
    except PayloadDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise PayloadDecodeError(str(exc) or type(exc).__name__, type=type_,
                                 content_type=codec.content_type) from exc


def decode_msg(msg: Msg, type_: type[T], codec: Codec | None = None) -> T:
    """The payload of ``msg`` as a ``type_`` (what :meth:`Msg.decode <natsjs_sync.Msg.decode>` does).

    Raises:
        PayloadDecodeError: the payload does not decode; it names the subject,
            the stream sequence of a JetStream message, the type and the field.
    """
    try:
        chosen = pick_codec(msg.raw_headers, lambda: msg.headers, codec, type_)
        return codec_decode(chosen, msg.data, type_)
    except PayloadDecodeError as exc:
        raise _located(exc, msg.subject, _stream_sequence(msg.reply)) from None


def _stream_sequence(reply: str | None) -> int | None:
    if not reply or not reply.startswith("$JS.ACK."):
        return None
    from ..errors import NotJSMessageError
    from ..protocol.jetstream.ackreply import parse_metadata

    try:
        return parse_metadata(reply).sequence.stream
    except NotJSMessageError:
        return None


def _located(exc: PayloadDecodeError, subject: str, sequence: int | None) -> PayloadDecodeError:
    return PayloadDecodeError(exc.reason, type=exc.type, field=exc.field, content_type=exc.content_type,
                              subject=subject, stream_sequence=sequence)


class TypedMsg(Generic[T]):
    """A received message and its decoded :attr:`value`. Safe to pass between threads.

    Acknowledgements and the metadata are those of the message (:attr:`msg`);
    :meth:`respond` answers with a value, encoded by the codec the message was read with.

    Attributes:
        value: the decoded payload.
        msg: the message as received (:class:`~natsjs_sync.Msg`).
        codec: the codec it was decoded with (replies use it too).
    """

    __slots__ = ("codec", "msg", "value")

    def __init__(self, msg: Msg, value: T, codec: Codec):
        self.msg = msg
        self.value = value
        self.codec = codec

    @property
    def subject(self) -> str:
        """The message's subject."""
        return self.msg.subject

    @property
    def reply(self) -> str:
        """The message's reply subject (``""``: none)."""
        return self.msg.reply

    @property
    def headers(self) -> Headers | None:
        """The message's headers, or ``None``."""
        return self.msg.headers

    @property
    def data(self) -> bytes:
        """The payload as received."""
        return self.msg.data

    @property
    def metadata(self) -> MsgMetadata:
        """The JetStream metadata (see :attr:`Msg.metadata <natsjs_sync.Msg.metadata>`)."""
        return self.msg.metadata

    def respond(self, value: Any, headers: HeadersInput | None = None) -> None:
        """Answer with ``value``, encoded by :attr:`codec` (its content type in the headers).

        Raises:
            PayloadEncodeError: the codec cannot encode ``value``.
            ValueError: the message has no reply subject.
        """
        data, hdrs = self.codec.encode_message(value, headers)
        self.msg.respond(data, headers=hdrs)

    def ack(self) -> None:
        """:meth:`Msg.ack <natsjs_sync.Msg.ack>`."""
        self.msg.ack()

    def ack_sync(self, timeout: float | None = 5.0) -> Msg:
        """:meth:`Msg.ack_sync <natsjs_sync.Msg.ack_sync>`."""
        return self.msg.ack_sync(timeout)

    def nak(self, delay: float | None = None) -> None:
        """:meth:`Msg.nak <natsjs_sync.Msg.nak>`."""
        self.msg.nak(delay)

    def in_progress(self) -> None:
        """:meth:`Msg.in_progress <natsjs_sync.Msg.in_progress>`."""
        self.msg.in_progress()

    def term(self, reason: str | None = None) -> None:
        """:meth:`Msg.term <natsjs_sync.Msg.term>`."""
        self.msg.term(reason)

    def __repr__(self) -> str:
        return f"<TypedMsg subject={self.msg.subject!r} value={self.value!r}>"


def typed_of_py(msg: Msg, blocks: dict[bytes, tuple[Codec, Callable[[Any], Any]]],
                plain: tuple[Codec, Callable[[Any], Any]], cls: type[TypedMsg[Any]]) -> TypedMsg[Any] | None:
    """A typed reader's common case: ``msg`` decoded by the decoder its header block picks, or ``None``.

    The decoder is ``plain``'s for a message without headers, else the one
    ``blocks`` holds for its exact header block. ``None`` when there is none,
    or when it raises: the caller's slow path then decides (and words the error).
    The compiled twin is ``_speedups.typed_of``.
    """
    raw = msg.raw_headers
    hit = plain if raw is None else blocks.get(raw)
    if hit is None:
        return None
    codec, decode = hit
    try:
        value = decode(msg.data)
    except Exception:  # the codec's own error: the slow path makes ours of it
        return None
    return cls(msg, value, codec)


_typed_of: Callable[[Msg, dict[bytes, tuple[Codec, Callable[[Any], Any]]], tuple[Codec, Callable[[Any], Any]],
                     type[TypedMsg[Any]]], TypedMsg[Any] | None] = typed_of_py
_TypedNext: Any = None
_TypedPublish: Any = None
if _compiled.speedups is not None and hasattr(_compiled.speedups, "typed_of"):
    # The compiled twins fill TypedMsg's slots themselves: tell them where they are.
    _compiled.speedups.setup_typed(TypedMsg)
    _typed_of = _compiled.speedups.typed_of
    _TypedNext = _compiled.speedups.TypedNext
    _TypedPublish = _compiled.speedups.TypedPublish


class _Decoding(Generic[T]):
    """A type, a codec for messages without a content type, and the dead-letter callback.

    Decoding a message costs a dict look-up of its header block and the codec's
    own decoder: the codecs met so far, by the exact block they write, are kept
    with their decoder for the type. Anything else (other headers, bad
    payloads) takes :meth:`_slow`, which also makes the error.
    """

    __slots__ = ("_blocks", "_plain", "codec", "on_decode_error", "type")

    def __init__(self, type_: type[T], codec: Codec | None, on_decode_error: DecodeErrorHandler | None):
        self.type = type_
        self.codec = codec
        self.on_decode_error = on_decode_error
        plain = codec or JSON
        self._plain = (plain, plain._raw_decoder(type_))
        self._blocks: dict[bytes, tuple[Codec, Callable[[Any], Any]]] = {}

    def __call__(self, msg: Msg) -> TypedMsg[T] | None:
        """``msg`` decoded, or ``None`` when it went to the dead-letter callback."""
        typed = _typed_of(msg, self._blocks, self._plain, TypedMsg)
        if typed is None:
            return self._slow(msg)
        return typed

    def _slow(self, msg: Msg) -> TypedMsg[T] | None:
        raw = msg.raw_headers
        try:
            chosen = pick_codec(raw, lambda: msg.headers, self.codec, self.type)
            value = codec_decode(chosen, msg.data, self.type)
        except PayloadDecodeError as exc:
            self._failed(msg, _located(exc, msg.subject, _stream_sequence(msg.reply)))
            return None
        if raw is not None and codec_of_block(raw) is not None and len(self._blocks) < 16:
            self._blocks[raw] = (chosen, chosen._raw_decoder(self.type))
        return TypedMsg(msg, value, chosen)

    def _failed(self, msg: Msg, exc: PayloadDecodeError) -> None:
        if self.on_decode_error is None:
            raise exc
        self.on_decode_error(msg, exc)
        return None

    def handler(self, handler: Callable[[TypedMsg[T]], object]) -> Callable[[Msg], None]:
        """A message callback that decodes, then calls ``handler`` (dead letters skip it)."""

        def on_msg(msg: Msg) -> None:
            typed = self(msg)
            if typed is not None:
                handler(typed)

        on_msg.__name__ = getattr(handler, "__name__", "on_msg")
        return on_msg


def _first(decoding: _Decoding[T], read: Callable[[TimeoutArg], Msg], timeout: TimeoutArg, default: float,
           backlog: Callable[[], int] | None = None) -> TypedMsg[T]:
    """The first message ``read`` gives that decodes (dead letters go to the callback)."""
    if decoding.on_decode_error is None or timeout is USE_DEFAULT:
        while True:
            typed = decoding(read(timeout))
            if typed is not None:
                return typed
    # Dead letters do not count as the message waited for: read on, within one budget.
    # Once it is spent, the messages already delivered then (``backlog``, where the
    # source can say) are still looked at without waiting, as an untyped read with
    # no time left would return one of them; that many and no more, so that a flood
    # of dead letters cannot keep the read from returning.
    deadline = Deadline.of(timeout, default)
    past_deadline: int | None = None
    while True:
        left = deadline.remaining()
        if left is not None and left <= 0:
            if past_deadline is None:
                past_deadline = backlog() if backlog is not None else 0
            if past_deadline <= 0:
                raise TimeoutError("no message that decodes within the timeout")
            past_deadline -= 1
        typed = decoding(read(left))
        if typed is not None:
            return typed


def _read_next(source: Any, decoding: _Decoding[T], timeout: TimeoutArg = 1.0) -> TypedMsg[T]:
    """:meth:`TypedReader.next_msg`: ``source.next_msg(timeout)`` decoded (the reference of ``_speedups.TypedNext``)."""
    started = time.monotonic() if decoding.on_decode_error is not None else None
    msg = source.next_msg(timeout)
    typed = _typed_of(msg, decoding._blocks, decoding._plain, TypedMsg)  # what decoding(msg) does, one call less
    if typed is not None:
        return typed
    return _after_next(source, decoding, msg, timeout, started)


def _after_next(source: Any, decoding: _Decoding[T], msg: Msg, timeout: TimeoutArg,
                started: float | None = None) -> TypedMsg[T]:
    """:func:`_read_next` for a ``msg`` the common case did not decode: the slow path,
    then, past a dead letter, the next message that decodes.

    ``started``: when the read began (``time.monotonic()``; taken only where dead letters
    can be skipped): a timeout in seconds counts from then, the wait for ``msg`` included.
    """
    typed = decoding._slow(msg)
    if typed is not None:
        return typed
    if started is not None and (timeout.__class__ is float or timeout.__class__ is int):
        seconds = resolve(timeout, 1.0)
        deadline = Deadline(seconds)
        if deadline.at is not None and seconds is not None:
            deadline.at = started + seconds  # from when the read began (made here, not shared yet)
            timeout = deadline
    backlog = (lambda: source.pending_msgs) if hasattr(type(source), "pending_msgs") else None
    return _first(decoding, source.next_msg, timeout, 1.0, backlog)  # that one was a dead letter: read on


class TypedReader(Generic[T]):
    """A typed view of anything that delivers messages. Thread-safe as what it wraps.

    Made by ``sub.typed(T)``, ``consumer.typed(T)``, ``ordered_consumer.typed(T)``
    or ``push_consumer.typed(T)``. Each way of reading of the wrapped object
    is here under its name and yields :class:`TypedMsg`; everything else
    (``unsubscribe``, ``drain``, ``stop``, ``info``, a batch's ``error``) is the
    wrapped object's.

    A message that does not decode raises :class:`~natsjs_sync.errors.PayloadDecodeError`
    from the read (from a ``consume`` handler it goes where handler errors go),
    unless ``on_decode_error`` is given: then the message goes there and the
    read goes on with the next one.
    """

    def __init__(self, source: Any, type_: type[T], codec: Codec | None = None,
                 on_decode_error: DecodeErrorHandler | None = None):
        self._source = source
        self._decoding = decoding = _Decoding(type_, codec, on_decode_error)
        if (_TypedNext is not None and callable(getattr(type(source), "next_msg", None))
                and type(self).next_msg is TypedReader.next_msg):
            # next_msg in one compiled call (the method below is its reference). It holds the
            # source and the decoding, not this view: dropping the view frees it at once.
            # A subscription's next_msg comes in parts: its queue's take, called without a
            # Python frame in between, and what words the timeout (as next_msg does). Asked
            # of the source's class: a proxy would hand on the subscription's, not its own.
            parts = getattr(source, "_next_msg_parts", None) if hasattr(type(source), "_next_msg_parts") else None
            read, empty, on_empty = (parts() if parts is not None else None) or (source.next_msg, None, None)
            self.next_msg = _TypedNext(  # type: ignore[method-assign]
                read, decoding._blocks, decoding._plain, TypedMsg,
                functools.partial(_after_next, source, decoding),
                functools.partial(_read_next, source, decoding), 1.0,
                None if on_decode_error is None else time.monotonic, empty, on_empty)

    @property
    def source(self) -> Any:
        """The wrapped (untyped) object."""
        return self._source

    def _wrap(self, source: Any) -> TypedReader[T]:
        d = self._decoding
        return TypedReader(source, d.type, d.codec, d.on_decode_error)

    def next_msg(self, timeout: TimeoutArg = 1.0) -> TypedMsg[T]:
        """The next message of a subscription, decoded (``Subscription.next_msg``'s arguments)."""
        return _read_next(self._source, self._decoding, timeout)

    def next(self, timeout: TimeoutArg = USE_DEFAULT) -> TypedMsg[T]:
        """The next message of a consumer or ``messages()`` iterator, decoded."""
        return _first(self._decoding, self._source.next, timeout, 30.0)

    def __iter__(self) -> Iterator[TypedMsg[T]]:
        decode = self._decoding
        for msg in self._source:
            typed = decode(msg)
            if typed is not None:
                yield typed

    def fetch(self, batch: int, *args: Any, **kwargs: Any) -> TypedReader[T]:
        """``consumer.fetch``: a batch to iterate, yielding decoded messages (its ``error`` as before)."""
        return self._wrap(self._source.fetch(batch, *args, **kwargs))

    def fetch_bytes(self, max_bytes: int, *args: Any, **kwargs: Any) -> TypedReader[T]:
        """``consumer.fetch_bytes``, decoded."""
        return self._wrap(self._source.fetch_bytes(max_bytes, *args, **kwargs))

    def fetch_no_wait(self, batch: int, *args: Any, **kwargs: Any) -> TypedReader[T]:
        """``consumer.fetch_no_wait``, decoded."""
        return self._wrap(self._source.fetch_no_wait(batch, *args, **kwargs))

    def messages(self, *args: Any, **kwargs: Any) -> TypedReader[T]:
        """``consumer.messages()`` (or a subscription's), yielding decoded messages."""
        return self._wrap(self._source.messages(*args, **kwargs))

    def consume(self, handler: Callable[[TypedMsg[T]], object], *args: Any, **kwargs: Any) -> Any:
        """``consumer.consume``: ``handler(typed_msg)`` for each message that decodes."""
        return self._source.consume(self._decoding.handler(handler), *args, **kwargs)

    def __enter__(self) -> TypedReader[T]:
        self._source.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._source.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def __repr__(self) -> str:
        return f"<TypedReader {getattr(self._decoding.type, '__name__', self._decoding.type)} of {self._source!r}>"


def _publish(client: Client, subject: str, codec: Codec, encode: Callable[[Any], bytes],
             outlet: Callable[[str, bytes, bytes], bool], headed: Callable[[str, bytes, bytes], None], block: bytes,
             value: Any, headers: HeadersInput | None = None, **kwargs: Any) -> None:
    """:meth:`TypedSubject.publish` on a client (the reference of ``_speedups.TypedPublish``)."""
    if headers is None and not kwargs:
        try:
            data = encode(value)
        except Exception:  # the codec's own error: encode() makes ours of it
            data = codec.encode(value)
        if not outlet(subject, data, block):  # the common case in one call
            headed(subject, data, block)  # not connected, a subject not seen yet...: the general path
        return None
    data, hdrs = codec.encode_message(value, headers)
    client.publish(subject, data, headers=hdrs, **kwargs)
    return None


class TypedSubject(Generic[T]):
    """Values of type ``T`` on one subject: ``nc.typed(subject, T)`` or ``js.typed(subject, T)``. Thread-safe.

    Args:
        target: a :class:`~natsjs_sync.Client`, or a JetStream context (then
            :meth:`publish` waits for the stream's PubAck and returns it).
        subject: where values are published (and, for :meth:`subscribe`, a filter).
        type_: the type of the values (for :meth:`subscribe`).
        codec: how values are encoded (default :data:`~natsjs_sync.codecs.JSON`);
            received messages with a ``content-type`` header decode by that.
        reply_type: the type :meth:`request` decodes replies to (default ``Any``:
            plain JSON values).
    """

    def __init__(self, target: Client | JetStream, subject: str, type_: type[T], codec: Codec | None = None,
                 reply_type: Any = Any):
        self._target = target
        self._client: Client = target.nc if hasattr(target, "nc") else target
        self.subject = subject
        self.type = type_
        self.codec = codec or JSON
        self.reply_type = reply_type
        # A plain publish on a client sends the header block encoded once for the
        # view, laid out with the payload by the connection's outlet (compiled
        # where built): per message only the payload is encoded. The general
        # path would encode the headers each time, which costs more than the payload.
        self._headed: Callable[[str, bytes, bytes], None] | None = None
        self._encode = self.codec._raw_encoder()
        if target is self._client:
            publish_subject(subject)  # validated now (and cached, which the outlet needs)
            core = spi.link(target)
            self._outlet: Callable[[str, bytes, bytes], bool] = core.outlet
            self._headed = core.publish_headed
            self._block = encode_headers(self.codec.headers)
            if _TypedPublish is not None and type(self).publish is TypedSubject.publish:
                # publish(value) in one compiled call (the method below is its reference; it
                # takes every other call). It holds the method's own state, not this view:
                # dropping the view frees it at once.
                self.publish = _TypedPublish(  # type: ignore[method-assign]
                    subject, self._block, self._encode, self._outlet,
                    functools.partial(_publish, self._client, subject, self.codec, self._encode, self._outlet,
                                      self._headed, self._block),
                    self.codec.encode, self._headed)

    def publish(self, value: T, headers: HeadersInput | None = None, **kwargs: Any) -> Any:
        """Publish ``value`` (the codec's content type in the headers).

        Args:
            headers: headers to send too.
            kwargs: the options of the target's ``publish`` (``reply=`` on a
                client; ``msg_id=``, ``expected_last_seq=`` ... on JetStream).

        Returns:
            ``None`` on a client; the :class:`~natsjs_sync.PubAck` on JetStream.

        Raises:
            PayloadEncodeError: the codec cannot encode ``value``; otherwise what the target's ``publish`` raises.
        """
        if self._headed is None:
            data, hdrs = self.codec.encode_message(value, headers)
            return self._target.publish(self.subject, data, headers=hdrs, **kwargs)
        return _publish(self._client, self.subject, self.codec, self._encode, self._outlet, self._headed, self._block,
                        value, headers, **kwargs)

    def publish_async(self, value: T, headers: HeadersInput | None = None, **kwargs: Any) -> Any:
        """JetStream only: ``js.publish_async`` of ``value``; returns its future PubAck."""
        data, hdrs = self.codec.encode_message(value, headers)
        return self._target.publish_async(self.subject, data, headers=hdrs, **kwargs)  # type: ignore[union-attr]

    def request(self, value: T, timeout: TimeoutArg = 1.0, headers: HeadersInput | None = None,
                reply_type: Any = None) -> TypedMsg[Any]:
        """Send ``value`` as a request and decode the first reply (as ``reply_type``, default the view's).

        Raises:
            PayloadDecodeError: the reply does not decode.
            ServiceError: a service answered with an error (its ``Nats-Service-Error`` headers).
            NoRespondersError, TimeoutError: as :meth:`Client.request <natsjs_sync.Client.request>`.
        """
        data, hdrs = self.codec.encode_message(value, headers)
        reply = self._client.request(self.subject, data, timeout=timeout, headers=hdrs)
        if reply.raw_headers is not None and codec_of_block(reply.raw_headers) is None:
            from ..micro.client import service_error

            error = service_error(reply)
            if error is not None:
                raise error
        typed = _Decoding(reply_type if reply_type is not None else self.reply_type, self.codec, None)(reply)
        assert typed is not None  # no dead-letter callback: a failure raised
        return typed

    def subscribe(self, handler: Callable[[TypedMsg[T]], object] | None = None, queue: str | None = None,
                  on_decode_error: DecodeErrorHandler | None = None, **kwargs: Any) -> TypedReader[T]:
        """Subscribe to ``subject`` (wildcards allowed) on the client, decoding each message.

        Args:
            handler: ``handler(typed_msg)`` on the dispatcher; without it, read
                the returned view with ``next_msg`` or iterate it.
            queue: a queue group.
            on_decode_error: the dead-letter callback (see :class:`TypedReader`).
            kwargs: the options of :meth:`Client.subscribe <natsjs_sync.Client.subscribe>`.
        """
        decoding = _Decoding(self.type, self.codec, on_decode_error)
        cb = None if handler is None else decoding.handler(handler)
        sub: Subscription = self._client.subscribe(self.subject, queue, cb, **kwargs)
        return TypedReader(sub, self.type, self.codec, on_decode_error)

    def __repr__(self) -> str:
        return f"<TypedSubject {self.subject!r} {getattr(self.type, '__name__', self.type)} {self.codec!r}>"


class TypedEntry(Generic[T]):
    """A key-value entry with its value decoded. Safe to pass between threads.

    Attributes:
        entry: the :class:`~natsjs_sync.jetstream.Entry` as read.
        value: the decoded value; ``None`` for a delete or purge marker.
    """

    __slots__ = ("entry", "value")

    def __init__(self, entry: Entry, value: T | None):
        self.entry = entry
        self.value = value

    @property
    def key(self) -> str:
        """The key."""
        return self.entry.key

    @property
    def revision(self) -> int:
        """The revision (the stream sequence)."""
        return self.entry.revision

    @property
    def operation(self) -> KeyValueOp:
        """PUT, DEL or PURGE."""
        return self.entry.operation

    @property
    def bucket(self) -> str:
        """The bucket."""
        return self.entry.bucket

    def __repr__(self) -> str:
        return f"TypedEntry(key={self.key!r}, revision={self.revision}, value={self.value!r})"


class TypedKeyValue(Generic[T]):
    """A typed view of a key-value bucket: ``kv.typed(T)``. Thread-safe.

    Values are encoded by the codec (KV entries carry no headers, so the
    reader's codec decides how they decode). Keys, deletes, purges and bucket
    calls are the bucket's (reached through this view too).
    """

    def __init__(self, kv: KeyValue, type_: type[T], codec: Codec | None = None,
                 on_decode_error: Callable[[Entry, PayloadDecodeError], None] | None = None):
        self._kv = kv
        self.type = type_
        self.codec = codec or JSON
        self._on_decode_error = on_decode_error

    @property
    def source(self) -> KeyValue:
        """The bucket (untyped)."""
        return self._kv

    def decode(self, entry: Entry) -> TypedEntry[T]:
        """``entry`` with its value decoded (``None`` for delete and purge markers).

        Raises:
            PayloadDecodeError: the value does not decode (naming the key's subject and revision).
        """
        from ..jetstream.kv import KeyValueOp

        if entry.operation is not KeyValueOp.PUT:
            return TypedEntry(entry, None)
        try:
            return TypedEntry(entry, codec_decode(self.codec, entry.value, self.type))
        except PayloadDecodeError as exc:
            raise _located(exc, f"$KV.{entry.bucket}.{entry.key}", entry.revision) from None

    def _decoded(self, entry: Entry) -> TypedEntry[T] | None:
        try:
            return self.decode(entry)
        except PayloadDecodeError as exc:
            if self._on_decode_error is None:
                raise
            self._on_decode_error(entry, exc)
            return None

    def get(self, key: str, *args: Any, **kwargs: Any) -> TypedEntry[T]:
        """``kv.get`` decoded (its arguments).

        Raises:
            PayloadDecodeError: the value does not decode.
            KeyNotFoundError, KeyDeletedError: as ``kv.get``.
        """
        return self.decode(self._kv.get(key, *args, **kwargs))

    def put(self, key: str, value: T, *args: Any, **kwargs: Any) -> int:
        """Store ``value`` under ``key``; returns the revision (``kv.put``'s other arguments)."""
        return self._kv.put(key, self.codec.encode(value), *args, **kwargs)

    def create(self, key: str, value: T, *args: Any, **kwargs: Any) -> int:
        """``kv.create`` with an encoded value."""
        return self._kv.create(key, self.codec.encode(value), *args, **kwargs)

    def update(self, key: str, value: T, *args: Any, **kwargs: Any) -> int:
        """``kv.update`` with an encoded value (``last=`` as there)."""
        return self._kv.update(key, self.codec.encode(value), *args, **kwargs)

    def history(self, key: str, *args: Any, **kwargs: Any) -> list[TypedEntry[T]]:
        """``kv.history`` decoded (entries that go to ``on_decode_error`` are left out)."""
        return [t for t in map(self._decoded, self._kv.history(key, *args, **kwargs)) if t is not None]

    def watch(self, *keys: str, **kwargs: Any) -> TypedWatcher[T]:
        """``kv.watch`` yielding :class:`TypedEntry` (and ``None`` once, at the end of the initial values)."""
        return TypedWatcher(self, self._kv.watch(*keys, **kwargs))

    def watch_all(self, **kwargs: Any) -> TypedWatcher[T]:
        """``kv.watch_all``, typed."""
        return TypedWatcher(self, self._kv.watch_all(**kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    def __repr__(self) -> str:
        return f"<TypedKeyValue {self._kv.bucket} {getattr(self.type, '__name__', self.type)}>"


class TypedWatcher(Generic[T]):
    """A KV watch yielding :class:`TypedEntry`, then ``None`` once at the end of the initial values.

    Iterate it, or call :meth:`next`/:meth:`updates`; :meth:`stop` from any thread
    (thread-safe as the :class:`~natsjs_sync.jetstream.KeyWatcher` it wraps).
    A value that does not decode raises :class:`~natsjs_sync.errors.PayloadDecodeError`
    unless the view has an ``on_decode_error`` callback (then it is skipped).
    """

    def __init__(self, view: TypedKeyValue[T], watcher: Any):
        self._view = view
        self._watcher = watcher

    @property
    def source(self) -> Any:
        """The untyped :class:`~natsjs_sync.jetstream.KeyWatcher`."""
        return self._watcher

    def _read(self, read: Callable[[], Entry | None]) -> TypedEntry[T] | None:
        while True:
            entry = read()
            if entry is None:
                return None
            typed = self._view._decoded(entry)
            if typed is not None:
                return typed

    def next(self, timeout: TimeoutArg = None) -> TypedEntry[T] | None:
        """As ``KeyWatcher.next``, decoded."""
        return self._read(lambda: self._watcher.next(timeout))

    def updates(self, timeout: float | None = 5.0) -> TypedEntry[T] | None:
        """As ``KeyWatcher.updates``, decoded."""
        return self._read(lambda: self._watcher.updates(timeout))

    def __iter__(self) -> Iterator[TypedEntry[T] | None]:
        for entry in self._watcher:
            if entry is None:
                yield None
                continue
            typed = self._view._decoded(entry)
            if typed is not None:
                yield typed

    def stop(self) -> None:
        """Stop the watch."""
        self._watcher.stop()

    def __enter__(self) -> TypedWatcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._watcher, name)


class TypedObjectStore(Generic[T]):
    """Objects holding encoded values: ``obs.typed(T)``. Thread-safe.

    :meth:`put` records the codec's content type in the object's headers (its
    metadata, shared by every client), and :meth:`get` decodes by it, so an
    object written as MessagePack reads back as such; objects without it
    decode with this view's codec. Everything else is the store's.
    """

    def __init__(self, store: ObjectStore, type_: type[T], codec: Codec | None = None):
        self._store = store
        self.type = type_
        self.codec = codec or JSON

    @property
    def source(self) -> ObjectStore:
        """The store (untyped)."""
        return self._store

    def put(self, name: str, value: T, meta: ObjectMeta | None = None, **kwargs: Any) -> ObjectInfo:
        """Store ``value`` as object ``name`` (``meta`` and the keywords as ``obs.put``).

        Raises:
            PayloadEncodeError: the codec cannot encode ``value``.
        """
        from ..jetstream.object_models import ObjectMeta

        meta = ObjectMeta(name=name) if meta is None else meta
        headers: dict[str, str | list[str]] = {k: v for k, v in (meta.headers or {}).items()
                                               if k.lower() != "content-type"}
        headers["content-type"] = self.codec.content_type
        meta = ObjectMeta(name=meta.name or name, description=meta.description, headers=headers,
                          metadata=meta.metadata, options=meta.options)
        return self._store.put(name, self.codec.encode(value), meta=meta, **kwargs)

    def get(self, name: str, **kwargs: Any) -> T:
        """The value stored as object ``name``, decoded by the content type in its headers.

        Raises:
            PayloadDecodeError: the object does not decode (``subject`` is the object's name).
            ObjectNotFoundError, DigestMismatchError: as ``obs.get_bytes``.
        """
        with self._store.get(name, **kwargs) as result:
            data = b"".join(result.chunks())
            raw = result.info.headers or {}
        # A header's first value; one with none (an empty list, as nats.go writes it) is not there.
        flat = {k: v[0] if isinstance(v, list) else v for k, v in raw.items() if v or not isinstance(v, list)}
        try:
            codec = pick_codec(b"", lambda: flat, self.codec, self.type)
            return codec_decode(codec, data, self.type)
        except PayloadDecodeError as exc:
            raise _located(exc, name, None) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return f"<TypedObjectStore {getattr(self.type, '__name__', self.type)}>"
