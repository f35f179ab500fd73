"""A stream handle: info, purge, reading and deleting messages, its consumers."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import InvalidResponseError, JetStreamError, MsgNotFoundError
from ..msg import Msg
from ..protocol.headers import Headers, parse_headers
from ._api import truncate_time
from .consumer_config import ConsumerConfig, ConsumerInfo, ConsumerPauseResponse, ConsumerResetResponse
from .stream_config import RawStreamMsg, StreamConfig, StreamInfo, StreamState

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._api import JetStreamAPI
    from ._fields import ConsumerConfigFields
    from .consumer import Consumer
    from .context import JetStream
    from .ordered import OrderedConsumer
    from .push import PushConsumer

_EOB = 204  # end of a batched direct get


def _parse_time(text: str | None) -> datetime.datetime | None:
    """A stored message's time (API ``time``, direct get ``Nats-Time-Stamp``), cut to
    microseconds (see :func:`truncate_time`); ``None`` when there is none.

    Raises:
        InvalidResponseError: the text is not an RFC 3339 time.
    """
    if not text:
        return None
    try:
        return msgspec.convert(truncate_time(text), datetime.datetime)
    except msgspec.ValidationError as exc:
        raise InvalidResponseError(f"invalid message time {text[:40]!r}") from exc


def _raw_from_api(stream: str, m: dict[str, Any]) -> RawStreamMsg:
    hdrs = None
    if m.get("hdrs"):
        # a block without a header is no headers (None), as nats-py's get_msg reads it
        hdrs = parse_headers(base64.b64decode(m["hdrs"]))[2] or None
    return RawStreamMsg(
        subject=m["subject"],
        seq=m["seq"],
        data=base64.b64decode(m.get("data") or b""),
        headers=hdrs,
        time=_parse_time(m.get("time")),
        stream=stream,
    )


def direct_get(api: JetStreamAPI, stream: str, body: dict[str, Any], timeout: TimeoutArg,
               subject_suffix: str = "") -> RawStreamMsg:
    """One message from ``stream``'s direct-get responders (no stream lookup first).

    Args:
        api: the JetStream API of the context asking.
        stream: the stream's name.
        body: what to get (``{"seq": 5}``, ``{"next_by_subj": s, "seq": 1}``, ...).
        timeout: as every JetStream call takes it.
        subject_suffix: ``".<subject>"`` for the last message on a subject, asked
            in the request's subject itself (no body is sent then).

    Raises:
        MsgNotFoundError: no such message.
        NoRespondersError: no such stream, or it does not allow direct gets.
        JetStreamError: another error status.
    """
    msg = api.core.request(api.subject(f"DIRECT.GET.{stream}{subject_suffix}"),
                           b"" if subject_suffix else msgspec.json.encode(body), api.deadline(timeout))
    status = msg.status
    if status == 404:
        raise MsgNotFoundError(f"no message found in stream {stream!r} for {body or subject_suffix}", code=404)
    if status is not None and status >= 400:
        raise JetStreamError(msg.description or f"direct get failed with {status}", code=status, stream=stream)
    return _raw_from_direct(msg, stream)


def _raw_from_direct(msg: Msg, stream: str) -> RawStreamMsg:
    h = msg.headers
    if h is None:
        raise JetStreamError("direct get answer without headers")
    hdrs = Headers()
    for k, v in h.items_all():
        if k not in _DIRECT_META:
            hdrs.add(k, v)
    return RawStreamMsg(
        subject=h.get("Nats-Subject", ""),
        seq=int(h.get("Nats-Sequence", "0")),
        data=msg.data,
        headers=hdrs if hdrs else None,
        time=_parse_time(h.get("Nats-Time-Stamp")),
        stream=h.get("Nats-Stream", stream),
    )


# Headers a direct-get answer adds about the message; the message's own headers are the rest.
_DIRECT_META = frozenset({"Nats-Stream", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Subject",
                          "Nats-Last-Sequence", "Nats-Num-Pending", "Nats-UpTo-Sequence"})


class _DirectPage:
    """What one answer of a batched or multi-last direct get held, to tell whether to ask again."""

    __slots__ = ("bytes", "count", "last", "pending", "up_to")

    def __init__(self) -> None:
        self.count = self.bytes = self.last = 0
        self.pending: int | None = None  #: the end of batch's Nats-Num-Pending
        self.up_to: int | None = None  #: the end of batch's Nats-UpTo-Sequence (multi-last)

    def add(self, msg: Msg, stream: str) -> bool:
        """Count a message of the answer; True when it ends the answer (the end of batch or 404).

        Raises:
            JetStreamError: the server refused the request.
        """
        status = msg.status
        if status is None:
            hdr = msg.raw_headers or b""
            i = hdr.rfind(b"\r\nNats-Stream:")
            own = i + 4 if i > 8 else 0  # the message's own header block, which the server counts
            self.count += 1
            self.bytes += len(msg.subject) + own + len(msg.data)
            seq = msg.headers.get("Nats-Sequence") if msg.headers is not None else None
            self.last = int(seq) if seq else self.last
            return False
        if status == _EOB:
            h = msg.headers
            if h is not None:
                self.pending = _int_or_none(h.get("Nats-Num-Pending"))
                self.up_to = _int_or_none(h.get("Nats-UpTo-Sequence"))
            return True
        if status == 404:
            return True
        raise JetStreamError(msg.description or f"direct get failed with {status}", code=status, stream=stream)

    def more(self, body: dict[str, Any], left: int | None) -> bool:
        """Is there more to ask for after this answer?

        The end of batch's pending count is exact from 2.12 on; a multi-last
        answer of 2.11 counts one too few, so there an answer cut at its
        ``batch`` or byte limit is followed up even when it says none are left.
        """
        if self.count == 0 or (left is not None and left <= 0):
            return False
        if self.pending:
            return True
        cut = self.bytes >= int(body.get("max_bytes") or 0) or self.count == body.get("batch")
        return self.pending == 0 and "multi_last" in body and cut


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


class Stream:
    """A handle on one stream. Thread-safe; cheap to keep."""

    def __init__(self, js: JetStream, info: StreamInfo):
        self._js = js
        self.name = info.config.name
        self._info = info

    @property
    def cached_info(self) -> StreamInfo:
        """The info from when this handle was made or last refreshed (no request)."""
        return self._info

    @property
    def config(self) -> StreamConfig:
        """The cached config (so a Stream reads like nats-py's StreamInfo)."""
        return self._info.config

    @property
    def state(self) -> StreamState:
        """The cached state (as of the last :meth:`info`)."""
        return self._info.state

    def info(self, subjects_filter: str | None = None, deleted_details: bool = False,
             timeout: TimeoutArg = USE_DEFAULT) -> StreamInfo:
        """Fresh stream info; with ``subjects_filter``, the per-subject counts too (all pages)."""
        body: dict[str, Any] = {}
        if subjects_filter:
            body["subjects_filter"] = subjects_filter
        if deleted_details:
            body["deleted_details"] = True
        api = self._js._api
        deadline = api.deadline(timeout)  # one budget for every page
        resp = api.request(f"STREAM.INFO.{self.name}", body or None, deadline)
        subjects = dict(resp.get("state", {}).get("subjects") or {})
        total = resp.get("total", 0)
        while subjects_filter and total and len(subjects) < total:
            page = api.request(f"STREAM.INFO.{self.name}", {**body, "offset": len(subjects)}, deadline)
            more = page.get("state", {}).get("subjects") or {}
            if not more:
                break
            subjects.update(more)
        if subjects:
            resp.setdefault("state", {})["subjects"] = subjects
        from ._api import from_wire

        self._info = from_wire(resp, StreamInfo)
        return self._info

    def purge(self, subject: str | None = None, sequence: int | None = None, keep: int | None = None,
              timeout: TimeoutArg = USE_DEFAULT) -> int:
        """Remove messages; returns how many. ``sequence``: up to (not incl.) it; ``keep``: the newest N."""
        if sequence is not None and keep is not None:
            raise ValueError("purge takes sequence or keep, not both")
        body: dict[str, Any] = {}
        if subject:
            body["filter"] = subject
        if sequence is not None:
            body["seq"] = sequence
        if keep is not None:
            body["keep"] = keep
        resp = self._js._api.request(f"STREAM.PURGE.{self.name}", body or None, timeout)
        return int(resp.get("purged", 0))

    # ------------------------------------------------------------------ reading messages

    def _get(self, body: dict[str, Any], timeout: TimeoutArg) -> RawStreamMsg:
        if self._info.config.allow_direct:
            return self._direct_get(body, timeout)
        resp = self._js._api.request(f"STREAM.MSG.GET.{self.name}", body, timeout)
        return _raw_from_api(self.name, resp["message"])

    def _direct_get(self, body: dict[str, Any], timeout: TimeoutArg,
                    subject_suffix: str = "") -> RawStreamMsg:
        return direct_get(self._js._api, self.name, body, timeout, subject_suffix)

    def get_msg(self, seq: int, timeout: TimeoutArg = USE_DEFAULT) -> RawStreamMsg:
        """The message at sequence ``seq``. Raises MsgNotFoundError."""
        return self._get({"seq": seq}, timeout)

    def get_last_msg_for_subject(self, subject: str, timeout: TimeoutArg = USE_DEFAULT) -> RawStreamMsg:
        """The newest message on ``subject``. Raises MsgNotFoundError."""
        if self._info.config.allow_direct:
            return self._direct_get({"last_by_subj": subject}, timeout, subject_suffix=f".{subject}")
        return self._get({"last_by_subj": subject}, timeout)

    def get_next_msg_for_subject(self, subject: str, seq: int = 1, timeout: TimeoutArg = USE_DEFAULT) -> RawStreamMsg:
        """The first message on ``subject`` at or after ``seq``. Raises MsgNotFoundError."""
        return self._get({"next_by_subj": subject, "seq": seq}, timeout)

    def direct_get_batch(self, seq: int = 1, batch: int = 100, subject: str | None = None,
                         max_bytes: int | None = None, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[RawStreamMsg]:
        """Up to ``batch`` messages from ``seq`` on (on ``subject``), by batched direct get.

        Without ``max_bytes`` every message up to ``batch`` is given: the
        server ends a batch early at its byte limit, so the read asks again
        after the last message received, each request for at most the
        server's ``max_payload`` bytes (8 MiB at most: an answer past the
        server's ``max_pending`` would disconnect the client as a slow
        consumer). With ``max_bytes`` it is one request, and what the server
        sends before that many bytes is what is given.

        Needs ``allow_direct`` on the stream and a server with batched direct get (2.11+).

        Raises:
            FeatureNotSupportedError: the server is older than 2.11 (nothing is sent).
            JetStreamError: the stream does not allow direct get.
        """
        if seq < 1 or batch < 1:
            raise ValueError("seq and batch must be >= 1")
        self._check_direct_batch()
        body: dict[str, Any] = {"seq": seq, "batch": batch}
        if subject:
            body["next_by_subj"] = subject
        if max_bytes:
            body["max_bytes"] = max_bytes
            yield from self._direct_pages(body, self._js._api.deadline(timeout), one_page=True)
            return
        yield from self._direct_pages(body, self._js._api.deadline(timeout))

    def direct_get_last_for_subjects(self, subjects: Sequence[str], up_to_seq: int | None = None,
                                     batch: int | None = None, timeout: TimeoutArg = USE_DEFAULT
                                     ) -> Iterator[RawStreamMsg]:
        """The newest message of each of ``subjects`` (wildcards allowed) up to ``up_to_seq`` (the
        stream's last sequence when the first answer came), multi-last direct get (2.11+), in
        sequence order.

        The server ends an answer at its byte limit (its ``max_pending``) or
        after ``batch`` messages; the read then asks again after the last
        message received, with the same ``up_to_seq``, until every subject is
        given. ``timeout`` bounds the whole read.

        Args:
            subjects: filters; the server refuses more than 1024 matching subjects (413).
            up_to_seq: the newest at or before this sequence.
            batch: messages asked for per request (all of them are given either way).
            timeout: as every JetStream call takes it.

        Raises:
            FeatureNotSupportedError: the server is older than 2.11 (nothing is sent).
            JetStreamError: the stream does not allow direct get, or the server refused.
        """
        if isinstance(subjects, str) or not subjects:
            raise ValueError("subjects must be a non-empty list of subjects")
        self._check_direct_batch()
        body: dict[str, Any] = {"multi_last": list(subjects)}
        if up_to_seq is not None:
            body["up_to_seq"] = up_to_seq
        if batch is not None:
            body["batch"] = batch
        yield from self._direct_pages(body, self._js._api.deadline(timeout))

    def _check_direct_batch(self) -> None:
        # A server without batched direct get answers one message and never the
        # end-of-batch marker, so the iteration would wait out its timeout.
        self._js._require("direct_get_batch")
        if not self._info.config.allow_direct:
            raise JetStreamError(f"stream {self.name!r} does not allow direct get (allow_direct)")

    def _direct_pages(self, body: dict[str, Any], deadline: Deadline, one_page: bool = False
                      ) -> Iterator[RawStreamMsg]:
        """The answers to a batched or multi-last direct get, asked for again after the last
        message received while the server says more are pending (see :mod:`.paging`).

        ``batch`` in ``body`` is the whole read's for a batch get (each page asks
        for what is left), a page's for a multi-last get (which pins
        ``up_to_seq`` from the first answer, so later writes do not change it).
        """
        from .paging import page_bytes

        api = self._js._api
        core = api.core
        multi = "multi_last" in body
        body = dict(body)
        if not one_page:
            body["max_bytes"] = page_bytes(core)
        left = None if multi else int(body["batch"])
        inbox = core.new_inbox()
        sub = core.subscribe_internal(inbox)
        # Unsubscribes at the end; a close by the garbage collector hands it to a core thread.
        with core.releasing(sub.unsubscribe):
            while True:
                core.publish_now(api.subject(f"DIRECT.GET.{self.name}"), msgspec.json.encode(body), reply=inbox)
                page = _DirectPage()
                while True:
                    msg = sub.next_msg(timeout=deadline.remaining())
                    if page.add(msg, self.name):
                        break
                    raw = _raw_from_direct(msg, self.name)
                    yield raw
                if left is not None:
                    left -= page.count
                if one_page or not page.more(body, left):
                    return
                body["seq"] = page.last + 1
                if multi:
                    body.setdefault("up_to_seq", page.up_to)
                else:
                    body["batch"] = left

    def delete_msg(self, seq: int, secure: bool = False, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete the message at ``seq``; ``secure`` overwrites its bytes on disk."""
        body: dict[str, Any] = {"seq": seq}
        if not secure:
            body["no_erase"] = True
        resp = self._js._api.request(f"STREAM.MSG.DELETE.{self.name}", body, timeout)
        return bool(resp.get("success"))

    def secure_delete_msg(self, seq: int, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete the message at ``seq`` and overwrite its data on disk; True when deleted.

        Raises:
            MsgNotFoundError: no message at ``seq``.
        """
        return self.delete_msg(seq, secure=True, timeout=timeout)

    # ------------------------------------------------------------------ consumers

    def create_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Create a consumer on this stream (a :class:`ConsumerConfig` or its fields as keywords).

        Without ``name``/``durable_name`` the consumer is ephemeral.

        Raises:
            ConsumerExistsError: one of that name exists with another configuration.
        """
        return self._js.create_consumer(self.name, config, timeout, **kwargs)

    def update_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                        **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Change an existing consumer of this stream. Raises ConsumerNotFoundError."""
        return self._js.update_consumer(self.name, config, timeout, **kwargs)

    def create_or_update_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                  **kwargs: Unpack[ConsumerConfigFields]) -> Consumer:
        """Create the consumer, or update it when it exists."""
        return self._js.create_or_update_consumer(self.name, config, timeout, **kwargs)

    def consumer(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> Consumer:
        """A handle on an existing consumer of this stream. Raises ConsumerNotFoundError."""
        return self._js.consumer(self.name, name, timeout)

    def delete_consumer(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> bool:
        """Delete a consumer of this stream. Raises ConsumerNotFoundError."""
        return self._js.delete_consumer(self.name, name, timeout)

    def list_consumers(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[ConsumerInfo]:
        """Info of every consumer of this stream, page by page (one ``timeout`` for all pages)."""
        return self._js.list_consumers(self.name, timeout)

    def consumer_names(self, timeout: TimeoutArg = USE_DEFAULT) -> Iterator[str]:
        """The name of every consumer of this stream (one ``timeout`` for all pages)."""
        return self._js.consumer_names(self.name, timeout)

    def create_push_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                             **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Create a push consumer on this stream (its config needs a ``deliver_subject``);
        see :meth:`JetStream.create_push_consumer`."""
        return self._js.create_push_consumer(self.name, config, timeout, **kwargs)

    def update_push_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                             **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Change an existing push consumer of this stream. Raises ConsumerNotFoundError."""
        return self._js.update_push_consumer(self.name, config, timeout, **kwargs)

    def create_or_update_push_consumer(self, config: ConsumerConfig | None = None, timeout: TimeoutArg = USE_DEFAULT,
                                       **kwargs: Unpack[ConsumerConfigFields]) -> PushConsumer:
        """Create the push consumer, or update it when it exists."""
        return self._js.create_or_update_push_consumer(self.name, config, timeout, **kwargs)

    def push_consumer(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> PushConsumer:
        """A handle on an existing push consumer of this stream. Raises ConsumerNotFoundError."""
        return self._js.push_consumer(self.name, name, timeout)

    def ordered_consumer(self, **kwargs: Any) -> OrderedConsumer:
        """An ordered consumer of this stream (see :meth:`JetStream.ordered_consumer`)."""
        return self._js.ordered_consumer(self.name, **kwargs)

    def pause_consumer(self, name: str, until: datetime.datetime,
                       timeout: TimeoutArg = USE_DEFAULT) -> ConsumerPauseResponse:
        """Pause consumer ``name`` of this stream until ``until`` (server 2.11+);
        see :meth:`JetStream.pause_consumer`."""
        return self._js.pause_consumer(self.name, name, until, timeout=timeout)

    def resume_consumer(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> ConsumerPauseResponse:
        """Resume consumer ``name`` of this stream (server 2.11+)."""
        return self._js.resume_consumer(self.name, name, timeout=timeout)

    def unpin_consumer(self, name: str, group: str, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Release the pinned client of priority group ``group`` of consumer ``name`` (server 2.11+)."""
        self._js.unpin_consumer(self.name, name, group, timeout=timeout)

    def reset_consumer(self, name: str, seq: int | None = None,
                       timeout: TimeoutArg = USE_DEFAULT) -> ConsumerResetResponse:
        """Reset consumer ``name`` of this stream to ``seq`` (server 2.14+); see
        :meth:`JetStream.reset_consumer`."""
        return self._js.reset_consumer(self.name, name, seq, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Stream {self.name}>"
