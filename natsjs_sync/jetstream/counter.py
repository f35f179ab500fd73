"""Distributed counters (ADR-49, server 2.12+).

On a stream made with ``allow_msg_counter`` every subject is a counter. A
publish with the header ``Nats-Incr: +5`` (or ``-3``) makes the server add that
to the subject's last value and store ``{"val": "<total>"}``; the PubAck
carries the new total. Values are arbitrary-precision integers (decimal
strings on the wire), which Python's ``int`` holds as they are.

A counter fed by sourced streams also keeps, in ``Nats-Counter-Sources``, the
last value seen from each source (stream -> subject -> value).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import msgspec

from .._timeout import USE_DEFAULT, TimeoutArg
from ..errors import InvalidResponseError, JetStreamError, MsgNotFoundError
from .stream_config import RawStreamMsg

if TYPE_CHECKING:
    from .context import JetStream
    from .stream import Stream

INCR = "Nats-Incr"
COUNTER_SOURCES = "Nats-Counter-Sources"


class CounterEntry:
    """A counter's value as stored, with its last increment and its sources.

    Attributes:
        subject: the counter's subject.
        value: the total.
        increment: the increment of the message that set it (None if unknown).
        sources: for aggregated counters, stream -> source subject -> last value seen.
        revision: the stream sequence of the message that holds it.
    """

    __slots__ = ("increment", "revision", "sources", "subject", "value")

    def __init__(self, subject: str, value: int, increment: int | None, sources: dict[str, dict[str, int]],
                 revision: int):
        self.subject = subject
        self.value = value
        self.increment = increment
        self.sources = sources
        self.revision = revision

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CounterEntry):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CounterEntry(subject={self.subject!r}, value={self.value}, increment={self.increment})"


def _int(text: object, what: str) -> int:
    if isinstance(text, str):
        try:
            return int(text)
        except ValueError:
            pass
    raise InvalidResponseError(f"counter {what} is not an integer: {text!r}")


def entry_from_raw(raw: RawStreamMsg) -> CounterEntry:
    """Decode the stored counter message ``raw``.

    Raises:
        InvalidResponseError: it is not a counter message.
    """
    try:
        body = msgspec.json.decode(raw.data) if raw.data else {}
    except msgspec.DecodeError as exc:
        raise InvalidResponseError(f"counter {raw.subject!r}: body is not JSON: {raw.data[:60]!r}") from exc
    if not isinstance(body, dict):
        raise InvalidResponseError(f"counter {raw.subject!r}: body is not an object: {raw.data[:60]!r}")
    value = _int(body.get("val", "0"), "value")
    incr_text = raw.header(INCR)
    increment = _int(incr_text, "increment") if incr_text is not None else None
    sources: dict[str, dict[str, int]] = {}
    src_text = raw.header(COUNTER_SOURCES)
    if src_text:
        try:
            decoded = msgspec.json.decode(src_text)
        except msgspec.DecodeError as exc:
            raise InvalidResponseError(f"counter {raw.subject!r}: bad {COUNTER_SOURCES} header") from exc
        if isinstance(decoded, dict):
            for stream, subjects in decoded.items():
                if isinstance(subjects, dict):
                    sources[str(stream)] = {str(k): _int(v, "source value") for k, v in subjects.items()}
    return CounterEntry(raw.subject, value, increment, sources, raw.seq)


class Counter:
    """The counters of one stream. Thread-safe; make it with :meth:`JetStream.counter`."""

    def __init__(self, js: JetStream, stream: Stream):
        cfg = stream.cached_info.config
        if not cfg.allow_msg_counter:
            raise JetStreamError(f"stream {stream.name!r} does not allow counters (allow_msg_counter)")
        self._js = js
        self._stream = stream
        self.stream_name = stream.name

    def add(self, subject: str, delta: int, timeout: TimeoutArg = USE_DEFAULT) -> int:
        """Add ``delta`` (negative to subtract, 0 to read through the stream) to
        the counter ``subject``; returns its new total.

        Raises:
            TypeError: ``delta`` is not an int.
            NoStreamResponseError: no stream captures ``subject``.
            JetStreamError: the stream refused (e.g. not a counter stream).
        """
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"delta must be an int, got {type(delta).__name__}")
        ack = self._js.publish(subject, b"", headers={INCR: f"{delta:+d}"}, timeout=timeout)
        if ack.value is None:
            raise InvalidResponseError(f"the PubAck for counter {subject!r} has no value (is the stream a counter?)")
        return _int(ack.value, "value")

    def increment(self, subject: str, delta: int = 1, timeout: TimeoutArg = USE_DEFAULT) -> int:
        """:meth:`add` with a default of 1."""
        return self.add(subject, delta, timeout)

    def get(self, subject: str, timeout: TimeoutArg = USE_DEFAULT) -> CounterEntry:
        """The counter ``subject`` as stored now.

        Raises:
            MsgNotFoundError: the counter was never set.
        """
        return entry_from_raw(self._stream.get_last_msg_for_subject(subject, timeout=timeout))

    def value(self, subject: str, timeout: TimeoutArg = USE_DEFAULT) -> int:
        """The total of counter ``subject``; 0 for a counter never set."""
        try:
            return self.get(subject, timeout).value
        except MsgNotFoundError:
            return 0

    def get_multiple(self, subjects: Sequence[str], timeout: TimeoutArg = USE_DEFAULT) -> Iterator[CounterEntry]:
        """The counters matching ``subjects`` (wildcards allowed), one batched direct get (2.11+).

        Raises:
            FeatureNotSupportedError: the server has no batched direct get.
        """
        for raw in self._stream.direct_get_last_for_subjects(subjects, timeout=timeout):
            yield entry_from_raw(raw)

    def __repr__(self) -> str:
        return f"<Counter {self.stream_name}>"
