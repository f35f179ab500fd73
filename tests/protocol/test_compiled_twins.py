"""Hot-path helpers with a compiled twin (the ordered consumer's ack-subject
check, the publish frame append): the Python reference and the compiled twin
give the same answers."""

from __future__ import annotations

import random
import threading

import pytest

from natsjs_sync.protocol.jetstream import ackreply

PREFIX = "$JS.ACK.ORDERS.oc_1"


def _twins() -> list:
    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [ackreply.ack_tail_py]
    return [ackreply.ack_tail_py, _speedups.ack_tail]


@pytest.mark.parametrize("reply, expected", [
    (f"{PREFIX}.1.42.7.1795504668232768833.9", (42, 7)),
    (f"{PREFIX}.3.1.1.1.0", (1, 1)),
    (f"{PREFIX}.1.999999999999999999.1.1.0", (999999999999999999, 1)),
    (f"{PREFIX}.1.1000000000000000000.1.1.0", None),  # over 18 digits: left to the full parse
    (f"{PREFIX}.1.42.7.1795504668232768833", None),  # four tokens
    (f"{PREFIX}.1.42.7.1795504668232768833.9.x", None),  # six tokens
    (f"{PREFIX}.1..7.1.9", None),  # an empty token
    (f"{PREFIX}.1.42.7.1.", None),
    (f"{PREFIX}..42.7.1.9", None),
    (f"{PREFIX}.1.4a.7.1.9", None),
    (f"{PREFIX}.1.42.+7.1.9", None),  # int() would take it; a sequence never has a sign
    (f"{PREFIX}.1.42.\u0663.1.9", None),  # a non-ASCII digit
    ("$JS.ACK.ORDERS.oc_2.1.42.7.1.9", None),  # another consumer
    ("$JS.ACK.ORDERS.oc_10.1.42.7.1.9", None),  # a consumer whose name starts with ours
    ("$JS.ACK.hub.ACCHASH.ORDERS.oc_1.1.42.7.1.9.tok", None),  # the domain form
    (PREFIX, None),
    ("", None),
    ("_INBOX.abc", None),
    # A reply that was not UTF-8 on the wire (the parser decodes it with surrogateescape):
    (f"{PREFIX}.1.42.7.1.\udcff", (42, 7)),
    (f"{PREFIX}.1.4\udcff.7.1.9", None),
    ("$JS.ACK.\udcff.oc_1.1.42.7.1.9", None),
])
def test_ack_tail_reads_the_sequences_of_one_consumers_subjects_only(reply: str, expected: object) -> None:
    for ack_tail in _twins():
        assert ack_tail(reply, PREFIX) == expected, ack_tail


def test_compiled_and_python_twins_agree_on_random_subjects() -> None:
    twins = _twins()
    if len(twins) == 1:
        pytest.skip("the compiled extension is not built in this install (no C compiler)")
    py, compiled = twins
    rng = random.Random(20261124)
    alphabet = "0123456789.._-aZ+ \u00e9"
    for _ in range(20_000):
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        reply = PREFIX + rng.choice(["", ".", ".1.2.3.4.5", "."]) + tail
        assert compiled(reply, PREFIX) == py(reply, PREFIX), reply


def test_the_twin_in_use_is_the_compiled_one_where_it_was_built() -> None:
    twins = _twins()
    if len(twins) == 1:
        pytest.skip("the compiled extension is not built in this install (no C compiler)")
    import os
    if os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
        assert ackreply.ack_tail is ackreply.ack_tail_py
    else:
        assert ackreply.ack_tail is twins[1]


def _outlets() -> list:
    from natsjs_sync._core.outlet import OutletPy

    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [OutletPy]
    return [OutletPy, _speedups.Outlet]


def _drive_outlet(outlet_cls: type) -> list:
    """One script of publishes against an outlet: what it took, laid out, counted and asked for."""
    calls: list = []
    buffer = bytearray(b"PING\r\n")
    subjects = {"a.b": b"a.b", "big": b"big", "\u00e9": "\u00e9".encode()}
    outlet = outlet_cls(buffer, subjects, 100, lambda: calls.append("wake"), lambda: calls.append("full"))
    out: list = [("closed", outlet("a.b", b"x"), bytes(buffer))]  # not open: nothing done
    outlet.open = 1
    out.append(("open", outlet("a.b", b"abc"), outlet("\u00e9", b""), bytes(buffer), list(calls)))
    outlet.flush_requested = 1
    out.append(("requested", outlet("a.b", b"de"), list(calls)))  # a flush is asked for: no wake
    for subject, payload in (("unknown", b"x"), ("a.b", bytearray(b"x")), ("a.b", memoryview(b"x")), (1, b"x")):
        out.append(("general path", outlet(subject, payload)))  # not validated, or not bytes
    outlet.max_payload = 3
    out.append(("too big", outlet("a.b", b"abcd"), outlet("a.b", b"abc")))
    outlet.max_payload = 1 << 20
    big = bytes(range(256)) * 400
    out.append(("over the threshold", outlet("big", big), list(calls)))
    out.append(("counted", outlet.out_msgs, outlet.out_bytes, len(buffer)))
    assert bytes(buffer).endswith(b"PUB big 102400\r\n" + big + b"\r\n")
    return out


def test_outlet_twins_lay_out_count_and_decline_alike() -> None:
    runs = [_drive_outlet(cls) for cls in _outlets()]
    frames = b"PING\r\nPUB a.b 3\r\nabc\r\nPUB \xc3\xa9 0\r\n\r\n"
    assert runs[0][:3] == [("closed", False, b"PING\r\n"), ("open", True, True, frames, ["wake", "wake"]),
                           ("requested", True, ["wake", "wake"])]
    assert runs[0][3:8] == [("general path", False)] * 4 + [("too big", False, True)]
    assert runs[0][8] == ("over the threshold", True, ["wake", "wake", "full"])
    assert runs[0][9][:3] == ("counted", 5, 3 + 0 + 2 + 3 + 102400)
    for run in runs:
        assert run == runs[0]
    if len(runs) == 2:
        with pytest.raises(TypeError):
            _outlets()[1](b"not a bytearray", {}, 1, print, print)
        with pytest.raises(TypeError):
            _outlets()[1](bytearray(), {}, 1, print, print)("a", b"x", b"block", b"extra")


def _drive_headed_outlet(cls: type) -> list:
    """A typed publish's frames: a header block the library encoded, in front of the payload."""
    buffer = bytearray()
    calls: list[str] = []
    outlet = cls(buffer, {"a.b": b"a.b"}, 1 << 20, lambda: calls.append("wake"), lambda: calls.append("full"))
    outlet.open = 1
    block = b"NATS/1.0\r\ncontent-type: application/json\r\n\r\n"
    out: list = [("headed", outlet("a.b", b'{"x":1}', block), outlet("a.b", b"", block))]
    out.append(("none is no block", outlet("a.b", b"p", None)))
    out.append(("not bytes", outlet("a.b", b"p", bytearray(block)), outlet("c.d", b"p", block)))
    outlet.max_payload = len(block) + 2
    out.append(("too big with its headers", outlet("a.b", b"abc", block), outlet("a.b", b"ab", block)))
    out.append(("counted", outlet.out_msgs, outlet.out_bytes, bytes(buffer), calls))
    return out


def test_outlet_twins_lay_out_header_blocks_alike() -> None:
    runs = [_drive_headed_outlet(cls) for cls in _outlets()]
    block = b"NATS/1.0\r\ncontent-type: application/json\r\n\r\n"
    n = len(block)
    assert runs[0][:4] == [("headed", True, True), ("none is no block", True), ("not bytes", False, False),
                           ("too big with its headers", False, True)]
    assert runs[0][4][:4] == (
        "counted", 4, (n + 7) + n + 1 + (n + 2),
        b"HPUB a.b %d %d\r\n%b{\"x\":1}\r\n" % (n, n + 7, block) + b"HPUB a.b %d %d\r\n%b\r\n" % (n, n, block)
        + b"PUB a.b 1\r\np\r\n" + b"HPUB a.b %d %d\r\n%bab\r\n" % (n, n + 2, block))
    for run in runs:
        assert run == runs[0]


# ---------------------------------------------------------------- the reader's delivery path

def _inlets() -> list:
    from natsjs_sync._core.inlet import InletPy

    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [InletPy]
    return [InletPy, _speedups.Inlet]


def _route_runs() -> list:
    import os

    from natsjs_sync._core.inlet import route_run_py

    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [route_run_py]
    if os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
        return [route_run_py]  # the compiled one needs Msg's slots, which are then not registered
    return [route_run_py, _speedups.route_run]


def _msg(data: bytes, sid: int = 1) -> object:
    from natsjs_sync.msg import Msg

    return Msg("s", sid, "", None, data)


def _drive(inlet_cls: type) -> list:
    """One script of deliveries against an inlet: what it queued, reported and counted."""
    import queue

    q: queue.SimpleQueue[object] = queue.SimpleQueue()
    events: list = []
    inlet = inlet_cls(q.put, q.qsize, 3, 10, lambda dropped: events.append(("slow", dropped)))
    for data in (b"aaaa", b"bbbb", b"cc", b"d", b"eee"):  # 10 bytes fit; the 5th is over (11)
        inlet(_msg(data))
    events.append(("queued", q.qsize(), inlet.received, inlet.dropped, inlet.bytes_in, inlet.slow))
    q.get_nowait()
    inlet.bytes_out += 4  # the consumer took "aaaa": room again, the episode ends
    inlet(_msg(b"ff"))
    inlet(_msg(b"gggggg"))  # over the bytes again: a second episode, reported again
    events.append(("after", q.qsize(), inlet.received, inlet.dropped, inlet.bytes_in, inlet.slow))
    inlet.msgs_limit = 1 << 62  # no message limit
    inlet.bytes_limit = 1 << 62
    inlet.on_max = lambda: events.append(("max", inlet.received))
    inlet.max = 10
    for _ in range(4):
        inlet(_msg(b"h"))
    events.append(("unlimited", q.qsize(), inlet.received, inlet.dropped))
    inlet.closed = 1
    inlet(_msg(b"ignored"))
    events.append(("closed", q.qsize(), inlet.received))
    return events


def test_inlet_twins_count_limit_and_report_alike() -> None:
    runs = [_drive(cls) for cls in _inlets()]
    expected = [
        ("slow", 1),  # the 4th message is over the message limit (3 queued)
        ("queued", 3, 5, 2, 10, 1),
        ("slow", 3),
        ("after", 3, 7, 3, 12, 1),
        ("max", 10),  # from the 10th message on (a subscription closes the inlet there)
        ("max", 11),
        ("unlimited", 7, 11, 3),
        ("closed", 7, 11),
    ]
    for run in runs:
        assert run == expected


def test_inlet_errors_of_a_callback_propagate() -> None:
    import queue

    for cls in _inlets():
        q: queue.SimpleQueue[object] = queue.SimpleQueue()

        def boom(_dropped: int) -> None:
            raise RuntimeError("reporter failed")

        inlet = cls(q.put, q.qsize, 0, 100, boom)
        with pytest.raises(RuntimeError, match="reporter failed"):
            inlet(_msg(b"x"))


def test_a_compiled_inlet_in_a_reference_cycle_is_collected() -> None:
    import gc
    import queue
    import weakref

    inlets = _inlets()
    if len(inlets) == 1:
        pytest.skip("the compiled extension is not built in this install (no C compiler)")

    class Owner:
        def at_max(self) -> None:
            pass

    owner = Owner()
    q: queue.SimpleQueue[object] = queue.SimpleQueue()
    owner.inlet = inlets[1](q.put, q.qsize, 10, 10)  # type: ignore[attr-defined]
    owner.inlet.on_max = owner.at_max  # type: ignore[attr-defined]  # owner -> inlet -> bound method -> owner
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def test_route_run_twins_count_a_run_then_route_it_up_to_the_first_other_event() -> None:
    from natsjs_sync._core.stats import Stats
    from natsjs_sync.msg import Msg

    for route_run in _route_runs():
        stats = Stats()
        got: list = []

        def first(m: object, got: list = got, stats: Stats = stats) -> None:
            got.append((m.data, stats.in_msgs))  # type: ignore[attr-defined]  # what was counted when it was routed

        routes = {1: first, 2: lambda m, got=got: got.append((m.data, "two"))}
        events = [_msg(b"a"), _msg(b"bb", 2), _msg(b"ccc", 9), "PING", _msg(b"d"), object()]
        assert route_run(events, 0, routes, Msg, stats) == 3  # sid 9 has no route: counted, not routed
        assert (stats.in_msgs, stats.in_bytes) == (3, 6)
        assert route_run(events, 3, routes, Msg, stats) == 3  # not a message: nothing done
        assert route_run(events, 4, routes, Msg, stats) == 5
        assert route_run(events, 6, routes, Msg, stats) == 6
        assert (stats.in_msgs, stats.in_bytes) == (4, 7)
        assert got == [(b"a", 3), (b"bb", "two"), (b"d", 4)]  # the whole run was counted before the first route

        def failing(_m: object) -> None:
            raise ValueError("route failed")

        with pytest.raises(ValueError, match="route failed"):
            route_run([_msg(b"x")], 0, {1: failing}, Msg, stats)


def test_the_delivery_twins_in_use_are_the_compiled_ones_where_built() -> None:
    import os

    from natsjs_sync._core import inlet

    inlets = _inlets()
    if len(inlets) == 1 or os.environ.get("NATSJS_SYNC_PURE_PYTHON"):
        assert inlet.Inlet is inlet.InletPy
        assert inlet.route_run is inlet.route_run_py
    else:
        assert inlet.Inlet is inlets[1]
        assert inlet.route_run is _route_runs()[1]


def _self_replacing_on_max(cls: type) -> tuple[list[int], int]:
    import queue

    q: queue.SimpleQueue[object] = queue.SimpleQueue()
    inlet = cls(q.put, q.qsize, 10, 100)
    calls: list[int] = []

    def install() -> None:
        def once() -> None:  # only the inlet holds it: replacing it drops the last reference
            inlet.on_max = None
            calls.append(inlet.received)
        inlet.on_max = once

    install()
    inlet.max = 1
    inlet(_msg(b"a"))
    inlet(_msg(b"b"))
    return calls, q.qsize()


def test_an_inlet_survives_callbacks_that_replace_themselves_and_refuses_when_not_initialised() -> None:
    for cls in _inlets():
        assert _self_replacing_on_max(cls) == ([1], 2)
    if len(_inlets()) == 2:
        compiled = _inlets()[1]
        bare = compiled.__new__(compiled)
        with pytest.raises(TypeError):
            bare(_msg(b"x"))


def _drive_take(inlet_cls: type) -> list:
    """One script of takes against an inlet: what each returned or raised, and its counters."""
    import queue

    q: queue.SimpleQueue[object] = queue.SimpleQueue()
    inlet = inlet_cls(q.put, q.qsize, 1 << 62, 1 << 62)
    others: list = []

    def on_take(timeout: object, item: object) -> object:
        others.append((timeout, item))
        return "other"

    inlet.on_take = on_take
    out: list = []
    control = object()
    inlet(_msg(b"abc"))
    out.append(("not takeable", inlet.take(1.0), inlet.bytes_out))  # nothing taken: all to on_take
    inlet.get = q.get
    inlet.takeable = 1
    out.append(("float", inlet.take(1.0).data, inlet.bytes_out))
    inlet(_msg(b"de"))
    out.append(("int", inlet.take(2).data, inlet.bytes_out))
    inlet(_msg(b"f"))
    out.append(("none", inlet.take(None).data, inlet.bytes_out))
    q.put(control)
    out.append(("control", inlet.take(0.5), len(others)))  # a control item goes to on_take with it
    for odd in (-1.0, float("nan"), float("inf"), True, "1", 10**400):
        out.append(("odd", inlet.take(odd), len(others)))  # not a plain number of seconds: Python's rule
    with pytest.raises(queue.Empty):
        inlet.take(0)
    inlet.takeable = 0
    inlet(_msg(b"g"))
    out.append(("ended", inlet.take(1.0), q.qsize()))
    return [out, [(t, i is control) for t, i in others]]


def test_take_twins_hand_over_messages_and_leave_every_other_case_to_python() -> None:
    import os

    # The compiled take knows messages by Msg's registered slots, which pure mode does not register.
    inlets = _inlets()[:1] if os.environ.get("NATSJS_SYNC_PURE_PYTHON") else _inlets()
    runs = [_drive_take(cls) for cls in inlets]
    assert runs[0][0][:5] == [("not takeable", "other", 0), ("float", b"abc", 3), ("int", b"de", 5),
                              ("none", b"f", 6), ("control", "other", 2)]
    assert runs[0][1][:2] == [(1.0, False), (0.5, True)]
    for run in runs:
        assert repr(run) == repr(runs[0])  # (nan is not equal to itself)


def test_the_compiled_scanner_refuses_arguments_it_cannot_use_safely() -> None:
    """It writes Msg's slots at fixed offsets and reads from a position: an unrelated
    class, a subclass with slots of its own, a negative position or limit crashed
    the process. The parser never passes them; the entry point checks anyway."""
    from natsjs_sync.msg import Msg
    from natsjs_sync.protocol import _compiled

    _speedups = _compiled.speedups
    if _speedups is None:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")

    class Wider(Msg):
        __slots__ = ("extra",)

    class Unrelated:
        __slots__ = ("a", "b", "c", "d", "e", "f", "g")

    frame = b"MSG a 1 2\r\nhi\r\n"
    for cls in (Unrelated, object, int, Wider):
        assert not _speedups.accepts(cls)
        with pytest.raises(TypeError):
            _speedups.scan(frame, 0, cls, 1024, 1024)
    for pos, max_payload, max_control in [(-1, 1024, 1024), (-(2**40), 1024, 1024), (len(frame) + 1, 1024, 1024),
                                          (0, -1, 1024), (0, 1024, -1), (0, 1024, -(2**62))]:
        with pytest.raises(ValueError):
            _speedups.scan(frame, pos, Msg, max_payload, max_control)
    msgs, pos = _speedups.scan(frame, 0, Msg, 1024, 2**62)  # a huge limit is no overflow
    assert (pos, msgs[0].subject, msgs[0].data) == (len(frame), "a", b"hi")
    assert _speedups.scan(frame, len(frame), Msg, 1024, 1024) == ([], len(frame))


def test_the_compiled_scanner_shares_a_header_block_repeated_from_one_message_to_the_next() -> None:
    """Consecutive messages with the same header block (a publisher's content type) get
    one bytes object: a reader that looks the block up hashes it once. The blocks are
    equal, byte for byte, to those of the Python parser, shared or not."""
    from natsjs_sync.msg import Msg
    from natsjs_sync.protocol import _compiled
    from natsjs_sync.protocol.parser import Parser

    _speedups = _compiled.speedups
    if _speedups is None:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    a = b"NATS/1.0\r\ncontent-type: application/json\r\n\r\n"
    b = b"NATS/1.0\r\ncontent-type: application/jsoN\r\n\r\n"  # same size, one byte apart
    frames = [(a, b"{}"), (a, b"[1]"), (None, b"x"), (a, b""), (b, b"{}"), (b, b"{}"), (a[:-2] + b"X\r\n\r\n", b"1"),
              (a, b"2")]
    buf = b"".join(b"MSG s 1 %d\r\n%b\r\n" % (len(d), d) if h is None else
                   b"HMSG s 1 %d %d\r\n%b%b\r\n" % (len(h), len(h) + len(d), h, d) for h, d in frames)
    msgs, pos = _speedups.scan(buf, 0, Msg, 1 << 20, 4096)
    assert pos == len(buf)
    slow = Parser(msg_factory=Msg)
    slow._scan = None  # the Python reference alone
    reference = slow.feed(buf)
    assert [(m.raw_headers, m.data) for m in msgs] == [(m.raw_headers, m.data) for m in reference] == frames
    hdrs = [m.raw_headers for m in msgs]
    assert hdrs[0] is hdrs[1] is hdrs[3]  # a message without headers between changes nothing
    assert hdrs[4] is hdrs[5]
    assert hdrs[4] is not hdrs[3] and hdrs[6] is not hdrs[5] and hdrs[7] is not hdrs[6]
    # The next read's first message with the same block gets it too (a block per read cost an
    # allocation, and a typed reader's look-up a comparison of the bytes, for every read).
    # The carried block is the process's: a reader thread of another client alive in this process
    # may scan a block of its own between two calls, so the identity is asked of a pair of reads
    # back to back, in one of 20 tries (without the carry-over, in none).
    read = b"HMSG s 1 %d %d\r\n%b{}\r\n" % (len(a), len(a) + 2, a)
    for _ in range(20):
        (first,), _ = _speedups.scan(read, 0, Msg, 1 << 20, 4096)
        (second,), _ = _speedups.scan(read, 0, Msg, 1 << 20, 4096)
        if first.raw_headers is second.raw_headers:
            break
    else:
        pytest.fail("each read made a header block of its own")


def test_cached_block_twins_look_up_only_plain_dicts_of_str_pairs() -> None:
    """The header block cache is read for a plain dict of 1 to 8 pairs of exact str (the
    tuple of its pairs, in order, is the key), by both twins alike; anything else (a
    value that may compare equal to a str and format differently) is never looked up."""
    from natsjs_sync.protocol import _compiled
    from natsjs_sync.protocol import headers as headers_mod

    class Text(str):
        pass

    twins = [headers_mod.cached_block_py]
    if _compiled.speedups is not None:
        twins.append(_compiled.speedups.cached_block)
        assert headers_mod._cached_block is _compiled.speedups.cached_block
    eight = {f"k{i}": "v" for i in range(8)}
    nine = {**eight, "k8": "v"}
    blocks = {(("a", "1"),): b"A", (("a", "1"), ("b", "2")): b"AB", tuple(eight.items()): b"8",
              tuple(nine.items()): b"9"}
    cases: list[object] = [{"a": "1"}, {"a": "1", "b": "2"}, {"b": "2", "a": "1"}, eight, nine, {}, {"a": "2"},
                           {"a": Text("1")}, {Text("a"): "1"}, {"a": ["1"]}, {"a": 1}, headers_mod.Headers(a="1"),
                           [("a", "1")], None, "a"]
    results = [[cached_block(case, blocks) for case in cases] for cached_block in twins]
    assert results[0] == [b"A", b"AB", None, b"8", None, None, None, None, None, None, None, None, None, None,
                          None]
    assert all(r == results[0] for r in results)


def _send_locks() -> list:
    from natsjs_sync._core.writer import SendLock

    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return [SendLock]
    return [SendLock, _speedups.SendLock]


@pytest.mark.parametrize("lock_cls", _send_locks())
def test_send_lock_twins_let_only_their_holder_release_and_never_take_it_twice(lock_cls: type) -> None:
    lock = lock_cls()
    assert not lock.locked() and not lock.mine()
    with pytest.raises(RuntimeError):
        lock.release()  # held by nobody
    assert lock.acquire(False)
    assert lock.locked() and lock.mine()
    assert not lock.acquire(False) and not lock.acquire(True, 5)  # its holder never waits for itself
    seen: list = []

    def other() -> None:
        seen.append((lock.acquire(False), lock.acquire(timeout=0.01), lock.locked(), lock.mine()))
        try:
            lock.release()
        except RuntimeError:
            seen.append("refused")

    worker = threading.Thread(target=other)
    worker.start()
    worker.join(10)
    assert seen == [(False, False, True, False), "refused"]
    assert lock.locked()  # another thread's release left it held
    lock.release()
    assert not lock.locked() and not lock.mine()
    assert lock.acquire(timeout=0) and lock.acquire(blocking=False) is False
    lock.release()
    with pytest.raises(ValueError):
        lock.acquire(False, 1)
    with pytest.raises(ValueError):
        lock.acquire(True, -2)


@pytest.mark.parametrize("lock_cls", _send_locks())
def test_send_lock_twins_hand_over_to_a_waiting_thread(lock_cls: type) -> None:
    lock = lock_cls()
    assert lock.acquire()
    got = threading.Event()

    def waiter() -> None:
        if lock.acquire(True, 10):
            got.set()
            lock.release()

    worker = threading.Thread(target=waiter)
    worker.start()
    assert not got.wait(0.05)
    lock.release()
    assert got.wait(10)
    worker.join(10)
    assert not lock.locked()


def _register(mux: object) -> tuple[str, object]:
    """A request's token and waiter, entered as Connection.request enters them."""
    token, waiter, _ = mux.prepare_one()  # type: ignore[attr-defined]
    mux.waiting[token] = waiter  # type: ignore[attr-defined]
    return token, waiter


def _reply_routes() -> list:
    """Each way a response mux can route a reply: its Python method, and the compiled
    ReplyRoute where the extension is in use."""
    import os

    from natsjs_sync._core.requests import Waiter

    ways = [lambda mux: mux.route]
    try:
        from natsjs_sync.protocol import _speedups
    except ImportError:
        return ways
    if not os.environ.get("NATSJS_SYNC_PURE_PYTHON"):  # it needs Msg's slots, then not registered
        ways.append(lambda mux: _speedups.ReplyRoute(mux, Waiter))
    return ways


def test_reply_route_twins_wake_the_waiter_of_the_token_once_and_ignore_the_rest() -> None:
    from natsjs_sync._core.requests import ResponseMux
    from natsjs_sync.msg import Msg

    for make in _reply_routes():
        mux = ResponseMux()
        mux.start("_INBOX.abc.", 7)
        route = make(mux)
        token, waiter = _register(mux)
        other_token, other = _register(mux)
        waiter.end, other.end = 120, 80
        reply = Msg(f"_INBOX.abc.{token}", 7, "", None, b"yes")
        route(reply)
        assert waiter.value is reply and waiter.wait(0)  # stored and woken
        assert token not in mux.waiting and other_token in mux.waiting
        assert mux.replied_to == 120  # the server read everything written before that request
        route(Msg(f"_INBOX.abc.{other_token}", 7, "", None, b"late"))
        assert mux.replied_to == 120  # an earlier request's reply does not lower it
        assert other.value.data == b"late"
        route(Msg(f"_INBOX.abc.{token}", 7, "", None, b"again"))  # a second reply: nobody waits
        route(Msg("_INBOX.abc.999", 7, "", None, b"unknown"))
        route(Msg("_INBOX.a", 7, "", None, b"shorter than the prefix"))
        assert waiter.value is reply and mux.waiting == {}
        # A waiter failed meanwhile (the connection lost) keeps its failure: the value is set once.
        token, waiter = _register(mux)
        failure = ConnectionError("lost")
        waiter.set(failure)
        route(Msg(f"_INBOX.abc.{token}", 7, "", None, b"too late"))
        assert waiter.value is failure and waiter.wait(0) and not waiter.wait(0)
        assert token not in mux.waiting


def test_prepare_one_twins_make_a_waiter_and_its_reply_subject_and_leave_the_entry_to_the_caller() -> None:
    from natsjs_sync._core.requests import ResponseMux, Waiter
    from natsjs_sync.msg import Msg

    ways: list = [ResponseMux._prepare_one]
    compiled = ResponseMux().prepare_one
    if type(compiled).__name__ == "builtin_function_or_method":  # the compiled ReplyRoute.prepare
        ways.append(lambda mux: mux.prepare_one())
    for prepare_one in ways:
        mux = ResponseMux()
        mux.start("_INBOX.abc.", 7)
        made = [prepare_one(mux) for _ in range(3)]
        assert [(t, r) for t, _, r in made] == [("1", b"_INBOX.abc.1"), ("2", b"_INBOX.abc.2"),
                                               ("3", b"_INBOX.abc.3")]
        assert mux.waiting == {}  # the caller enters each (see Connection.request)
        for token, waiter, _ in made:
            assert type(waiter) is Waiter
            assert waiter.value is None and waiter.end == 0
            assert not waiter.wait(0)  # its lock is held until the reply
            mux.waiting[token] = waiter
        token, waiter, reply = made[1]
        waiter.end = 5
        mux.reply_route(Msg(reply.decode(), 7, "", None, b"r"))
        assert waiter.wait(0) and waiter.value.data == b"r" and mux.replied_to == 5
        assert set(mux.waiting) == {"1", "3"}


def test_reply_route_twins_hand_what_they_do_not_know_to_the_python_route() -> None:
    from natsjs_sync._core.requests import ResponseMux, Waiter
    from natsjs_sync.msg import Msg

    class TracedWaiter(Waiter):
        __slots__ = ("seen",)

        def set(self, value: object) -> None:
            self.seen = value
            super().set(value)

    class PlainMsg:  # not a compiled Msg: only its subject is read
        def __init__(self, subject: str) -> None:
            self.subject = subject

    for make in _reply_routes():
        mux = ResponseMux()
        mux.start("_INBOX.x.", 3)
        route = make(mux)
        waiter = TracedWaiter()
        mux.waiting["1"] = waiter
        route(Msg("_INBOX.x.1", 3, "", None, b"a"))
        assert waiter.seen.data == b"a" and waiter.value is waiter.seen and "1" not in mux.waiting
        token, plain = _register(mux)
        msg = PlainMsg(f"_INBOX.x.{token}")
        route(msg)
        assert plain.value is msg and token not in mux.waiting


def test_a_compiled_reply_route_in_a_reference_cycle_is_collected() -> None:
    import gc
    import weakref

    from natsjs_sync._core.requests import ResponseMux

    if len(_reply_routes()) == 1:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    mux = ResponseMux()  # mux -> its compiled route -> mux
    assert type(mux.reply_route).__name__ == "ReplyRoute"
    ref = weakref.ref(mux)
    del mux
    gc.collect()
    assert ref() is None


_HALF_MADE = r"""
from natsjs_sync._core.requests import ResponseMux, Waiter
from natsjs_sync.msg import Msg
from natsjs_sync.protocol import _speedups

for cls in (_speedups.ReplyRoute, _speedups.LanePut, _speedups.Feed):
    try:
        cls.__new__(cls)(Msg("_INBOX.x.1", 1, "", None, b""))
    except TypeError:
        pass
try:
    _speedups.ReplyRoute.__new__(_speedups.ReplyRoute).prepare()
except TypeError:
    pass

class Wide:  # a "value" slot far past a Waiter's, and no "end"
    __slots__ = tuple(f"pad{i}" for i in range(40)) + ("value",)

mux = ResponseMux()
mux.start("_INBOX.x.", 1)
route = _speedups.ReplyRoute(mux, Waiter)
try:
    route.__init__(mux, Wide)
except TypeError:
    pass
token, waiter, _ = mux.prepare_one()
mux.waiting[token] = waiter
reply = Msg(f"_INBOX.x.{token}", 1, "", None, b"yes")
route(reply)
assert waiter.value is reply and waiter.wait(0)
print("ok")
"""


def test_reply_route_and_lane_put_refuse_when_not_initialised_and_keep_their_slots_when_a_new_init_fails() -> None:
    """A bare ReplyRoute, LanePut or Feed (made by __new__ alone) raises TypeError when called,
    as an inlet does; a refused __init__ leaves the offsets it had (not another class's)."""
    import subprocess
    import sys

    if len(_reply_routes()) == 1:
        pytest.skip("the compiled extension is not in use (not built, or NATSJS_SYNC_PURE_PYTHON)")
    # A child process: the failure is a crash.
    done = subprocess.run([sys.executable, "-c", _HALF_MADE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_a_readers_feeder_gives_what_feed_gives_for_every_kind_of_read() -> None:
    """The reader feeds through ``parser.reader_feed()`` (compiled where built): reads that are not
    bytes, a frame split across reads, a large payload pending, and a broken stream all go as
    through ``feed`` itself."""
    from natsjs_sync.errors import ProtocolError
    from natsjs_sync.msg import Msg
    from natsjs_sync.protocol.parser import Parser

    reads: list[object] = [
        b"MSG a 1 2\r\nhi\r\nMSG b 1 3\r\nab",  # one whole, one split
        b"c\r\nPING\r\n",
        bytearray(b"MSG c 1 1\r\nx\r\n"),
        memoryview(b"MSG d 1 2\r\nyz\r\n"),
        b"MSG e 1 3000\r\n" + b"p" * 1000,  # its payload pending
        b"p" * 2000 + b"\r\nMSG f 1 1\r\nq\r\n",
        b"MSG g 1 1\r\nr\r\nBOGUS\r\n",  # a message, then bad bytes
        b"MSG h 1 1\r\ns\r\n",  # after the error: the parser stays broken
    ]

    def run(reader: bool) -> list[object]:
        p = Parser(256, 4096, msg_factory=Msg)
        feed = p.reader_feed() if reader else p.feed
        seen: list[object] = []
        for data in reads:
            try:
                events = feed(data)  # type: ignore[arg-type]
            except ProtocolError as exc:
                seen.append(("error", str(exc), [(m.subject, m.data) for m in p.parsed_before_error()]))
                continue
            seen.append([(m.subject, m.data) if isinstance(m, Msg) else repr(m) for m in events])
        return seen

    expected = run(False)
    assert expected[6][0] == "error" and expected[6][2] == [("g", b"r")] and expected[7][0] == "error"
    assert run(True) == expected


def test_a_parser_does_not_hold_its_readers_feed() -> None:
    """A reader keeps the feed; the parser does not point back at it, so a parser dropped
    with a large payload pending (a lost connection's) is freed at once, not by the cyclic
    garbage collector."""
    import gc

    from natsjs_sync.msg import Msg
    from natsjs_sync.protocol.parser import Parser

    p = Parser(msg_factory=Msg)
    feed = p.reader_feed()
    assert feed(b"MSG a 1 3000\r\n" + b"x" * 100) == []
    assert not any(r is feed for r in gc.get_referents(p))
    assert p.buffered == 100
