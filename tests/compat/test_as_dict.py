"""``as_dict()`` of the nats-py-facing models against nats-py's own classes
(``programs/js_as_dict.py`` compares the output of both clients for real answers)."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

import natsjs_sync as nats
import natsjs_sync.js.api as ours
from natsjs_sync.jetstream._api import (
    NATS_PY_ALWAYS,
    NATS_PY_DURATIONS,
    NATS_PY_LACKS,
    NATS_PY_TIME_AS_TEXT,
    UNKNOWN,
    from_wire,
)
from natsjs_sync.jetstream.stream_config import StreamInfo

#: nats-py's names for classes that are called otherwise here.
_RENAMED = {"ConsumerPauseResponse": "ConsumerPause"}
#: nats-py's PubAck.as_dict() writes these fields under the server's names.
_NATS_PY_KEYS = {"batch_id": "batch", "batch_size": "count"}
#: Classes whose nats-py twin has another shape (checked on their own below).
_RESHAPED = {"ConsumerReset"}


def _pairs() -> list[tuple[type, type]]:
    theirs = pytest.importorskip("nats.js.api", reason="nats-py is not installed")
    pairs = []
    for name in ours.__all__:
        mine, other = getattr(ours, name), getattr(theirs, _RENAMED.get(name, name), None)
        if name in _RESHAPED:
            continue
        if isinstance(mine, type) and issubclass(mine, msgspec.Struct) and dataclasses.is_dataclass(other):
            pairs.append((mine, other))
    return pairs


def test_the_tables_name_exactly_the_fields_nats_py_does_not_model() -> None:
    pairs = _pairs()
    assert len(pairs) > 20
    names = {mine.__name__ for mine, _ in pairs} | set(_RENAMED)
    for table in (NATS_PY_ALWAYS, NATS_PY_LACKS, NATS_PY_TIME_AS_TEXT, NATS_PY_DURATIONS):
        assert set(table) <= names
    for mine, other in pairs:
        # Compared by the keys as_dict() writes: the JSON names here; nats-py's field names,
        # but for the two PubAck fields its as_dict() writes under the server's names.
        by_key = {f.encode_name: f.name for f in msgspec.structs.fields(mine) if f.name != UNKNOWN}
        other_keys = {_NATS_PY_KEYS.get(f.name, f.name) for f in dataclasses.fields(other)}
        # traffic_acc is nats-py's name for a key the server calls traffic_account (which nats-py drops);
        # limit_marker_ttl is a field of both that nats-py's as_dict() drops.
        lacks = {name for key, name in by_key.items() if key not in other_keys} | (
            {"limit_marker_ttl"} if "limit_marker_ttl" in by_key else set())
        assert NATS_PY_LACKS.get(mine.__name__, frozenset()) == lacks, mine
        mine_fields = set(by_key.values())
        defaults = {f.name for f in dataclasses.fields(other)
                    if f.default not in (dataclasses.MISSING, None)} & mine_fields
        assert defaults <= NATS_PY_ALWAYS.get(mine.__name__, frozenset()), mine


def test_a_decoded_answer_keeps_the_zeros_the_server_sent_through_evolve() -> None:
    answer = {
        "config": {"name": "S", "retention": "limits", "max_msgs": -1, "allow_direct": False, "first_seq": 0},
        "state": {"messages": 0, "bytes": 0, "first_ts": "0001-01-01T00:00:00Z", "num_subjects": 0},
        "created": "2026-01-02T03:04:05.123456789Z", "ts": "2026-01-02T03:04:05Z", "total": 0,
    }
    info = from_wire(answer, StreamInfo)
    d = info.as_dict()
    assert set(d) == {"config", "state", "created"}  # no ts, no total (an unknown key)
    assert d["state"] == {"messages": 0, "bytes": 0}
    assert d["config"]["allow_direct"] is False and d["config"]["first_seq"] == 0
    changed = info.config.evolve(max_msgs=10).as_dict()
    assert changed["max_msgs"] == 10 and changed["allow_direct"] is False and changed["first_seq"] == 0
    built = nats.jetstream.StreamConfig(name="S").as_dict()
    assert "allow_direct" not in built and "first_seq" not in built


def test_a_consumer_reset_answer_nests_the_info_as_nats_py_does() -> None:
    answer = {"stream_name": "S", "name": "c", "config": {"durable_name": "c"}, "num_pending": 0, "reset_seq": 7}
    reset = from_wire(answer, ours.ConsumerReset)
    d = reset.as_dict()
    assert d["reset_seq"] == 7 and set(d) == {"info", "reset_seq"}
    assert d["info"]["num_pending"] == 0 and d["info"]["config"]["ack_wait"] == 0 and "reset_seq" not in d["info"]
