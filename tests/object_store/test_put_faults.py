"""An object-store put keeps the data under faults.

- The info (meta) publish of a put unconfirmed in time: the server may still
  store it. The old put purged the new chunks anyway; once the info landed it
  pointed at purged chunks, and the previous version's chunks were orphaned:
  both versions were gone. Now the info is sent again under the same message
  id while time is left, and reported (chunks kept) when it never is confirmed.
- Two puts of one name at once: the one whose info lands second purged the
  chunks of the version it read at the start, not of the one it replaced.
- A put whose old-chunk purge failed raised, after the new version was stored.
- Chunk acknowledgements outstanding at the deadline raised the bare
  ``concurrent.futures`` TimeoutError, and the clean-up purge then waited the
  context's timeout on top of the put's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

import natsjs_sync as nats
from natsjs_sync.jetstream import ObjectMeta, ObjectStore
from natsjs_sync.jetstream.client_trace import ClientTrace, add_client_trace
from natsjs_sync.jetstream.object_store import _Leftovers
from natsjs_sync.testing import FaultProxy, NatsServer

from ..conftest import wait_until


@dataclass
class Rig:
    server: NatsServer
    proxy: FaultProxy
    nc: nats.Client  # through the proxy
    witness: nats.Client  # straight to the server
    obs: ObjectStore

    def replies(self) -> int:
        return self.proxy.server_frames("MSG") + self.proxy.server_frames("HMSG")

    def messages(self) -> int:
        return self.witness.jetstream().stream("OBJ_F").info().state.messages


@pytest.fixture
def rig() -> Iterator[Rig]:
    server = NatsServer()
    server.start()
    proxy = FaultProxy(server.url).start()
    nc = nats.connect(proxy.url, name="put-faults")
    witness = nats.connect(server.url, name="witness")
    try:
        obs = nc.jetstream(timeout=30).create_object_store(bucket="F", storage="memory")
        yield Rig(server, proxy, nc, witness, obs)
    finally:
        proxy.heal()
        nc.close()
        witness.close()
        proxy.close()
        server.close()


def _after_last_chunk_acked(rig: Rig, total: int, then: Callable[[], None]) -> Callable[[int, int | None], None]:
    """A progress callback that, once the last chunk's ack has come back (the
    read of the old info and one ack per chunk since it was made), runs ``then``:
    the fault then hits the info publish alone."""
    base = rig.replies()
    chunks = [0]

    def progress(sent: int, size: int | None) -> None:
        chunks[0] += 1
        if sent == total:
            assert wait_until(lambda: rig.replies() >= base + 1 + chunks[0], timeout=10)
            then()

    return progress


def test_an_unconfirmed_info_is_sent_again_and_the_put_finishes(rig: Rig) -> None:
    old = rig.obs.put("doc", b"version one")
    new = os.urandom(1000)
    held: list[int] = []
    healed = threading.Event()

    def hold_the_info() -> None:
        held.append(rig.proxy.client_frames("HPUB"))
        rig.proxy.blackhole("to_server")

    def heal_on_the_second_send() -> None:
        # The first info publish is held (it times out); heal once it is sent again.
        wait_until(lambda: bool(held) and rig.proxy.client_frames("HPUB") >= held[0] + 2, timeout=20)
        rig.proxy.heal()
        healed.set()

    healer = threading.Thread(target=heal_on_the_second_send, name="test-healer")
    healer.start()
    try:
        info = rig.obs.put("doc", new, progress=_after_last_chunk_acked(rig, len(new), hold_the_info), timeout=8)
    finally:
        healer.join(30)
    assert healed.is_set()
    assert info.nuid != old.nuid
    assert rig.obs.get_info("doc").nuid == info.nuid
    assert rig.obs.get_bytes("doc", timeout=10) == new
    assert rig.messages() == 2  # the info and the one new chunk: the old chunk was purged


def test_an_info_never_confirmed_is_reported_and_its_chunks_kept(rig: Rig) -> None:
    old = rig.obs.put("doc", b"version one")
    new = os.urandom(1000)

    def hold_the_info() -> None:
        rig.proxy.blackhole("to_server")

    with pytest.raises(nats.TimeoutError, match=r"'doc'.*may still be stored"):
        rig.obs.put("doc", new, progress=_after_last_chunk_acked(rig, len(new), hold_the_info), timeout=3)
    rig.proxy.heal()  # what was held reaches the server now: the info lands after the put gave up
    wj = rig.witness.jetstream()
    assert wait_until(lambda: wj.object_store("F").get_info("doc").nuid != old.nuid, timeout=10)
    # The old put purged the chunks this info points at: the object could not be read.
    assert wj.object_store("F").get_bytes("doc", timeout=10) == new


@pytest.mark.parametrize("outcome", ["info lands late", "info lost"])
def test_a_retry_after_an_unconfirmed_info_leaves_no_chunks_behind(rig: Rig, outcome: str) -> None:
    """The put whose info went unconfirmed kept both versions' chunks (it cannot
    tell which is the object); the retry, once its own info is confirmed, purges
    them. The old code purged only what the retry replaced: version one's chunk
    stayed for ever when the unconfirmed info had landed, the unconfirmed put's
    own chunk when it had not."""
    rig.obs.put("doc", b"version one")
    second, third = os.urandom(1000), os.urandom(700)

    def hold_the_info() -> None:
        rig.proxy.blackhole("to_server")

    with pytest.raises(nats.TimeoutError, match="may still be stored"):
        rig.obs.put("doc", second, progress=_after_last_chunk_acked(rig, len(second), hold_the_info), timeout=3)
    if outcome == "info lands late":
        rig.proxy.heal()
        wj = rig.witness.jetstream()
        assert wait_until(lambda: wj.object_store("F").get_bytes("doc", timeout=10) == second, timeout=10)
    else:
        rig.proxy.cut()  # the held info goes with the connection
        rig.proxy.heal()
        assert wait_until(lambda: rig.nc.stats.reconnects >= 1 and rig.nc.is_connected, timeout=15)
    info = rig.obs.put("doc", third, timeout=20)  # the retry
    assert rig.obs.get_bytes("doc", timeout=10) == third and rig.obs.get_info("doc").nuid == info.nuid
    assert wait_until(lambda: rig.messages() == 2, timeout=10), \
        f"{rig.messages()} messages: chunks of an older version were left behind (want the info and one chunk)"


def test_a_put_whose_info_could_not_be_sent_stores_nothing(rig: Rig) -> None:
    """The connection goes down after the chunks are acknowledged: the info waits
    in the client's buffer until the put's deadline, is withdrawn there, and the
    put raises NotSentError; its chunks' purge goes out once the server is back.
    The old put raised "may still be stored" and its info was sent after the
    reconnect: the object was replaced after the caller had been told it failed."""
    old = rig.obs.put("doc", b"version one")
    new = os.urandom(1000)

    def server_away() -> None:
        rig.proxy.refuse_new()
        rig.proxy.cut()
        assert wait_until(lambda: not rig.nc.is_connected, timeout=10)  # the info is then buffered, unsent

    with pytest.raises(nats.NotSentError, match=r"'doc'.*stored nothing"):
        rig.obs.put("doc", new, progress=_after_last_chunk_acked(rig, len(new), server_away), timeout=2)
    rig.proxy.heal()
    wj = rig.witness.jetstream()
    assert wait_until(lambda: rig.messages() == 2, timeout=15), f"{rig.messages()} messages, want version one's 2"
    assert wj.object_store("F").get_info("doc").nuid == old.nuid
    assert rig.nc.jetstream().object_store("F").get_bytes("doc", timeout=10) == b"version one"


def test_a_put_overtaken_by_another_put_replaces_it_and_leaves_no_chunks(rig: Rig) -> None:
    rig.obs.put("doc", b"version one")
    other = os.urandom(300)
    mine = os.urandom(500)
    overtaken = [False]

    def overtake(sent: int, size: int | None) -> None:
        if not overtaken[0]:  # after this put read the old info, another put of the name runs through
            overtaken[0] = True
            rig.obs.put("doc", other, chunk_size=100)

    info = rig.obs.put("doc", mine, chunk_size=100, progress=overtake)
    assert overtaken[0]
    assert rig.obs.get_bytes("doc", timeout=10) == mine
    assert rig.obs.get_info("doc").nuid == info.nuid
    assert rig.messages() == 1 + 5  # the info and this put's chunks; nobody's chunks orphaned


def test_chunk_acks_missing_at_the_deadline_raise_our_timeout_within_the_budget(rig: Rig) -> None:
    data = os.urandom(8 * 1024)
    cut = [False]

    def hold_acks(sent: int, size: int | None) -> None:
        if not cut[0]:
            cut[0] = True
            rig.proxy.blackhole("to_client")

    start = time.monotonic()
    with pytest.raises(nats.TimeoutError, match="'late'") as info:
        rig.obs.put("late", data, chunk_size=1024, progress=hold_acks, timeout=2)
    elapsed = time.monotonic() - start
    assert isinstance(info.value, nats.NatsError)
    # The clean-up purge waited the context's 30 s after the put's 2 s.
    assert elapsed < 15, f"the put returned after {elapsed:.1f} s"
    rig.proxy.heal()
    # The clean-up purge was still sent: the chunks of the failed put go.
    assert wait_until(lambda: rig.messages() == 0, timeout=10)


def test_a_failed_purge_of_the_old_chunks_does_not_fail_a_stored_put() -> None:
    server = NatsServer(users=[{"user": "u", "password": "p", "permissions": {
        "publish": {"deny": ["$JS.API.STREAM.PURGE.>"]}}}])
    server.start()
    try:
        with nats.connect(server.url, user="u", password="p", name="no-purge") as nc:
            obs = nc.jetstream(timeout=10).create_object_store(bucket="NP", storage="memory")
            obs.put("doc", b"version one")
            info = obs.put("doc", b"version two", timeout=3)  # raised: the purge was refused
            assert obs.get_bytes("doc") == b"version two"
            assert obs.get_info("doc").nuid == info.nuid
    finally:
        server.close()


def _chunk_subjects(rig: Rig) -> dict[str, int]:
    info = rig.witness.jetstream().stream("OBJ_F").info(subjects_filter="$O.F.C.>")
    return dict(info.state.subjects or {})


def _lose_the_purge_of(rig: Rig, nuid: list[str]) -> Callable[[], None]:
    """A client trace that holds (blackholes) the connection as the purge of the chunks
    under ``nuid[0]`` goes out; returns the trace's cancel."""

    def sent(subject: str, payload: bytes) -> None:
        if subject.startswith("$JS.API.STREAM.PURGE.") and nuid and nuid[0].encode() in payload:
            rig.proxy.blackhole()

    return add_client_trace(ClientTrace(request_sent=sent)).cancel


def _drop_what_was_held(rig: Rig) -> None:
    before = rig.nc.stats.reconnects
    rig.proxy.cut()  # what was held goes with the connection: it never reaches the server
    rig.proxy.heal()
    assert wait_until(lambda: rig.nc.stats.reconnects > before and rig.nc.is_connected, timeout=15)


def test_chunks_whose_purge_after_a_replace_was_lost_go_with_the_next_put(rig: Rig) -> None:
    """The purge of the replaced version's chunks is lost with the connection: the
    put succeeded and says so, and the next put of the name that is confirmed purges
    them. The old code logged them as "may be left behind" and forgot them: version
    one's chunk stayed in the bucket for ever."""
    one = rig.obs.put("doc", b"version one")
    cancel = _lose_the_purge_of(rig, [one.nuid])
    try:
        rig.obs.put("doc", b"version two", timeout=3)  # stored; only its clean-up was lost
    finally:
        cancel()
    _drop_what_was_held(rig)
    assert f"$O.F.C.{one.nuid}" in _chunk_subjects(rig)
    three = rig.obs.put("doc", b"version three", timeout=10)
    assert rig.obs.get_bytes("doc", timeout=10) == b"version three"
    assert _chunk_subjects(rig) == {f"$O.F.C.{three.nuid}": 1}, "chunks of an older version were left behind"


def test_chunks_of_a_failed_put_whose_purge_was_lost_go_with_the_next_put(rig: Rig) -> None:
    """A put fails after a chunk was stored and the purge of its chunks is lost:
    the next put of the name that is confirmed purges them (the old code never did)."""
    rig.obs.put("doc", b"version one")
    nuid: list[str] = []
    stored = rig.messages()

    def fail_after_a_stored_chunk(sent: int, size: int | None) -> None:
        assert wait_until(lambda: rig.messages() > stored, timeout=10)
        nuid.extend(s.split(".")[-1] for s in _chunk_subjects(rig) if s.split(".")[-1] not in seen)
        raise KeyboardInterrupt  # the caller gives up: a BaseException, as from a signal

    seen = {s.split(".")[-1] for s in _chunk_subjects(rig)}
    cancel = _lose_the_purge_of(rig, nuid)
    try:
        with pytest.raises(KeyboardInterrupt):
            rig.obs.put("doc", os.urandom(300), chunk_size=100, progress=fail_after_a_stored_chunk, timeout=3)
    finally:
        cancel()
    assert len(nuid) == 1
    _drop_what_was_held(rig)
    assert f"$O.F.C.{nuid[0]}" in _chunk_subjects(rig)
    three = rig.obs.put("doc", b"version three", timeout=10)
    assert _chunk_subjects(rig) == {f"$O.F.C.{three.nuid}": 1}, "chunks of the failed put were left behind"


def test_leftovers_whose_purge_was_lost_are_not_forgotten(rig: Rig) -> None:
    """A put's info goes unconfirmed (both versions' chunks are kept); the next put is
    confirmed but the purge of those chunks is lost: the put after it purges them.
    The old code counted them purged once the purge was tried."""
    one = rig.obs.put("doc", b"version one")
    second = os.urandom(1000)

    def hold_the_info() -> None:
        rig.proxy.blackhole("to_server")

    with pytest.raises(nats.TimeoutError, match="may still be stored"):
        rig.obs.put("doc", second, progress=_after_last_chunk_acked(rig, len(second), hold_the_info), timeout=3)
    _drop_what_was_held(rig)  # the info never lands: version one is the object
    cancel = _lose_the_purge_of(rig, [one.nuid])
    try:
        rig.obs.put("doc", b"version three", timeout=3)
    finally:
        cancel()
    _drop_what_was_held(rig)
    assert f"$O.F.C.{one.nuid}" in _chunk_subjects(rig)
    four = rig.obs.put("doc", b"version four", timeout=10)
    assert wait_until(lambda: _chunk_subjects(rig) == {f"$O.F.C.{four.nuid}": 1}, timeout=10), \
        f"chunks left behind: {_chunk_subjects(rig)}"


def test_what_is_kept_for_one_object_is_bounded() -> None:
    """Where purges are never answered (the client may not purge), each put would
    keep one more nuid and ask for all of them to be purged on every later put."""
    kept = _Leftovers()
    key = ("$JS.API", "OBJ_F", "doc")
    for i in range(3 * _Leftovers.MAX_PER_OBJECT):
        kept.add(key, {f"nuid{i:04d}"})
    assert len(kept.of(key)) == _Leftovers.MAX_PER_OBJECT
    kept.settled(key, {"nuid0000"})
    assert len(kept.of(key)) == _Leftovers.MAX_PER_OBJECT - 1


def test_a_put_does_not_purge_the_chunks_of_an_object_renamed_away_meanwhile(rig: Rig) -> None:
    """While a put of "doc" writes its chunks, the object is renamed to "kept": the
    info's first attempt is refused (the name's last info changed), and the put
    stores its info as the first of a now empty name. It replaced nothing; the old
    code purged the version its refused attempt had expected, which "kept" still
    points at: "kept" could no longer be read."""
    rig.obs.put("doc", b"version one")
    renamed = [False]

    def rename_meanwhile(sent: int, size: int | None) -> None:
        if not renamed[0]:
            renamed[0] = True
            rig.witness.jetstream().object_store("F").update_meta("doc", ObjectMeta(name="kept"))

    rig.obs.put("doc", b"version two", progress=rename_meanwhile, timeout=10)
    assert renamed[0]
    assert rig.obs.get_bytes("doc", timeout=10) == b"version two"
    assert rig.obs.get_bytes("kept", timeout=5) == b"version one"
