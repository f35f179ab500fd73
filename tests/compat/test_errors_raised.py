"""nats-py's exception classes are the ones raised, through the native API too
(the programs in ``programs/errors_*.py`` show the nats-py side)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import natsjs_sync as nats
from natsjs_sync._core.spi import link
from natsjs_sync._timeout import Deadline
from natsjs_sync.errors import ConnectionClosedError, ConnectionDrainingError, ObjectDeletedError, ObjectNotFoundError
from natsjs_sync.jetstream import ObjectStore
from natsjs_sync.jetstream.object_models import encode_info, encode_name
from natsjs_sync.protocol.nuid import next_nuid
from natsjs_sync.testing import NatsServer


@pytest.fixture
def obs(nc: nats.Client) -> Iterator[ObjectStore]:
    js = nc.jetstream()
    bucket = "e" + next_nuid()
    yield js.create_object_store(bucket)
    js.delete_object_store(bucket)


def test_calls_refused_in_the_last_phase_of_a_drain_raise_connection_draining_error(
        shared_server: NatsServer) -> None:
    """While a drain flushes its last publishes, a publish or a subscribe is refused with
    ConnectionDrainingError (nats-py's class), which is also a ConnectionClosedError."""
    nc = nats.connect(shared_server.url)
    raised: dict[str, BaseException] = {}

    def during_drain(deadline: Deadline) -> None:
        for what, call in (("publish", lambda: nc.publish("draining.pub", b"")),
                           ("subscribe", lambda: nc.subscribe("draining.sub"))):
            try:
                call()
            except Exception as exc:  # recorded and checked below
                raised[what] = exc

    link(nc).on_drain(during_drain)
    nc.drain(timeout=10)
    assert nc.is_closed
    assert set(raised) == {"publish", "subscribe"}, raised
    for exc in raised.values():
        assert isinstance(exc, ConnectionDrainingError), repr(exc)
        assert isinstance(exc, ConnectionClosedError)
    with pytest.raises(ConnectionClosedError) as closed:
        nc.subscribe("drained.sub")
    assert not isinstance(closed.value, ConnectionDrainingError)


def test_a_deleted_object_raises_object_deleted_error_which_is_not_found_too(obs: ObjectStore) -> None:
    obs.put("gone", b"data")
    obs.delete("gone")
    for call in (lambda: obs.get_info("gone"), lambda: obs.get("gone"), lambda: obs.delete("gone"),
                 lambda: obs.update_meta("gone", nats.jetstream.ObjectMeta(name="other"))):
        with pytest.raises(ObjectDeletedError) as info:
            call()
        assert isinstance(info.value, ObjectNotFoundError)
    assert obs.get_info("gone", show_deleted=True).deleted
    with pytest.raises(ObjectNotFoundError) as never:
        obs.get_info("never")
    assert not isinstance(never.value, ObjectDeletedError)


def test_deleting_again_frees_the_chunks_a_broken_delete_left(nc: nats.Client, obs: ObjectStore) -> None:
    """A delete that wrote its marker but lost the purge of the chunks: deleting again
    still purges them, and then tells the object was deleted already."""
    info = obs.put("half", b"x" * 1000)
    stream = nc.jetstream().stream(f"OBJ_{obs.bucket}")
    chunks = f"$O.{obs.bucket}.C.{info.nuid}"
    marker = info.replace(deleted=True, size=0, chunks=0, digest=None)
    nc.jetstream().publish(f"$O.{obs.bucket}.M.{encode_name('half')}", encode_info(marker),
                           headers={"Nats-Rollup": "sub"})
    assert stream.info().state.num_subjects == 2  # the marker and the chunks left behind
    with pytest.raises(ObjectDeletedError):
        obs.delete("half")
    state = stream.info().state
    assert state.num_subjects == 1, chunks  # only the marker


def test_the_end_of_a_subscription_at_its_limit_then_by_the_user(nc: nats.Client) -> None:
    """At its message limit a subscription has ended but the user may still unsubscribe
    (dropping what is queued); after that, or after a drain that returned, unsubscribe
    and drain raise BadSubscriptionError."""
    sub = nc.subscribe("end.native", max_msgs=2)
    nc.publish("end.native", b"1")
    nc.publish("end.native", b"2")
    nc.flush()
    assert sub.next_msg(timeout=5).data == b"1"
    assert not sub.is_valid and sub.pending_msgs == 1
    sub.unsubscribe(limit=5)  # ended already: accepted, the queue stays
    assert sub.pending_msgs == 1
    sub.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError):
        sub.next_msg(timeout=5)  # the queued message was dropped
    for call in (sub.unsubscribe, sub.drain):
        with pytest.raises(nats.BadSubscriptionError):
            call()

    sub = nc.subscribe("end.native.drain", max_msgs=1)
    nc.publish("end.native.drain", b"1")
    nc.flush()
    assert sub.next_msg(timeout=5).data == b"1"
    sub.drain(timeout=5)  # ended at its limit: the drain has nothing to wait for
    for call in (sub.drain, sub.unsubscribe):
        with pytest.raises(nats.BadSubscriptionError):
            call()
