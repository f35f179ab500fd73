"""The one paging rule (natsjs_sync.jetstream.paging): a range read goes on after the last message each
page returned, on a server whose small ``max_pending`` cuts pages at test scale (``small_pending_server``).

A batched direct get answers at most ``max_bytes`` (the server's ``max_pending`` when the request gives
none) and ends the page with messages still pending; a pull of a consumer sends its messages at once,
and more than ``max_pending`` bytes queued for a client disconnect it as a slow consumer. Either way the
rows must be exactly the stored ones, in order, each once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import JetStream
from natsjs_sync.jetstream.paging import read_range_rows, reads_directly
from natsjs_sync.protocol.headers import parse_headers
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.protocol.subjects import subject_matches
from natsjs_sync.testing import NatsServer

from ..conftest import SMALL_PENDING

ROWS = 4_030
BODY = 3_000  # bytes per message: a page holds about twenty


@pytest.fixture
def small_js(small_pending_server: NatsServer) -> Iterator[JetStream]:
    with nats.connect(small_pending_server.url, name="paging-test") as nc:
        yield nc.jetstream()


def _stream(js: JetStream, allow_direct: bool) -> tuple[str, dict[int, str]]:
    """A stream of ``ROWS`` messages on ``<name>.a``, ``<name>.b.<i % 5>`` and ``<name>.c``, some of them
    deleted (the first, runs in the middle, the last); returns its name and what it stores, seq -> subject."""
    name = "PG" + next_nuid()[-10:]
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct, storage="memory")
    stored: dict[int, str] = {}
    for i in range(ROWS):
        subject = f"{name}.a" if i % 3 == 0 else f"{name}.b.{i % 5}" if i % 3 == 1 else f"{name}.c"
        js.publish_async(subject, i.to_bytes(4, "big") * (BODY // 4), headers={"I": str(i)})
        stored[i + 1] = subject
    js.publish_async_complete(timeout=60)
    st = js.stream(name)
    for seq in (1, 2, 3, 500, 501, 502, 503, 2_222, ROWS):
        st.delete_msg(seq)
        del stored[seq]
    return name, stored


def _read(js: JetStream, name: str, start: int, end: int, subjects: list[str] | None) -> list[int]:
    seqs = []
    for subject, seq, _ts, headers, data in read_range_rows(js, name, start, end, subjects, batch=4_000,
                                                            timeout=10.0, retry_timeout=0.0):
        i = seq - 1
        own = parse_headers(headers)[2] if isinstance(headers, bytes) else headers
        assert own is not None and own.get("I") == str(i), (seq, own)
        assert data == i.to_bytes(4, "big") * (BODY // 4), seq
        assert subject.startswith(name + ".")
        seqs.append(seq)
    return seqs


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct get", "consumer"])
@pytest.mark.parametrize("filters", [None, ["a"], ["b.*"], ["a", "c"], ["b.>", "b.1", "a"]],
                         ids=["unfiltered", "one subject", "one wildcard", "two subjects", "overlapping"])
def test_a_range_read_gives_every_stored_row_once_when_the_server_cuts_its_pages(
        small_pending_server: NatsServer, small_js: JetStream, allow_direct: bool, filters: list[str] | None) -> None:
    name, stored = _stream(small_js, allow_direct)
    js = small_js
    info = js.stream(name).info()
    assert reads_directly(js, info) == (allow_direct and js.supports("direct_get_batch"))
    assert js.nc.max_payload == SMALL_PENDING["max_payload"]  # pages of at most that many bytes: 180 and more
    subjects = [f"{name}.{f}" for f in filters] if filters else None
    for start, end in ((1, ROWS), (4, ROWS - 1), (503, 2_300)):
        want = [s for s in sorted(stored) if start <= s <= end
                and (subjects is None or any(subject_matches(p, stored[s]) for p in subjects))]
        got = _read(js, name, start, end, subjects)
        assert got == want, (start, end, len(got), len(want), sorted(set(want) - set(got))[:10])
    assert js.stream(name).info().state.consumer_count == 0  # nothing left behind
    assert "Slow Consumer" not in small_pending_server.read_log()
    js.delete_stream(name)


def _keys_stream(js: JetStream, keys: int) -> tuple[str, int]:
    """A stream of one ``BODY``-byte message on each of ``<name>.k<i>`` (more than a page holds); returns
    its name and its last sequence."""
    name = "ML" + next_nuid()[-10:]
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True, storage="memory")
    for i in range(keys):
        js.publish_async(f"{name}.k{i}", i.to_bytes(4, "big") * (BODY // 4))
    js.publish_async_complete(timeout=60)
    return name, keys


@pytest.mark.server("2.11")
@pytest.mark.parametrize("batch", [None, 100], ids=["server's limit", "batch of 100"])
def test_the_newest_message_of_many_subjects_is_given_for_every_subject_when_the_server_cuts_its_answer(
        small_pending_server: NatsServer, small_js: JetStream, batch: int | None) -> None:
    """600 subjects of 3,000 bytes: 1.8 MB, past the server's 1 MiB ``max_pending``. Each answer is cut,
    and a write made meanwhile does not change what is given (the first answer's ``up_to_seq`` holds)."""
    js = small_js
    name, last = _keys_stream(js, 600)
    st = js.stream(name)
    got = []
    for raw in st.direct_get_last_for_subjects([f"{name}.>"], batch=batch, timeout=30):
        if not got:
            js.publish(f"{name}.k599", b"newer")  # after up_to_seq: not given
        got.append((raw.seq, raw.subject, raw.data))
    assert [seq for seq, _, _ in got] == list(range(1, last + 1))
    assert all(subject == f"{name}.k{seq - 1}" and data == (seq - 1).to_bytes(4, "big") * (BODY // 4)
               for seq, subject, data in got)
    assert "Slow Consumer" not in small_pending_server.read_log()
    js.delete_stream(name)


@pytest.mark.server("2.11")
def test_a_batched_direct_get_past_the_servers_limit_gives_the_whole_batch(
        small_pending_server: NatsServer, small_js: JetStream) -> None:
    js = small_js
    name, _ = _keys_stream(js, 600)
    st = js.stream(name)
    assert [m.seq for m in st.direct_get_batch(seq=3, batch=550, timeout=30)] == list(range(3, 553))
    assert [m.seq for m in st.direct_get_batch(seq=590, batch=550, subject=f"{name}.*", timeout=30)] == list(
        range(590, 601))  # fewer stored: what there is
    # With max_bytes: one answer, what the server sends before that many bytes (and the message crossing it).
    assert [m.seq for m in st.direct_get_batch(seq=1, batch=550, max_bytes=2 * BODY, timeout=30)] == [1, 2]
    assert "Slow Consumer" not in small_pending_server.read_log()
    js.delete_stream(name)


def test_a_message_larger_than_8_mib_is_read_through_a_consumer_and_watched() -> None:
    """A server taking 16 MiB messages: a pull is sized to hold any message it stores (a pull too small
    for the next message is answered at once with 409 and nothing else; asking again spun for ever)."""
    import threading

    big = b"y" * (10 * 1024 * 1024)
    with NatsServer(config={"max_payload": 16 * 1024 * 1024}) as server, \
            nats.connect(server.url, name="paging-big") as nc:
        js = nc.jetstream()
        name = "BIG" + next_nuid()[-8:]
        js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=False, storage="memory")
        for data in (b"a", big, b"c"):
            js.publish(f"{name}.x", data)
        kv = js.create_key_value(bucket="BIG" + next_nuid()[-8:])
        kv.put("k", big)
        got: list[object] = []

        def read() -> None:
            got.append([row[4] for row in read_range_rows(js, name, 1, 3, timeout=10, retry_timeout=0,
                                                          direct=False)])
            with kv.watch_all() as w:
                entry = w.next(timeout=10)
                got.append(entry.value if entry is not None else None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(60)  # a bound, not a wait: the read takes a fraction of a second
        assert got == [[b"a", big, b"c"], big]


def test_a_read_through_a_consumer_ends_when_the_rest_of_its_range_is_purged_meanwhile(
        small_pending_server: NatsServer, small_js: JetStream) -> None:
    """The last message received said more were pending, then they were purged: nothing can come at or
    before the range's end any more, so the read ends (it pulled again at every expiry, for ever)."""
    import threading

    js = small_js
    name, _ = _stream(js, allow_direct=False)
    rows = read_range_rows(js, name, 1, ROWS, timeout=2.0, retry_timeout=0.0, direct=False)
    first = next(rows)[1]
    js.stream(name).purge()
    rest: list[int] = []
    reader = threading.Thread(target=lambda: rest.extend(row[1] for row in rows), daemon=True)
    reader.start()
    reader.join(30)  # a bound: the read ends at the consumer's next heartbeat
    assert not reader.is_alive()
    assert first == 4 and 0 < len(rest) < ROWS  # what was on its way before the purge
    assert rest == sorted(rest)
    js.delete_stream(name)
