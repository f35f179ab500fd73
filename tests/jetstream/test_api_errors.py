"""Only the library's errors leave the JetStream API: a batch's failed
expectation, a reset of a consumer that does not exist, a publish future that
is waited on for too long."""

from __future__ import annotations

import time

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BatchPublishError, BatchWrongLastSequenceError
from natsjs_sync.jetstream import JetStream, Stream
from natsjs_sync.protocol.nuid import next_nuid


@pytest.mark.server("2.12")
def test_a_failed_expectation_of_an_atomic_batch_is_a_batch_publish_error(js: JetStream) -> None:
    name = "B" + next_nuid()
    st = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_atomic=True)
    try:
        js.publish(f"{name}.a", b"first")
        batch = js.atomic_batch()
        with pytest.raises(BatchPublishError) as info:  # what the batch docs promise
            batch.add(f"{name}.a", b"1", expected_last_seq=999)
            batch.add(f"{name}.a", b"2")
            batch.commit(f"{name}.a", b"3")
        assert isinstance(info.value, nats.WrongLastSequenceError)  # what a single publish raises
        assert isinstance(info.value, BatchWrongLastSequenceError)
        assert info.value.err_code == 10071 and info.value.code == 400
        assert batch.done and st.info().state.messages == 1  # nothing of the batch was stored
    finally:
        js.delete_stream(name)


@pytest.mark.server("2.14")
def test_reset_of_a_consumer_that_does_not_exist_raises_consumer_not_found(nc: nats.Client, stream: Stream) -> None:
    js = nc.jetstream(timeout=30)  # the bug waits for the whole API timeout: the server never answers
    started = time.monotonic()
    with pytest.raises(nats.ConsumerNotFoundError):
        js.reset_consumer(stream.name, "NOPE", 1)
    with pytest.raises(nats.ConsumerNotFoundError):
        stream.reset_consumer("NOPE")
    with pytest.raises(nats.StreamNotFoundError):
        js.reset_consumer("NO_SUCH_STREAM_" + next_nuid(), "NOPE")
    assert time.monotonic() - started < 10, "a reset of a missing consumer waited for its timeout"
    cons = stream.create_consumer(durable_name="THERE")
    js.publish(f"{stream.name}.a", b"1")
    assert js.reset_consumer(stream.name, cons.name, 1).reset_seq == 1  # an existing one still resets
