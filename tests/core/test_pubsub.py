"""Publish and subscribe against a real nats-server."""

from __future__ import annotations

import threading

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import InvalidCallbackTypeError
from natsjs_sync.testing import NatsServer


def test_publish_and_receive_with_headers(nc: nats.Client) -> None:
    sub = nc.subscribe("pubsub.basic")
    nc.publish("pubsub.basic", b"hello", headers={"Trace": ["a", "b"], "case-Kept": "v"})
    nc.publish("pubsub.basic", bytearray(b"second"), reply="pubsub.reply")
    nc.publish("pubsub.basic", memoryview(b"third"))
    m1, m2, m3 = (sub.next_msg(timeout=2) for _ in range(3))
    assert (m1.subject, m1.data) == ("pubsub.basic", b"hello")
    assert m1.headers is not None and m1.headers.get_all("Trace") == ["a", "b"]
    assert m1.headers["case-Kept"] == "v"
    assert (m2.data, m2.reply, m2.headers) == (b"second", "pubsub.reply", None)
    assert m3.data == b"third"
    assert m1.reply == "" and m3.reply == ""  # no reply subject: "" (nats-py and nats.go alike)


def test_a_publish_with_headers_lays_out_its_frame_in_one_call(nc: nats.Client) -> None:
    """Headers (encoded once per distinct set of pairs) go out through the same one-call
    path as a plain publish, not the general one (which cost such a publish 2.7 us, 9x
    a plain one); what arrives, the counters and the errors are the general path's."""
    import sys

    sub = nc.subscribe("pubsub.headed")
    headers = {"content-type": "application/json", "X-Id": "1"}
    nc.publish("pubsub.headed", b"{}", headers=headers)  # the first validates the subject
    frames: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            frames.append(frame.f_code.co_name)  # type: ignore[attr-defined]

    sys.setprofile(profile)
    try:
        nc.publish("pubsub.headed", b"{}", headers=headers)
    finally:
        sys.setprofile(None)
    assert frames[:2] == ["publish", "encode_headers"]  # then, without the extension, the twins' own frames
    assert not {"encode", "hpub", "append"} & set(frames)  # the general path's
    nc.publish("pubsub.headed", b"[]", headers={"X-List": ["a", "b"]})  # not cached: encoded each time
    got = [sub.next_msg(timeout=5) for _ in range(3)]
    assert [m.headers for m in got[:2]] == [headers, headers] and got[0].raw_headers == got[1].raw_headers
    assert got[2].headers is not None and got[2].headers.get_all("X-List") == ["a", "b"] and got[2].data == b"[]"
    assert nc.stats.out_msgs == 3
    assert nc.stats.out_bytes == sum(len(m.raw_headers or b"") + len(m.data) for m in got)
    with pytest.raises(nats.BadSubjectError):  # the subject is checked first, as before
        nc.publish("bad subject", b"", headers={"bad key": "v"})


def test_empty_payload_and_binary_payload(nc: nats.Client) -> None:
    sub = nc.subscribe("pubsub.bin")
    payload = bytes(range(256)) + b"\r\nMSG fake 1 0\r\n\r\n"
    nc.publish("pubsub.bin")
    nc.publish("pubsub.bin", payload)
    assert sub.next_msg(timeout=2).data == b""
    assert sub.next_msg(timeout=2).data == payload


def test_wildcards(nc: nats.Client) -> None:
    star = nc.subscribe("wild.*")
    full = nc.subscribe("wild.>")
    for s in ("wild.a", "wild.a.b", "wild.c"):
        nc.publish(s, s.encode())
    nc.flush()
    assert [star.next_msg(2).subject for _ in range(2)] == ["wild.a", "wild.c"]
    assert [full.next_msg(2).subject for _ in range(3)] == ["wild.a", "wild.a.b", "wild.c"]
    with pytest.raises(nats.TimeoutError):
        star.next_msg(timeout=0.05)


def test_queue_group_delivers_each_message_once(nc: nats.Client) -> None:
    subs = [nc.subscribe("qg.work", queue="workers") for _ in range(3)]
    nc.flush()
    for i in range(300):
        nc.publish("qg.work", str(i).encode())
    nc.flush()
    got: list[bytes] = []
    counts = []
    for sub in subs:
        n = 0
        while True:
            try:
                got.append(sub.next_msg(timeout=0.3).data)
                n += 1
            except nats.TimeoutError:
                break
        counts.append(n)
    assert sorted(got, key=int) == [str(i).encode() for i in range(300)]
    assert all(c > 0 for c in counts), counts


def test_unsubscribe_with_limit_ends_after_that_many(nc: nats.Client) -> None:
    sub = nc.subscribe("limit.x")
    sub.unsubscribe(limit=5)
    for i in range(20):
        nc.publish("limit.x", str(i).encode())
    nc.flush()
    assert [m.data for m in sub] == [str(i).encode() for i in range(5)]
    assert not sub.is_valid


def test_subscribe_max_msgs(nc: nats.Client) -> None:
    sub = nc.subscribe("limit.y", max_msgs=3)
    for _i in range(10):
        nc.publish("limit.y", b"x")
    nc.flush()
    assert len(list(sub)) == 3


def test_unsubscribe_stops_delivery_at_once(nc: nats.Client) -> None:
    sub = nc.subscribe("unsub.now")
    nc.publish("unsub.now", b"1")
    nc.flush()
    sub.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError):
        sub.next_msg(timeout=0.1)
    with pytest.raises(nats.BadSubscriptionError):
        sub.unsubscribe()


def test_callback_runs_in_order_off_the_reader_thread(nc: nats.Client) -> None:
    seen: list[bytes] = []
    threads: set[str] = set()
    done = threading.Event()

    def handler(msg: nats.Msg) -> None:
        threads.add(threading.current_thread().name)
        seen.append(msg.data)
        if len(seen) == 100:
            done.set()

    nc.subscribe("cb.order", cb=handler)
    for i in range(100):
        nc.publish("cb.order", str(i).encode())
    assert done.wait(5)
    assert seen == [str(i).encode() for i in range(100)]
    # A subscription's messages run one at a time on the client's dispatcher
    # (any of its workers), never on the reader thread.
    assert threads and all(name.startswith("natsjs-dispatch-") for name in threads)


def test_callback_exception_goes_to_error_cb_and_subscription_continues(shared_server: NatsServer) -> None:
    errors: list[Exception] = []
    got = threading.Event()
    second = threading.Event()

    def handler(msg: nats.Msg) -> None:
        if msg.data == b"boom":
            raise RuntimeError("handler failed")
        second.set()

    def on_error(exc: Exception) -> None:
        errors.append(exc)
        got.set()

    with nats.connect(shared_server.url, error_cb=on_error) as nc:
        nc.subscribe("cb.err", cb=handler)
        nc.publish("cb.err", b"boom")
        nc.publish("cb.err", b"fine")
        assert got.wait(5) and second.wait(5)
    assert isinstance(errors[0], RuntimeError)


def test_no_echo(shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url, no_echo=True) as quiet, nats.connect(shared_server.url) as other:
        mine = quiet.subscribe("echo.test")
        quiet.flush()
        quiet.publish("echo.test", b"from me")
        other.publish("echo.test", b"from other")
        other.flush()
        assert mine.next_msg(timeout=2).data == b"from other"
        with pytest.raises(nats.TimeoutError):
            mine.next_msg(timeout=0.1)


@pytest.mark.usefixtures("instrumentation")
@pytest.mark.parametrize("bad", ["", "a b", "a..b", "orders.*", "orders.>", "trailing."])
def test_bad_subject_raises_and_sends_nothing(nc: nats.Client, bad: str) -> None:
    before = nc.stats.out_msgs
    with pytest.raises(nats.BadSubjectError):
        nc.publish(bad, b"x")
    if bad:  # reply="" is no reply subject (nats-py's default; a received msg.reply without one)
        with pytest.raises(nats.BadSubjectError):
            nc.publish("ok.subject", b"x", reply=bad)
    assert nc.stats.out_msgs == before
    nc.flush()  # the connection is still healthy


@pytest.mark.usefixtures("instrumentation")
def test_bad_subscribe_arguments(nc: nats.Client) -> None:
    with pytest.raises(nats.BadSubjectError):
        nc.subscribe("a..b")
    with pytest.raises(nats.BadSubjectError):
        nc.subscribe("a.b", queue="bad queue")
    with pytest.raises(InvalidCallbackTypeError):
        nc.subscribe("a.b", cb="not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidCallbackTypeError):
        nc.subscribe("a.b", None, "not callable")  # type: ignore[arg-type]
    with pytest.raises(nats.BadSubjectError):  # the subject is checked first, whatever the callback
        nc.subscribe("a..b", cb="not callable")  # type: ignore[arg-type]

    async def handler(msg: nats.Msg) -> None:  # nats-py code not yet converted
        pass

    with pytest.raises(InvalidCallbackTypeError, match="async function"):
        nc.subscribe("a.b", cb=handler)  # type: ignore[arg-type]
    with pytest.raises(InvalidCallbackTypeError, match="async function"):
        nc.jetstream().subscribe("a.b", cb=handler)  # type: ignore[arg-type]
    with pytest.raises(InvalidCallbackTypeError):
        nc.jetstream().subscribe("a.b", cb=42)  # type: ignore[arg-type]
    nc.flush()
    assert nc.stats.out_msgs == 0


@pytest.mark.usefixtures("instrumentation")
@pytest.mark.parametrize("payload", ["text", 123, None, ["x"]])
def test_wrong_payload_type_raises_type_error(nc: nats.Client, payload: object) -> None:
    with pytest.raises(TypeError):
        nc.publish("types.x", payload)  # type: ignore[arg-type]
    nc.flush()


@pytest.mark.usefixtures("instrumentation")
def test_bad_headers_are_refused(nc: nats.Client) -> None:
    with pytest.raises(nats.BadHeaderError):
        nc.publish("h.x", b"", headers={"bad key": "v"})
    with pytest.raises(nats.BadHeaderError):
        nc.publish("h.x", b"", headers={"k": "line\r\nbreak"})
    with pytest.raises(nats.BadHeaderError, match="mapping"):
        nc.publish("h.x", b"", headers=[("k", "v")])  # type: ignore[arg-type]
    with pytest.raises(nats.BadHeaderError, match="mapping"):
        nc.publish("h.x", b"", None, [("k", "v")])  # type: ignore[arg-type]
    with pytest.raises(nats.BadHeaderError, match="mapping"):
        nc.request("h.x", b"", 1, [("k", "v")])  # type: ignore[arg-type]
    nc.flush()
    assert nc.stats.out_msgs == 0


@pytest.mark.usefixtures("instrumentation")
def test_arguments_given_by_position_or_by_name_mean_the_same(nc: nats.Client) -> None:
    sub = nc.subscribe("pos.x")
    nc.publish("pos.x", b"1", None, {"k": "by position"})
    nc.publish("pos.x", b"2", headers={"k": "by name"})
    nc.publish(subject="pos.x", payload=b"3")
    nc.publish_now("pos.x", b"4", "", {"k": "now"})
    got = [sub.next_msg(timeout=5) for _ in range(4)]
    assert [m.data for m in got] == [b"1", b"2", b"3", b"4"]
    assert [m.headers.get("k") if m.headers else None for m in got] == ["by position", "by name", None, "now"]
    with pytest.raises(TypeError):
        nc.publish("pos.x", b"", None, None, "one too many")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        nc.publish("pos.x", b"", None, {"k": "v"}, headers={"k": "twice"})  # type: ignore[misc]
    with pytest.raises(TypeError):
        nc.request("pos.x", b"", bogus=1)  # type: ignore[call-arg]


def test_max_payload_is_enforced_before_sending() -> None:
    with NatsServer(max_payload=1024, jetstream=False) as server, nats.connect(server.url) as nc:
        assert nc.max_payload == 1024
        sub = nc.subscribe("big")
        nc.publish("big", b"x" * 1024)
        with pytest.raises(nats.MaxPayloadError):
            nc.publish("big", b"x" * 1025)
        with pytest.raises(nats.MaxPayloadError):
            nc.publish("big", b"x" * 1000, headers={"Pad": "y" * 30})
        nc.flush()
        assert len(sub.next_msg(timeout=2).data) == 1024
        assert nc.is_connected


def test_large_messages_round_trip(shared_server: NatsServer) -> None:
    with nats.connect(shared_server.url) as nc:
        sub = nc.subscribe("large")
        payload = bytes(range(256)) * 4096  # 1 MiB, the default max_payload
        nc.publish("large", payload)
        assert sub.next_msg(timeout=5).data == payload


def test_permissions_violation_reaches_error_cb() -> None:
    users = [{"user": "app", "password": "pw", "permissions": {"publish": {"deny": ["secret.>"]}}}]
    errors: list[Exception] = []
    got = threading.Event()

    def on_error(exc: Exception) -> None:
        errors.append(exc)
        got.set()

    with NatsServer(users=users, jetstream=False) as server:
        with nats.connect(server.url, user="app", password="pw", error_cb=on_error) as nc:
            nc.publish("secret.plans", b"x")
            assert got.wait(5)
            assert isinstance(errors[0], nats.PermissionsError)
            assert "secret.plans" in str(errors[0])
            nc.flush()  # a permission error leaves the connection up
            assert nc.is_connected


def test_slow_consumer_drops_only_for_that_subscription(shared_server: NatsServer) -> None:
    errors: list[Exception] = []
    with nats.connect(shared_server.url, error_cb=errors.append) as nc:
        slow = nc.subscribe("slow.x", pending_msgs_limit=10)
        fast = nc.subscribe("slow.x")
        for i in range(100):
            nc.publish("slow.x", str(i).encode())
        nc.flush()
        assert [fast.next_msg(2).data for _ in range(100)] == [str(i).encode() for i in range(100)]
        assert slow.pending_msgs == 10
        assert slow.dropped == 90
        assert [slow.next_msg(1).data for _ in range(10)] == [str(i).encode() for i in range(10)]
    slow_errors = [e for e in errors if isinstance(e, nats.SlowConsumerError)]
    assert len(slow_errors) == 1 and slow_errors[0].sid == slow.sid


def test_slow_consumer_byte_limit(nc: nats.Client) -> None:
    sub = nc.subscribe("slow.bytes", pending_bytes_limit=1000)
    for _ in range(20):
        nc.publish("slow.bytes", b"x" * 100)
    nc.flush()
    assert sub.pending_bytes <= 1000
    assert sub.dropped == 10


def test_one_subject_with_changing_sizes_and_payload_types(nc: nats.Client) -> None:
    # The hot path caches the PUB line per subject: a new size must never reuse the old one.
    sub = nc.subscribe("pubsub.sizes")
    payloads = [b"abc", b"hello", b"abc", b"", bytearray(b"12345678"), memoryview(b"xyz"), b"q" * 70_000]
    for p in payloads:
        nc.publish("pubsub.sizes", p)
    assert [sub.next_msg(timeout=2).data for _ in payloads] == [bytes(p) for p in payloads]
    with pytest.raises(nats.BadSubjectError):
        nc.publish("pubsub.sizes.*", b"abc")  # a valid subject cached beside it does not let a bad one through
