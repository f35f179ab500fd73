"""nats-py's JetStream names, as thin adapters over the simplified API.

Code written for the asyncio client nats-py runs with its ``await``\\ s removed::

    js = nc.jetstream()
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    sub = js.subscribe("orders.>", durable="processor")
    msg = sub.next_msg(timeout=1)
    msg.ack()
    psub = js.pull_subscribe("orders.>", "batch-proc")
    for msg in psub.fetch(batch=100, timeout=5):
        msg.ack()

Return values follow nats-py: ``add_stream`` gives a StreamInfo,
``add_consumer`` a ConsumerInfo, ``purge_stream`` a bool, a pull
subscription's ``fetch`` a list (and TimeoutError when it stays empty). Where a
name is shared with the simplified API (``update_stream``, ``delete_stream``,
``delete_consumer``, ``key_value`` ...) the one method serves both: a
:class:`~natsjs_sync.jetstream.Stream` answers ``.config`` and ``.state`` like
a StreamInfo.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._backoff import Backoff
from .._timeout import Deadline, check_seconds
from .._typed_reads import TypedReads
from ..client import check_callback
from ..errors import (
    APIError,
    BadSubjectError,
    ConsumerNotFoundError,
    JetStreamError,
    NatsError,
    NoMessagesError,
    ServiceUnavailableError,
    TimeoutError,
    jetstream_error,
)
from ..errors import JetStreamTimeoutError as FetchTimeoutError
from ..msg import Msg
from ..protocol.jetstream.status import Kind
from ..protocol.nuid import next_nuid
from ..subscription import MsgHandler
from ._api import from_wire
from .consumer import Consumer
from .consumer_config import ConsumerConfig, ConsumerInfo
from .pull import MessageBatch, pull_request, server_expiry, status_of
from .push import OrderedSubscription, PushSubscription, subscribe_push
from .stream import direct_get
from .stream_config import RawStreamMsg, StreamConfig, StreamInfo

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .context import JetStream


#: Pauses between the pulls of a fetch that the server refused because the consumer's
#: ``max_waiting`` pull requests are all waiting (short: a slot frees as soon as any
#: other fetch gets its message or ends).
_MAX_WAITING_BACKOFF = Backoff(0.02, 0.25, factor=2.0, jitter=0.02)


def _is_max_waiting(exc: JetStreamError) -> bool:
    """The 409 that says every pull slot of the consumer is taken (the server's status text)."""
    return "maxwaiting" in (exc.description or "").replace(" ", "").lower()


class PullSubscription(TypedReads):
    """nats-py's pull subscription: :meth:`fetch` returns a list of messages."""

    def __init__(self, consumer: Consumer, owns_consumer: bool):
        self._consumer = consumer
        self._owns = owns_consumer
        self._unsubscribed = False
        self._delivered = 0

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed out by :meth:`fetch`: always 0 here
        (each fetch takes what its own request brought in)."""
        return 0

    @property
    def pending_bytes(self) -> int:
        """Bytes received and not yet handed out by :meth:`fetch`: always 0 here."""
        return 0

    @property
    def delivered(self) -> int:
        """How many messages :meth:`fetch` has returned so far."""
        return self._delivered

    def fetch(self, batch: int = 1, timeout: float | None = 5.0, heartbeat: float | None = None) -> list[Msg]:
        """Up to ``batch`` messages: those available now, else the first to arrive
        within ``timeout`` seconds with whatever came with it. ``timeout=None`` has
        no limit: when nothing is available, the fetch waits until ``batch``
        messages came, as nats-py's does. A ``heartbeat`` of 0 or less is none
        (nats-py sends none for 0; the server ignores a negative one).

        Several threads may fetch at once: a pull refused with ``409 Exceeded
        MaxWaiting`` (the consumer's ``max_waiting`` pulls are all open) is sent
        again after a short pause while ``timeout`` lasts. Any other 409
        (``Exceeded MaxRequestBatch``, ``Consumer Deleted`` ...) and a MaxWaiting
        refusal that lasts the whole budget count as "no messages yet", as in
        nats-py: the fetch waits out ``timeout`` (so a loop of
        fetches does not hammer the server) and then raises TimeoutError for a
        batch of one, or returns an empty list for a larger batch.

        Returns:
            The messages, at least one unless a 409 ended a batch of more than one.

        Raises:
            TimeoutError: not even one message arrived (as nats-py does; text ``nats: timeout``).
            ValueError: ``batch`` is not a positive int (``nats: invalid batch size``) or
                ``timeout`` is not positive (``nats: invalid fetch timeout``), as in nats-py.
            APIError: the server refused the pull (a ``heartbeat`` over half of ``timeout``);
                ServiceUnavailableError when nobody served it (no such consumer), as in nats-py.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError("nats: invalid batch size")
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout <= 0:
            raise ValueError("nats: invalid fetch timeout")
        wait = check_seconds(timeout, "timeout")  # None: no limit, as in nats-py
        deadline = Deadline(wait)
        if self._unsubscribed:
            # nats-py's fetch asks on an inbox nobody listens to any more and times out;
            # the same, without asking the server for messages nobody could receive.
            # (Without a timeout nats-py's waits until its client closes; a thread here
            # cannot be woken by close(), so it gives up after 5 s.)
            left = deadline.remaining()
            threading.Event().wait(5.0 if left is None else left)
            raise FetchTimeoutError("nats: timeout")
        # nats-py's rule, to the nanosecond: expires is the timeout less 100 us, and the
        # server refuses a heartbeat over half of it (or with no expires at all).
        if not heartbeat or heartbeat < 0:
            # nats-py sends no idle heartbeat for 0, and the server ignores a negative one
            heartbeat = None
        if heartbeat is not None and (wait is None or int(heartbeat * 1e9) * 2 > int(wait * 1e9) - 100_000):
            self._refused_heartbeat(wait, heartbeat)
        attempt = 0
        while True:
            try:
                msgs = self._fetch(batch, wait, deadline, heartbeat)
                self._delivered += len(msgs)
                return msgs
            except JetStreamError as exc:
                if exc.code == 503 and not isinstance(exc, APIError):
                    # Nobody served the pull: no such consumer (a bind asks nothing first),
                    # or JetStream is away. nats-py's class for it, an APIError.
                    cons = self._consumer
                    raise ServiceUnavailableError(exc.description, code=503, stream=cons.stream,
                                                  consumer=cons.name) from exc
                if exc.code != 409:
                    raise
                refused = exc
            # Threads share the consumer's max_waiting pull slots: a fetch that found them
            # all taken asks again while its budget lasts, so every fetcher is served once
            # a slot frees (nats-py's tasks share one inbox and one queue, so any of its
            # fetches takes what another's request brought in).
            if not _is_max_waiting(refused):
                break
            attempt += 1
            left = deadline.remaining()
            pause = _MAX_WAITING_BACKOFF.delay(attempt)
            if left is not None and left <= pause:
                break
            threading.Event().wait(pause)
        # Waiting out the budget keeps a retrying loop from spinning on a refusal that lasts
        # (with no budget at all, waiting would never end: say so at once instead).
        left = deadline.remaining()
        if left is not None:
            threading.Event().wait(left)
        if batch == 1:
            # nats-py's text, which programs match on; the refusal rides along as the cause.
            raise TimeoutError("nats: timeout") from refused
        return []

    def _refused_heartbeat(self, wait: float | None, heartbeat: float) -> None:
        """A heartbeat over half the wait: the native fetch refuses it before sending; nats-py
        sends it and the server answers ``400 Bad Request - heartbeat value too large``. Ask
        the server the same (its rule, over half of ``expires``, refuses the request before
        anything is delivered) and raise its answer as nats-py does.

        Raises:
            BadRequestError: the server's 400 (an ``APIError``, as in nats-py).
        """
        cons = self._consumer
        body = pull_request(1, None if wait is None else server_expiry(wait), no_wait=True, heartbeat=heartbeat)
        reply = cons._core.request(cons.next_subject, body, timeout=cons._js.timeout)
        st = status_of(reply)
        if st.kind is Kind.TERMINAL:
            raise jetstream_error(st.code, None, st.description, cons.stream, cons.name)
        # Answered otherwise (a server with another rule): the fetch goes on as usual.

    def _fetch(self, batch: int, wait: float | None, deadline: Deadline, heartbeat: float | None) -> list[Msg]:
        cons = self._consumer
        msgs = self._take(cons.fetch_no_wait(batch, timeout=max(deadline.remaining() or 0.0, 1.0)))
        if msgs:
            return msgs
        if wait is None:
            # No limit (nats-py's timeout=None): one pull without expiry that stays open
            # until the whole batch came, as nats-py's does.
            with cons.fetch(batch, max_wait=None) as result:
                msgs = list(result)
                error = result.error
                status = result.status
            if not msgs and error is not None:
                raise error
            if not msgs and status is not None:
                # Ended with nothing by a status that is no error (409 Server Shutdown or
                # Leadership Change): a 409 as the others, never an empty batch of one.
                if status.code == 409:
                    raise JetStreamError(status.description or "pull request ended", code=409)
                raise FetchTimeoutError("nats: timeout")
            return msgs
        # Nothing pending: wait for the first message, then take what is there with it.
        left = deadline.remaining()
        max_wait = None if left is None else max(left, 0.001)
        # What nats-py's rule let through may be a hair over half of what is left of the
        # budget here: the heartbeat is a liveness signal, so a slightly shorter one serves.
        if heartbeat is not None:
            heartbeat = None if max_wait is None else min(heartbeat, server_expiry(max_wait) / 2)
        with cons.fetch(1, max_wait=max_wait, heartbeat=heartbeat) as result:
            first = list(result)
            error = result.error
        if not first:
            if error is not None and not isinstance(error, TimeoutError):
                raise error
            raise FetchTimeoutError("nats: timeout")  # nats-py's text (its nats.errors.TimeoutError)
        if batch > 1:
            try:
                first += self._take(cons.fetch_no_wait(batch - 1, timeout=max(deadline.remaining() or 0.0, 1.0)))
            except JetStreamError as exc:
                if exc.code != 409:
                    raise
        return first

    @staticmethod
    def _take(result: MessageBatch) -> list[Msg]:
        with result:
            msgs = list(result)
            error = result.error
        if not msgs and error is not None and not isinstance(error, (NoMessagesError, TimeoutError)):
            raise error
        return msgs


    def consumer_info(self, timeout: float | None = None) -> ConsumerInfo:
        """The consumer's info, read from the server now."""
        return self._consumer.info(timeout)

    def unsubscribe(self) -> None:
        """Forget the subscription (a later :meth:`fetch` times out, as in nats-py);
        an ephemeral consumer it made is deleted."""
        self._unsubscribed = True
        if self._owns:
            self._owns = False
            try:
                self._consumer._js.delete_consumer(self._consumer.stream, self._consumer.name, timeout=2.0)
            except NatsError:
                pass

    def __repr__(self) -> str:
        return f"<PullSubscription {self._consumer.stream}/{self._consumer.name}>"


class StreamsListIterator:
    """One page of ``STREAM.LIST`` (nats-py's ``streams_info_iterator``): iterates the
    page's StreamInfos. Not thread-safe (an iterator).

    Attributes:
        offset: where the page starts.
        total: how many streams there are in all.
        streams: the page, as the server sent it.
    """

    def __init__(self, offset: int, total: int, streams: list[dict[str, Any]]):
        self.offset = offset
        self.total = total
        self.streams = streams
        self._index = 0

    def __iter__(self) -> StreamsListIterator:
        return self

    def __next__(self) -> StreamInfo:
        if self._index >= len(self.streams):
            raise StopIteration
        item = self.streams[self._index]
        self._index += 1
        return from_wire(item, StreamInfo)


def _offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    return offset


#: What a stream or consumer name may not hold (nats-py's and nats.go's set: the server
#: uses names as file names).
_BAD_NAME_CHARS = frozenset(">*. /\\\t\r\n")


def _stream_name(name: object) -> str:
    """nats-py's stream-name check, with its texts (the native check says more, in other words)."""
    return _name(name, "stream")


def _consumer_name(name: object) -> str:
    """nats-py's consumer-name check, with its texts."""
    return _name(name, "consumer")


def _name(name: object, what: str) -> str:
    if not name:
        raise BadSubjectError(f"nats: {what} name is required")
    if not isinstance(name, str) or _BAD_NAME_CHARS.intersection(name):
        raise BadSubjectError(f"nats: invalid {what} name: {name!r}")
    return name


def _check_stream_fields(cfg: StreamConfig) -> None:
    """What nats-py's ``StreamConfig.as_dict()`` refuses before anything is sent."""
    if cfg.compression and cfg.compression not in ("none", "s2"):
        raise ValueError(f"nats: invalid store compression type: {cfg.compression}")
    if cfg.metadata and not isinstance(cfg.metadata, dict):
        raise ValueError("nats: invalid metadata format")


def _js(obj: object) -> JetStream:
    return cast("JetStream", obj)


class NatsPyNames:
    """Mixed into :class:`~natsjs_sync.jetstream.JetStream`."""

    # ------------------------------------------------------------------ streams

    def add_stream(self, config: StreamConfig | None = None, timeout: float | None = None,
                   **params: Any) -> StreamInfo:
        """Create a stream; returns its StreamInfo.

        Checked before sending, as nats-py checks them (same exceptions and texts):

        Raises:
            ValueError: no name (``nats: stream name is required``), a bad one
                (``nats: invalid stream name: ...``), a ``compression`` other than
                ``"none"``/``"s2"``, ``metadata`` that is not a dict (both ``ValueError``
                in nats-py too; the server would answer 400 instead).
        """
        name = params["name"] if "name" in params else getattr(config, "name", None)
        _stream_name(name)
        if config is not None and not isinstance(config, StreamConfig):
            raise TypeError(f"expected a StreamConfig, got {type(config).__name__}")
        cfg = config.replace(**params) if config is not None else StreamConfig(**params)
        _check_stream_fields(cfg)
        return _js(self).create_stream(cfg, timeout=timeout).cached_info

    def stream_info(self, name: str, subjects_filter: str | None = None,
                    timeout: float | None = None) -> StreamInfo:
        """A stream's info. Raises NotFoundError (StreamNotFoundError); a bad name is refused at once."""
        _stream_name(name)
        if subjects_filter:
            return _js(self).stream(name, timeout=timeout).info(subjects_filter=subjects_filter, timeout=timeout)
        return _js(self)._stream_info(name, timeout)

    def streams_info(self, offset: int = 0, timeout: float | None = None) -> list[StreamInfo]:
        """One page of stream infos (the server's page: up to 256), from the ``offset``-th
        stream on, as nats-py gives it. :meth:`list_streams` reads every page.

        Raises:
            ValueError: a negative ``offset``.
        """
        return list(self.streams_info_iterator(offset, timeout))

    def streams_info_iterator(self, offset: int = 0, timeout: float | None = None) -> StreamsListIterator:
        """Like :meth:`streams_info`, as nats-py's iterator (which also answers ``offset``
        and ``total``, the number of streams in all).

        Raises:
            ValueError: a negative ``offset``.
        """
        resp = _js(self)._api.request("STREAM.LIST", {"offset": _offset(offset)}, timeout)
        return StreamsListIterator(resp.get("offset", offset), resp.get("total", 0), resp.get("streams") or [])

    def purge_stream(self, name: str, seq: int | None = None, subject: str | None = None,
                     keep: int | None = None, timeout: float | None = None) -> bool:
        """nats-py's name for :meth:`Stream.purge`: remove messages (all, or by ``subject``, up to
        ``seq``, or all but the newest ``keep``). Returns True.
        """
        _stream_name(name)
        _js(self).stream(name, timeout=timeout).purge(subject=subject, sequence=seq, keep=keep, timeout=timeout)
        return True

    def delete_msg(self, stream_name: str, seq: int, timeout: float | None = None) -> bool:
        """nats-py's name for :meth:`Stream.delete_msg`: delete the message at ``seq``; True when deleted."""
        _stream_name(stream_name)
        return _js(self).stream(stream_name, timeout=timeout).delete_msg(seq, timeout=timeout)

    def get_msg(self, stream_name: str, seq: int | None = None, subject: str | None = None,
                direct: bool = False, next: bool = False, timeout: float | None = None  # noqa: A002
                ) -> RawStreamMsg:
        """A message by sequence, the last on a subject, or (``next=True``) the next on a subject.

        ``direct=True`` asks the stream's direct-get responders straight away, as
        nats-py does (no stream lookup first).

        Raises:
            MsgNotFoundError: no such message.
            StreamNotFoundError: no such stream (without ``direct``).
            NoRespondersError: with ``direct``, no such stream or it does not allow direct gets.
            ValueError: neither ``seq`` nor ``subject``.
        """
        _stream_name(stream_name)
        if subject is None and seq is None:
            raise ValueError("get_msg needs seq or subject")
        if direct:
            return self._direct_get_msg(stream_name, seq, subject, next, timeout)
        st = _js(self).stream(stream_name, timeout=timeout)
        if subject is not None:
            if next:
                return st.get_next_msg_for_subject(subject, seq or 1, timeout=timeout)
            return st.get_last_msg_for_subject(subject, timeout=timeout)
        assert seq is not None
        return st.get_msg(seq, timeout=timeout)

    def _direct_get_msg(self, stream_name: str, seq: int | None, subject: str | None, next_by_subject: bool,
                        timeout: float | None) -> RawStreamMsg:
        api = _js(self)._api
        if subject is not None and next_by_subject:
            return direct_get(api, stream_name, {"next_by_subj": subject, "seq": seq or 1}, timeout)
        if subject is not None and seq is None:  # the last on a subject: it rides in the request subject
            return direct_get(api, stream_name, {"last_by_subj": subject}, timeout, subject_suffix=f".{subject}")
        if subject is not None:
            return direct_get(api, stream_name, {"last_by_subj": subject}, timeout)
        return direct_get(api, stream_name, {"seq": seq}, timeout)

    def get_last_msg(self, stream_name: str, subject: str, direct: bool = False,
                     timeout: float | None = None) -> RawStreamMsg:
        """nats-py's name for :meth:`Stream.get_last_msg_for_subject`.

        Raises:
            MsgNotFoundError: nothing stored on ``subject``.
        """
        _stream_name(stream_name)
        return _js(self).stream(stream_name, timeout=timeout).get_last_msg_for_subject(subject, timeout=timeout)

    def find_stream_name_by_subject(self, subject: str, timeout: float | None = None) -> str:
        """nats-py's name for :meth:`stream_name_by_subject`: the stream that stores ``subject``.

        Raises:
            StreamNotFoundError: no stream stores ``subject``.
        """
        return _js(self).stream_name_by_subject(subject, timeout=timeout)

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, stream: str, config: ConsumerConfig | None = None,
                     timeout: float | None = None, **params: Any) -> ConsumerInfo:
        """Create (or update to the same config) a consumer; returns its ConsumerInfo.

        Raises:
            ValueError: a bad stream or consumer name (nats-py's texts), before sending.
        """
        _stream_name(stream)
        cname = params["name"] if "name" in params else getattr(config, "name", None)
        durable = params["durable_name"] if "durable_name" in params else getattr(config, "durable_name", None)
        if cname or durable:
            _consumer_name(cname or durable)
        return _js(self).create_or_update_consumer(stream, config, timeout=timeout, **params).cached_info

    def consumer_info(self, stream: str, consumer: str, timeout: float | None = None) -> ConsumerInfo:
        """nats-py's name: the ConsumerInfo of ``consumer`` on ``stream``.

        Raises:
            ConsumerNotFoundError: no such consumer.
            ValueError: a bad stream or consumer name (nats-py's texts), before sending.
        """
        _stream_name(stream)
        _consumer_name(consumer)
        return _js(self)._consumer_info(stream, consumer, timeout)

    def consumers_info(self, stream: str, offset: int | None = None, timeout: float | None = None
                       ) -> list[ConsumerInfo]:
        """One page of the consumer infos of ``stream`` (up to 256), from the ``offset``-th
        on, as nats-py gives it. :meth:`list_consumers` reads every page.

        Raises:
            StreamNotFoundError: no such stream.
            ValueError: a negative ``offset``.
        """
        _stream_name(stream)
        body = None if offset is None else {"offset": _offset(offset)}
        resp = _js(self)._api.request(f"CONSUMER.LIST.{stream}", body, timeout)
        return [from_wire(item, ConsumerInfo) for item in resp.get("consumers") or []]

    # ------------------------------------------------------------------ subscriptions

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: MsgHandler | None = None,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        deliver_policy: str | None = None,
        headers_only: bool | None = None,
        inactive_threshold: float | None = None,
        **config_fields: Any,
    ) -> PushSubscription | OrderedSubscription:
        """A push subscription (nats-py's ``js.subscribe``).

        Binds to the durable consumer ``durable`` (or ``queue``) when it
        exists, else creates one on ``subject``; without either, an ephemeral
        consumer deleted on ``unsubscribe()``. With ``cb`` (and not
        ``manual_ack``) each message is acked after ``cb`` returns. Any other
        ConsumerConfig field may be passed by name (``opt_start_seq=...``).
        ``ordered_consumer=True`` gives an ordered consumer (no acks).

        Raises:
            JetStreamError: nats-py's refusals, with its texts as ``description``:
                a ``queue`` other than ``durable`` (``cannot create queue subscription
                'q' to consumer 'd'``), a bound consumer without a deliver group, a
                deliver group that does not fit ``queue``.
        """
        check_callback(cb)
        if queue and durable and durable != queue:
            # nats-py refuses this before asking for the consumer (the queue names the
            # consumer of a queue subscription), once the stream is found; its text.
            stream = stream or _js(self).stream_name_by_subject(subject)
            raise JetStreamError(f"cannot create queue subscription '{queue}' to consumer '{durable}'")
        if ordered_consumer:
            st = stream or _js(self).stream_name_by_subject(subject)
            opts: dict[str, Any] = {"filter_subjects": [subject]}
            if deliver_policy is not None:
                opts["deliver_policy"] = deliver_policy
            for key in ("opt_start_seq", "opt_start_time", "replay_policy"):
                if key in config_fields:
                    opts[key] = config_fields.pop(key)
            if headers_only:
                opts["headers_only"] = True
            return OrderedSubscription(_js(self).ordered_consumer(st, **opts), cb, None, idle_heartbeat)
        if (config is not None and config.filter_subjects) or config_fields.get("filter_subjects"):
            # As nats-py: the subject only finds the stream; filter_subjects alone filters.
            stream = stream or _js(self).stream_name_by_subject(subject)
            subject = ""
        return subscribe_push(_js(self), subject, queue, cb, durable, stream, config, manual_ack, idle_heartbeat,
                              flow_control, pending_msgs_limit, pending_bytes_limit, deliver_policy,
                              headers_only, inactive_threshold, **config_fields)

    def pull_subscribe(
        self,
        subject: str,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        inbox_prefix: str | None = None,
        **config_fields: Any,
    ) -> PullSubscription:
        """A pull subscription (nats-py's ``js.pull_subscribe``); fetch with ``psub.fetch(batch, timeout)``.

        Binds to ``durable`` when it exists, else creates it (filtered on
        ``subject``); without ``durable``, an ephemeral consumer.
        """
        st = stream or _js(self).stream_name_by_subject(subject)
        if durable:
            try:
                return PullSubscription(_js(self).consumer(st, durable), owns_consumer=False)
            except ConsumerNotFoundError:
                pass
        fields: dict[str, Any] = dict(config_fields)
        # As nats-py: the subject filters the consumer unless the config lists filter_subjects.
        if not (config is not None and config.filter_subjects) and subject and "filter_subjects" not in fields:
            fields["filter_subject"] = subject
        if durable:
            fields["durable_name"] = durable
        elif not (config is not None and config.name) and "name" not in fields:
            # As nats-py: an ephemeral consumer is named here, so its config carries the name.
            fields["name"] = next_nuid()
        if config is not None:
            cons = _js(self).create_consumer(st, config.replace(**{k: v for k, v in fields.items()
                                                               if getattr(config, k) is None}))
        else:
            cons = _js(self).create_consumer(st, **fields)
        return PullSubscription(cons, owns_consumer=not durable)

    def pull_subscribe_bind(self, consumer: str | None = None, stream: str | None = None,
                            inbox_prefix: str | bytes | None = None, pending_msgs_limit: int | None = None,
                            pending_bytes_limit: int | None = None, name: str | None = None,
                            durable: str | None = None) -> PullSubscription:
        """A pull subscription on an existing consumer (``durable=`` and ``name=`` are
        nats-py's older names for ``consumer``).

        As in nats-py nothing is asked of the server here: a user allowed only to pull
        (``CONSUMER.MSG.NEXT``) can bind, and a consumer that does not exist shows
        when fetching.

        Raises:
            ValueError: no stream named (``nats: stream name is required``, nats-py's
                text) or no consumer named.
        """
        name = durable or name or consumer
        if not stream:
            raise ValueError("nats: stream name is required")
        if not name:
            raise ValueError("nats: consumer name is required")
        js = _js(self)
        return PullSubscription(Consumer(js, ConsumerInfo(stream_name=stream, name=name,
                                                          config=ConsumerConfig(durable_name=name))),
                                owns_consumer=False)

    def subscribe_bind(self, stream: str, config: ConsumerConfig, consumer: str, cb: MsgHandler | None = None,
                       manual_ack: bool = False, ordered_consumer: bool = False,
                       pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None
                       ) -> PushSubscription | OrderedSubscription:
        """Subscribe to the deliver subject of an existing push consumer (nats-py's ``subscribe_bind``).

        Raises:
            TypeError: ``config`` has no ``deliver_subject`` (not a push consumer).
        """
        if config.deliver_subject is None:
            raise TypeError("config.deliver_subject is required")
        return subscribe_push(_js(self), "", config.deliver_group, cb, consumer, stream, config, manual_ack,
                              None, False, pending_msgs_limit, pending_bytes_limit)

    # ------------------------------------------------------------------ publish

    def publish_async_completed(self, timeout: float | None = 10.0) -> None:
        """nats-py's name for :meth:`JetStream.publish_async_complete`."""
        _js(self).publish_async_complete(timeout)

