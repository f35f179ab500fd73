"""Only the library's errors leave the JetStream API: a batch's failed
expectation, a reset of a consumer that does not exist, a publish future that
is waited on for too long."""

from __future__ import annotations

import pytest

import natsjs_sync as nats
from natsjs_sync.errors import BatchPublishError, BatchWrongLastSequenceError
from natsjs_sync.jetstream import JetStream
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
