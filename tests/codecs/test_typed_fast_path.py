"""The typed views' common case (one compiled call where built) decides as the general path does.

A typed read looks a message's header block up in the blocks its codecs write
and decodes with the decoder found; every other message takes the general
path (:func:`~natsjs_sync.codecs.decode_msg`'s). These tests hold the fast
path to the general one, message by message: the same value, the same codec,
the same error, whatever the header block (none, exactly a codec's, with other
headers, another content type, a status line, malformed). A typed publish in
one call sends the same bytes as the method's general path.
"""

from __future__ import annotations

import gc
import queue
import weakref
from typing import Any

import msgspec
import pytest

import natsjs_sync as nats
from natsjs_sync import Msg, PayloadDecodeError, PayloadEncodeError
from natsjs_sync.codecs import JSON, MSGPACK, Codec, TypedMsg, TypedReader, TypedSubject, decode_msg
from natsjs_sync.codecs import typed as typed_mod
from natsjs_sync.protocol.nuid import next_nuid


class Order(msgspec.Struct):
    id: int
    item: str


JSON_BLOCK = b"NATS/1.0\r\ncontent-type: application/json\r\n\r\n"
MSGPACK_BLOCK = b"NATS/1.0\r\ncontent-type: application/msgpack\r\n\r\n"
JSON_DATA = msgspec.json.encode(Order(1, "tea"))
MSGPACK_DATA = msgspec.msgpack.encode(Order(2, "milk"))

#: (header block, payload): every kind of block a reader meets, and payloads that do not decode.
CORPUS: list[tuple[bytes | None, bytes]] = [
    (None, JSON_DATA),
    (JSON_BLOCK, JSON_DATA),
    (MSGPACK_BLOCK, MSGPACK_DATA),
    (b"NATS/1.0\r\ncontent-type: application/json\r\nX-Trace: 1\r\n\r\n", JSON_DATA),  # other headers too
    (b"NATS/1.0\r\nContent-Type: application/json\r\n\r\n", JSON_DATA),  # HTTP's spelling
    (b"NATS/1.0\r\ncontent-type: application/json; charset=utf-8\r\n\r\n", JSON_DATA),
    (b"NATS/1.0\r\ncontent-type: application/msgpack\r\n\r\n", JSON_DATA),  # says msgpack, is JSON
    (b"NATS/1.0\r\ncontent-type: text/x-unknown\r\n\r\n", JSON_DATA),  # no codec reads it
    (b"NATS/1.0\r\nX-Other: 1\r\n\r\n", JSON_DATA),  # headers, no content type
    (b"NATS/1.0\r\n\r\n", JSON_DATA),  # an empty set of headers
    (b"NATS/1.0 503\r\n\r\n", b""),  # a status
    (b"NATS/1.0\r\ncontent-type application/json\r\n\r\n", JSON_DATA),  # malformed: no colon
    (b"garbage!!", JSON_DATA),  # not a header block at all
    (b"NATS/1.0\r\ncontent-type: application/json\r\n", JSON_DATA),  # the JSON block cut short
    (JSON_BLOCK, b'{"id": "one", "item": "tea"}'),  # the block, a payload of the wrong type
    (JSON_BLOCK, b"{not json"),
    (None, b"{not json"),
    (None, MSGPACK_DATA),  # no header: read as JSON, which it is not
    (MSGPACK_BLOCK, JSON_DATA),
]


def _msgs() -> list[Msg]:
    # Each block as its own bytes object, as a parser delivers them.
    return [Msg("orders", 1, "", None if hdr is None else bytes(bytearray(hdr)), data) for hdr, data in CORPUS]


def _outcome(read: Any) -> tuple[str, Any, Any]:
    try:
        got = read()
    except PayloadDecodeError as exc:
        return ("error", str(exc), exc.content_type)
    if isinstance(got, TypedMsg):
        return ("typed", got.value, got.codec)
    return ("value", got, None)


class _Source:
    """Delivers the given messages from a queue, as a subscription's ``next_msg`` does."""

    def __init__(self, msgs: list[Msg]):
        self.q: queue.SimpleQueue[Msg] = queue.SimpleQueue()
        for m in msgs:
            self.q.put(m)

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        try:
            return self.q.get(True, timeout)
        except queue.Empty:
            raise nats.errors.TimeoutError("no message") from None


def _twins() -> list[Any]:
    found = [typed_mod.typed_of_py]
    if typed_mod._typed_of is not typed_mod.typed_of_py:
        found.append(typed_mod._typed_of)
    return found


def _expected(m: Msg, codec: Codec | None) -> tuple[str, Any, Any]:
    """What the general path makes of ``m``: decode_msg's value and the codec it picks, or its error."""
    try:
        value = decode_msg(m, Order, codec)
    except PayloadDecodeError as exc:
        return ("error", str(exc), exc.content_type)
    return ("typed", value, typed_mod.pick_codec(m.raw_headers, lambda: m.headers, codec, Order))


@pytest.mark.parametrize("codec", [None, JSON, MSGPACK], ids=["default", "json", "msgpack"])
def test_typed_reads_decide_as_decode_msg_for_every_header_block(codec: Codec | None) -> None:
    """Each message read twice (the second time the blocks met are cached), by the compiled
    call and by the method (its reference) in turns: as the general path reads it."""
    msgs = _msgs()
    expected = [_expected(m, codec) for m in msgs]
    assert {e[0] for e in expected} == {"typed", "error"}
    reader = TypedReader(_Source(msgs + _msgs() + _msgs() + _msgs()), Order, codec)
    for rnd in range(4):
        for i in range(len(msgs)):
            if (i + rnd) % 2:
                got = _outcome(lambda: reader.next_msg(timeout=1.0))
            else:
                got = _outcome(lambda: TypedReader.next_msg(reader, 1.0))
            assert got == expected[i], (rnd, CORPUS[i][0], CORPUS[i][1])


def test_the_typed_of_twins_agree_on_every_header_block() -> None:
    msgs = _msgs()
    for codec in (JSON, MSGPACK):
        decoding = typed_mod._Decoding(Order, codec, None)
        for blocks in ({}, {JSON_BLOCK: (JSON, JSON._raw_decoder(Order))},
                       {JSON_BLOCK: (JSON, JSON._raw_decoder(Order)),
                        MSGPACK_BLOCK: (MSGPACK, MSGPACK._raw_decoder(Order))}):
            for m in msgs:
                results = []
                for typed_of in _twins():
                    got = typed_of(m, blocks, decoding._plain, TypedMsg)
                    results.append(None if got is None else (got.msg is m, got.value, got.codec))
                assert all(r == results[0] for r in results), (m.raw_headers, results)
                if m.raw_headers is not None and m.raw_headers not in blocks:
                    assert results[0] is None  # a block not known: the general path decides


def test_the_compiled_typed_of_reads_messages_of_any_class() -> None:
    class Other:  # not a Msg: read through its attributes
        raw_headers = JSON_BLOCK
        data = JSON_DATA

    decoding = typed_mod._Decoding(Order, None, None)
    blocks = {JSON_BLOCK: (JSON, JSON._raw_decoder(Order))}
    for typed_of in _twins():
        got = typed_of(Other(), blocks, decoding._plain, TypedMsg)  # type: ignore[arg-type]
        assert got is not None and got.value == Order(1, "tea") and got.codec is JSON


def test_a_dead_letter_skipped_by_the_compiled_call_reads_on() -> None:
    dead: list[tuple[Msg, PayloadDecodeError]] = []
    msgs = [Msg("orders", 1, "", JSON_BLOCK, b"{bad"), Msg("orders", 1, "", JSON_BLOCK, JSON_DATA)]
    reader = TypedReader(_Source(msgs), Order, on_decode_error=lambda m, e: dead.append((m, e)))
    assert reader.next_msg(1.0).value == Order(1, "tea")
    assert [m for m, _ in dead] == [msgs[0]]
    with pytest.raises(nats.errors.TimeoutError):
        reader.next_msg(0.05)


def test_next_msg_takes_the_methods_arguments() -> None:
    msgs = [Msg("orders", 1, "", None, JSON_DATA) for _ in range(3)]
    reader = TypedReader(_Source(msgs), Order)
    assert reader.next_msg().value == Order(1, "tea")
    assert reader.next_msg(1.0).value == Order(1, "tea")
    assert reader.next_msg(timeout=1.0).value == Order(1, "tea")
    with pytest.raises(TypeError):
        reader.next_msg(1.0, 2.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        reader.next_msg(wait=1.0)  # type: ignore[call-arg]
    with pytest.raises(nats.errors.TimeoutError):
        reader.next_msg(timeout=0.01)


def test_views_are_freed_without_the_cycle_collector(nc: nats.Client) -> None:
    sub = nc.subscribe(f"typed.free.{next_nuid()}")
    was = gc.isenabled()
    gc.disable()
    try:
        reader = sub.typed(Order)
        view = nc.typed(sub.subject, Order)
        refs = [weakref.ref(reader), weakref.ref(view)]
        del reader, view
        assert [r() for r in refs] == [None, None]
    finally:
        if was:
            gc.enable()


def test_a_typed_publish_in_one_call_sends_what_the_method_sends(nc: nats.Client) -> None:
    subject = f"typed.pub.{next_nuid()}"
    sub = nc.subscribe(subject)
    nc.flush()
    view: TypedSubject[Order] = nc.typed(subject, Order)
    view.publish(Order(1, "tea"))  # the compiled call where built
    TypedSubject.publish(view, Order(1, "tea"))  # the method
    view.publish(Order(2, "milk"), headers={"X-Trace": "1"})  # other arguments: the method's general path
    nc.flush()
    got = [sub.next_msg(5) for _ in range(3)]
    assert [(m.raw_headers, m.data) for m in got[:2]] == [(JSON_BLOCK, JSON_DATA)] * 2
    assert got[2].headers == {"X-Trace": "1", "content-type": "application/json"}
    assert sub.typed(Order).source is sub
    with pytest.raises(PayloadEncodeError):
        view.publish(object())  # type: ignore[arg-type]
    with pytest.raises(PayloadEncodeError):
        TypedSubject.publish(view, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        view.publish()  # type: ignore[call-arg]


class _CountingCodec(Codec):
    """JSON through the base class's hooks, counting its encodes (a codec of a user's, with side effects)."""

    content_type = "application/x-counted"

    def __init__(self, payload_type: type = bytes) -> None:
        self.encodes = 0
        self._payload_type = payload_type

    def encode(self, value: Any) -> bytes:
        self.encodes += 1
        if value == "refused":
            raise PayloadEncodeError("refused")
        return self._payload_type(msgspec.json.encode(value))  # type: ignore[no-any-return]

    def decode(self, data: Any, type_: Any) -> Any:
        return msgspec.json.decode(bytes(data), type=type_)


@pytest.mark.parametrize("payload_type", [bytes, bytearray])
def test_a_typed_publish_in_one_call_encodes_as_often_as_the_method(nc: nats.Client, payload_type: type) -> None:
    """Each value is encoded once, however the publish goes on (an outlet that declines: a subject not
    in the cache, a payload that is not bytes; the general path gets the payload already encoded)."""
    from natsjs_sync.protocol import subjects

    subject = f"typed.count.{next_nuid()}"
    sub = nc.subscribe(subject)
    nc.flush()
    codec = _CountingCodec(payload_type)
    view: TypedSubject[Any] = nc.typed(subject, dict, codec=codec)
    counts = []
    for publish in (view.publish, lambda value: TypedSubject.publish(view, value)):
        codec.encodes = 0
        publish({"n": 1})
        subjects.PUB_SUBJECTS.pop(subject, None)  # the outlet declines: the general path
        publish({"n": 2})
        with pytest.raises(PayloadEncodeError):
            publish("refused")
        counts.append(codec.encodes)
    assert counts == [4, 4]  # twice for the refused value: the hot path's encoder, then encode() for the error
    nc.flush()
    assert [sub.next_msg(5).data for _ in range(4)] == [b'{"n":1}', b'{"n":2}'] * 2


def test_a_typed_read_of_a_subscription_runs_no_python_code_per_message(nc: nats.Client) -> None:
    """The compiled typed next_msg takes from the subscription's queue itself: no Python
    frame (Subscription.next_msg's) between the call and the message, which cost a typed
    reader more than the decode's own work."""
    import sys

    if typed_mod._TypedNext is None:
        pytest.skip("without the compiled extension the method is the path")
    subject = f"typed.frames.{next_nuid()}"
    sub = nc.subscribe(subject)
    reader = sub.typed(Order)
    for _ in range(3):
        nc.typed(subject, Order).publish(Order(1, "tea"))
    nc.flush()
    assert reader.next_msg(5).value == Order(1, "tea")  # the first one teaches the reader the header block
    frames: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        got = [reader.next_msg(5).value, reader.next_msg(5).value]  # no comprehension: it is a frame itself
    finally:
        sys.setprofile(None)
    assert got == [Order(1, "tea")] * 2
    assert frames == []


def test_a_typed_read_of_a_subscription_times_out_as_next_msg_does(nc: nats.Client) -> None:
    sub = nc.subscribe(f"typed.timeout.{next_nuid()}")
    reader = sub.typed(Order)
    errors = []
    for read in (sub.next_msg, reader.next_msg, lambda timeout: TypedReader.next_msg(reader, timeout)):
        with pytest.raises(nats.errors.TimeoutError) as info:
            read(timeout=0.01)
        errors.append(str(info.value))
    assert errors == [errors[0]] * 3 and sub.subject in errors[0]
    nc.publish(sub.subject, JSON_DATA)
    assert reader.next_msg(timeout=5).value == Order(1, "tea")  # a timeout leaves the reader usable


def test_a_typed_read_goes_through_a_next_msg_patched_on_the_class_or_the_subscription(
        nc: nats.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """What replaces Subscription.next_msg (a plain function put on the class, as a tracing or
    test library does, or an attribute of the subscription) is what a typed reader reads
    through, as with any other source: the compiled read takes from the queue only under
    the library's own method."""
    from natsjs_sync.subscription import Subscription

    calls: list[str] = []
    library_next_msg = Subscription.next_msg

    def on_the_class(self: Subscription, timeout: Any = 1.0) -> Msg:
        calls.append("class")
        return library_next_msg(self, timeout)

    with monkeypatch.context() as patch:
        patch.setattr(Subscription, "next_msg", on_the_class)
        sub = nc.subscribe(f"typed.patched.{next_nuid()}")
        reader = sub.typed(Order)
        nc.publish(sub.subject, JSON_DATA)
        assert reader.next_msg(5).value == Order(1, "tea")
    assert calls == ["class"]
    sub = nc.subscribe(f"typed.patched.{next_nuid()}")
    own_next_msg = sub.next_msg

    def on_the_subscription(timeout: Any = 1.0) -> Msg:
        calls.append("instance")
        return own_next_msg(timeout)

    sub.next_msg = on_the_subscription  # type: ignore[method-assign]
    reader = sub.typed(Order)
    nc.publish(sub.subject, JSON_DATA)
    assert reader.next_msg(5).value == Order(1, "tea")
    assert calls == ["class", "instance"]


def test_a_typed_reader_of_a_proxy_reads_through_the_proxys_next_msg(nc: nats.Client) -> None:
    """A source that hands every other attribute on to a subscription (a proxy) and reads
    by a next_msg of its own is read through that next_msg: the subscription's queue is
    taken from directly only when the source is the subscription."""
    calls: list[float] = []

    class Counting:
        def __init__(self, sub: Any) -> None:
            self._sub = sub

        def next_msg(self, timeout: float = 1.0) -> Msg:
            calls.append(timeout)
            msg: Msg = self._sub.next_msg(timeout)
            return msg

        def __getattr__(self, name: str) -> Any:
            return getattr(self._sub, name)

    sub = nc.subscribe(f"typed.proxy.{next_nuid()}")
    reader = TypedReader(Counting(sub), Order)
    nc.publish(sub.subject, JSON_DATA)
    assert reader.next_msg(5).value == Order(1, "tea")
    assert calls == [5]
