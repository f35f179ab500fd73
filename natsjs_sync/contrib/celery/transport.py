"""A Kombu transport on JetStream: ``natsjs://host:port``.

Layout (the stream, consumer and subject names of the nats-py transport proposed for Kombu,
where a queue name is a valid stream name; docs/celery.rst lists the differences):

- a Kombu queue ``Q`` is the JetStream stream ``STREAM_Q`` (work-queue retention) on the
  subject ``Q``, read through the durable pull consumer ``CONSUMER_Q`` (filter ``Q``, explicit
  acks); names that are not valid JetStream names (dots, wildcards) become
  ``<cleaned>__<sha1 prefix>``;
- a message with a Celery ``eta`` more than :data:`SCHEDULE_LEAD` away waits in the same
  stream as an ADR-51 message schedule on ``celery.schedule.STREAM_Q.<id>`` (servers from
  :data:`SCHEDULES_MIN_SERVER`, streams made with those subjects); the server publishes it to
  ``Q`` when due and removes the schedule in the same step. Elsewhere it goes to ``Q`` at once
  and the worker holds it until its eta, as with any Kombu transport;
- direct and topic exchanges are routed by Kombu from its bindings, as every virtual transport
  does: the message is published to the subject of each queue the routing key reaches;
- a fanout exchange ``E`` is the core NATS subject ``celery.fanout.E`` (no stream: what
  nobody listens to is gone, as with AMQP's non-durable broadcast); Celery's remote control
  and events use it.

Acknowledgements are JetStream's: :meth:`Channel.basic_ack` acks the JetStream message,
a reject with requeue naks it (redelivered at once), a reject without requeue terminates it.
The consumer's ack wait is the visibility timeout; while this process holds a message
unacknowledged it sends in-progress acks, so a long task is not redelivered, and a worker that
dies (SIGKILL) stops sending them: its messages are redelivered to another worker one ack wait
later. A channel pulls at most its QoS prefetch count of messages that it has not settled.

Thread-safety: a channel is used by one thread, as Kombu's virtual channels are; acks may come
from another thread (Celery's pool callbacks), and the pullers and the in-progress ticker are
threads of their own (``natsjs-celery-pull-<queue>``, ``natsjs-celery-progress``).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import logging
import queue as queue_module
import re
import threading
import time
import uuid
from typing import Any

from kombu.transport import virtual
from kombu.utils.json import dumps, loads

import natsjs_sync
from natsjs_sync.errors import (
    APIError,
    ConsumerExistsError,
    NatsConnectionError,
    NatsError,
    NoKeysError,
    NotFoundError,
    StreamNameInUseError,
)
from natsjs_sync.jetstream import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

log = logging.getLogger(__name__)

#: Prefix of the stream of each queue (the nats-py transport's default too).
STREAM_PREFIX = "STREAM_"
#: Prefix of the durable consumer of each queue (the nats-py transport's default too).
CONSUMER_PREFIX = "CONSUMER_"
#: Prefix of the core NATS subject of each fanout exchange.
FANOUT_PREFIX = "celery.fanout."
#: Prefix of the subjects holding the delayed messages of a stream (ADR-51 message schedules):
#: ``celery.schedule.<stream>.<id>``, one subject per message, as the server wants.
SCHEDULE_PREFIX = "celery.schedule."

#: The first server whose message schedules this transport uses: 2.12.0 has them, but its
#: scheduler could stop firing (a timer not re-armed when it fired before the stream was ready
#: after a restart, or reset for ever by a stream of new schedules), fixed in 2.12.1.
SCHEDULES_MIN_SERVER = (2, 12, 1)
#: Seconds before a task's eta at which the server hands the message over: the worker then
#: holds it until its eta, as Celery holds every eta task, so the eta is kept to the worker's
#: timer (the server's @at has whole seconds, and its scheduler wakes at most every 0.25 s).
SCHEDULE_LEAD = 1.0

_NAME_FORBIDDEN = frozenset(".*>/\\")
_NAME_MAX = 240
_HASH_LEN = 12

#: The key-value bucket holding the bindings of direct and topic exchanges.
BINDINGS_BUCKET = "kombu-bindings"

#: Seconds between two bucket reads for lookups of one exchange that find no queue.
MISS_REFRESH_INTERVAL = 1.0

#: Messages pulled at once when the channel has no prefetch limit.
UNLIMITED_PULL = 100

#: Why a message priority or a priority queue is refused.
PRIORITIES_REFUSED = (
    "natsjs://: message priorities are not supported (a JetStream stream delivers its messages in "
    "order); send without priority= (and without task_default_priority), declare queues without "
    "x-max-priority (task_queue_max_priority), or route urgent tasks to a queue of their own")


class _NotAnEnvelopeError(ValueError):
    """A message on a queue's or fanout exchange's subject that is no Kombu message envelope."""


def resource_name(name: str) -> str:
    """``name`` as a JetStream stream or consumer name: kept when valid, else a readable stem
    plus a hash of the whole name (the nats-py transport uses every name as it is, so the two
    share only the streams of queues whose names are valid stream names).
    """
    if name and name.isprintable() and not any(c.isspace() or c in _NAME_FORBIDDEN for c in name):
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:_HASH_LEN]
    stem = "".join(c if c.isprintable() and not c.isspace() and c not in _NAME_FORBIDDEN else "_"
                   for c in name).strip("_") or "js"
    return f"{stem[:_NAME_MAX - _HASH_LEN - 2]}__{digest}"


def stream_name(queue: str, prefix: str = STREAM_PREFIX) -> str:
    """The stream holding Kombu queue ``queue``."""
    return resource_name(prefix + queue)


def consumer_name(queue: str, prefix: str = CONSUMER_PREFIX) -> str:
    """The durable consumer reading Kombu queue ``queue``."""
    return resource_name(prefix + queue)


def fanout_subject(exchange: str) -> str:
    """The core NATS subject of fanout exchange ``exchange``."""
    return FANOUT_PREFIX + exchange


def schedule_subjects(stream: str) -> str:
    """The subjects (a wildcard) holding the delayed messages of stream ``stream``."""
    return f"{SCHEDULE_PREFIX}{stream}.*"


def _eta_of(message: dict[str, Any]) -> datetime.datetime | None:
    """The eta of a Celery (protocol 2) message, when it names one with a time zone."""
    raw = (message.get("headers") or {}).get("eta")
    if not isinstance(raw, str):
        return None
    try:
        eta = datetime.datetime.fromisoformat(raw)
    except ValueError:
        return None
    # A naive eta means the app's time zone, which only the worker knows: it holds it.
    return eta if eta.tzinfo is not None else None


def _server_has_schedules(version: str) -> bool:
    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version or "")
    return found is not None and tuple(int(n) for n in found.groups()) >= SCHEDULES_MIN_SERVER


def _token(text: str) -> str:
    # Any text as one key token: exchange and queue names may hold characters keys may not.
    return "_" + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _untoken(token: str) -> str:
    raw = token[1:]
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()


def binding_key(exchange: str, routing_key: str, queue: str) -> str:
    """The key of one binding in :data:`BINDINGS_BUCKET`."""
    return f"{_token(exchange)}.{_token(queue)}.{_token(routing_key)}"


class BindingRegistry:
    """The bindings of direct and topic exchanges, shared by every process through a
    key-value bucket, as Kombu's Redis transport shares them through Redis: a worker replying
    to a ``celery inspect`` must route to a reply queue only the asking process declared.

    A watcher thread (``natsjs-celery-bindings``) mirrors the bucket; a lookup that finds no
    queue reads the bucket again before giving up, so a binding made just before the
    publish is never missed. Thread-safe.
    """

    def __init__(self, transport: Transport):
        self._transport = transport
        self._lock = threading.Lock()
        self._table: dict[str, set[tuple[str, str]]] = {}  # exchange -> {(routing key, queue)}
        self._kv: Any = None
        self._watcher: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._refreshed: dict[str, float] = {}  # exchange -> when a miss last read the bucket

    def _bucket(self) -> Any:
        with self._lock:
            if self._kv is None:
                js = self._transport.jetstream()
                try:
                    self._kv = js.create_key_value(bucket=BINDINGS_BUCKET, history=1)
                except APIError:
                    self._kv = js.key_value(BINDINGS_BUCKET)
                self._thread = threading.Thread(target=self._follow, name="natsjs-celery-bindings", daemon=True)
                self._thread.start()
            return self._kv

    def _apply(self, key: str, present: bool) -> None:
        try:
            ex_t, queue_t, rk_t = key.split(".")
            exchange, queue, routing_key = _untoken(ex_t), _untoken(queue_t), _untoken(rk_t)
        except ValueError:
            return  # not one of ours
        with self._lock:
            entries = self._table.setdefault(exchange, set())
            if present:
                entries.add((routing_key, queue))
            else:
                entries.discard((routing_key, queue))

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self._watcher = watcher = self._kv.watch_all()
                for entry in watcher:
                    if self._stop.is_set():
                        break
                    if entry is not None:
                        self._apply(entry.key, entry.operation.value == "PUT")
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("natsjs: following the bindings failed (%s); following again", exc)
                self._stop.wait(1.0)

    def add(self, exchange: str, routing_key: str, queue: str) -> None:
        self._bucket().put(binding_key(exchange, routing_key, queue), b"")
        self._apply(binding_key(exchange, routing_key, queue), True)

    def remove(self, exchange: str, routing_key: str, queue: str) -> None:
        try:
            self._bucket().delete(binding_key(exchange, routing_key, queue))
        except NotFoundError:
            pass
        self._apply(binding_key(exchange, routing_key, queue), False)

    def of(self, exchange: str) -> set[tuple[str, str]]:
        """The ``(routing key, queue)`` bindings of ``exchange`` known here."""
        self._bucket()
        with self._lock:
            return set(self._table.get(exchange, ()))

    def refresh(self, exchange: str) -> None:
        """Read the bindings of ``exchange`` from the server now."""
        kv = self._bucket()
        try:
            keys = kv.keys(f"{_token(exchange)}.>")
        except (NotFoundError, NoKeysError):
            keys = []
        found: set[tuple[str, str]] = set()
        for key in keys:
            _ex, queue_t, rk_t = key.split(".")
            found.add((_untoken(rk_t), _untoken(queue_t)))
        with self._lock:
            self._table[exchange] = found

    def refresh_missing(self, exchange: str) -> None:
        """:meth:`refresh` after a lookup found no queue, at most every
        :data:`MISS_REFRESH_INTERVAL` seconds per exchange: events published to an exchange
        nobody listens to must not cost a bucket read each (the watcher still brings new
        bindings in meanwhile)."""
        now = time.monotonic()
        with self._lock:
            last = self._refreshed.get(exchange)
            if last is not None and now - last < MISS_REFRESH_INTERVAL:
                return
            self._refreshed[exchange] = now
        self.refresh(exchange)

    def close(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            try:
                watcher.stop()
            except NatsError:
                pass


class QoS(virtual.QoS):
    """Prefetch accounting with JetStream acks; settled by any thread."""

    channel: Channel

    def ack(self, delivery_tag: str) -> None:
        self.channel._settle(delivery_tag, "ack")
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # Not the base's reject: it would publish a copy; a nak makes the server redeliver.
        self.channel._settle(delivery_tag, "nak" if requeue else "term")
        self._quick_ack(delivery_tag)

    def restore_unacked(self) -> list[tuple[Exception, Any]]:
        """Hand every unsettled message back to the server (nak: redelivered at once)."""
        self._flush()
        errors: list[tuple[Exception, Any]] = []
        while self._delivered:
            tag, _message = self._delivered.popitem()
            try:
                self.channel._settle(tag, "nak")
            except Exception as exc:
                errors.append((exc, tag))
        return errors

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to do: the server redelivers what nobody acknowledged within the ack wait."""


class _Puller:
    """Pulls one queue's durable consumer into the transport's inbox, within the channel's
    free prefetch slots. Not thread-safe; started and stopped by its channel."""

    def __init__(self, channel: Channel, queue: str):
        self.channel = channel
        self.queue = queue
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"natsjs-celery-pull-{queue}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.channel._slots_changed()

    def _run(self) -> None:
        channel, stop = self.channel, self.stop_event
        consumer = None
        while not stop.is_set():
            try:
                if consumer is None:
                    consumer = channel._ensure_consumer(self.queue)
                want = channel._reserve_slots(stop)
                if not want:
                    continue
                try:
                    batch = consumer.fetch(want, max_wait=channel.fetch_wait)
                    for msg in batch:
                        channel._receive(self.queue, msg)
                finally:
                    # Those received are counted as unsettled now; the rest are free again.
                    channel._release_slots(want)
                if batch.error is not None:
                    raise batch.error
            except Exception as exc:
                if stop.is_set():
                    break
                log.warning("natsjs: pulling %r failed (%s: %s); retrying", self.queue, type(exc).__name__, exc)
                if isinstance(exc, NotFoundError):
                    channel._forget_queue(self.queue)
                    consumer = None
                stop.wait(channel.retry_wait)


class Channel(virtual.Channel):
    """A Kombu channel on JetStream. Used by one thread (Kombu's rule for channels); its
    acks may come from others."""

    QoS = QoS
    supports_fanout = True
    connection: Transport

    #: Seconds a pull request stays open.
    fetch_wait = 5.0
    #: Seconds a puller waits after an error before trying again.
    retry_wait = 1.0

    def __init__(self, connection: Transport, **kwargs: Any):
        super().__init__(connection, **kwargs)
        self._lock = threading.Condition()
        self._unsettled: dict[str, Any] = {}  # delivery tag -> JetStream Msg
        self._reserved = 0
        self._pullers: dict[str, _Puller] = {}
        self._fanout_subs: dict[str, Any] = {}  # exchange -> Subscription
        self._fanout_queues: dict[str, set[str]] = {}  # exchange -> bound queues
        self._known_streams: dict[str, bool] = {}  # stream -> whether it holds delayed messages
        self._consumers_by_queue: dict[str, Any] = {}
        client: Any = self.connection.client
        opts = client.transport_options
        self.stream_prefix = opts.get("stream_name_prefix", STREAM_PREFIX)
        self.consumer_prefix = opts.get("consumer_name_prefix", CONSUMER_PREFIX)
        self.visibility_timeout = self.connection.visibility_timeout
        self.fetch_wait = float(opts.get("fetch_wait", self.fetch_wait))
        self.storage = StorageType(opts.get("storage", "file"))
        self.max_ack_pending = int(opts.get("max_ack_pending", -1))
        self.stream_options: dict[str, Any] = dict(opts.get("stream_config") or {})
        self.consumer_options: dict[str, Any] = dict(opts.get("consumer_config") or {})
        self.message_schedules = bool(opts.get("message_schedules", True))

    # ------------------------------------------------------------------ resources

    @property
    def js(self) -> Any:
        return self.connection.jetstream()

    def _ensure_stream(self, queue: str) -> str:
        name = stream_name(queue, self.stream_prefix)
        if name in self._known_streams:
            return name
        js = self.js
        options = dict(self.stream_options)
        # The server refuses message schedules in a stream that discards new messages when full:
        # such a stream is made without them (the worker holds eta tasks), not refused.
        schedules = (self.message_schedules and _server_has_schedules(js.server_version)
                     and options.get("discard") != DiscardPolicy.NEW)
        subjects = [queue, schedule_subjects(name)] if schedules else [queue]
        if schedules:
            # Message schedules need roll-ups: the server rolls up each schedule's subject.
            options.setdefault("allow_msg_schedules", True)
            options.setdefault("allow_rollup_hdrs", True)
        cfg = StreamConfig(name=name, subjects=subjects, retention=RetentionPolicy.WORK_QUEUE,
                           storage=self.storage, **options)
        try:
            config = js.create_stream(cfg).config
        except StreamNameInUseError:
            # Made by another process, by an earlier version, or by an operator with other
            # limits: used as it is, holding delayed messages only if it was made for them.
            config = js.stream(name).config
        self._known_streams[name] = bool(
            schedules and config.allow_msg_schedules and schedule_subjects(name) in (config.subjects or ()))
        return name

    def _ensure_consumer(self, queue: str) -> Any:
        consumer = self._consumers_by_queue.get(queue)
        if consumer is not None:
            return consumer
        stream = self._ensure_stream(queue)
        name = consumer_name(queue, self.consumer_prefix)
        cfg = ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, filter_subject=queue,
                             ack_wait=self.visibility_timeout, max_deliver=-1,
                             max_ack_pending=self.max_ack_pending, **self.consumer_options)
        try:
            consumer = self.js.create_consumer(stream, cfg)
        except ConsumerExistsError:
            # Made with another config (another visibility timeout, the nats-py transport's
            # default ack wait): its ack wait is what the in-progress acks must beat.
            consumer = self.js.consumer(stream, name)
            self.connection.held_for(float(consumer.cached_info.config.ack_wait or self.visibility_timeout))
        self._consumers_by_queue[queue] = consumer
        return consumer

    def _forget_queue(self, queue: str) -> None:
        self._known_streams.pop(stream_name(queue, self.stream_prefix), None)
        self._consumers_by_queue.pop(queue, None)

    def prepare_queue_arguments(self, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # Kombu hands a Queue's max_priority here (AMQP turns it into x-max-priority).
        if kwargs.get("max_priority") or (arguments or {}).get("x-max-priority"):
            raise NotImplementedError(f"{PRIORITIES_REFUSED} (a queue asks for x-max-priority)")
        return arguments

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        if (kwargs.get("arguments") or {}).get("x-max-priority"):
            raise NotImplementedError(f"{PRIORITIES_REFUSED} (queue {queue!r} asks for x-max-priority)")
        # Streams are made when a message is put or a consumer starts: a queue bound only to
        # a fanout exchange (Celery's pidbox) never needs one.
        pass

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        try:
            self.js.stream(stream_name(queue, self.stream_prefix))
        except NotFoundError:
            return False
        return True

    def _delete(self, queue: str, exchange: str | None = None, routing_key: str | None = None,
                *args: Any, **kwargs: Any) -> None:
        if exchange and self.typeof(exchange).type != "fanout":
            self.connection.bindings.remove(exchange, routing_key or "", queue)
        self._forget_queue(queue)
        try:
            self.js.delete_stream(stream_name(queue, self.stream_prefix))
        except NotFoundError:
            pass

    def _size(self, queue: str) -> int:
        try:
            info = self.js.stream(stream_name(queue, self.stream_prefix)).info()
        except NotFoundError:
            return 0
        return int(info.state.messages)

    def _purge(self, queue: str) -> int:
        try:
            stream = self.js.stream(stream_name(queue, self.stream_prefix))
        except NotFoundError:
            return 0
        return int(stream.purge())

    # ------------------------------------------------------------------ publishing

    def basic_publish(self, message: dict[str, Any], exchange: str, routing_key: str, **kwargs: Any) -> Any:
        # Refused rather than dropped: a caller asking for a priority must not believe it has one.
        # Kombu gives every message priority 0 when none was asked for.
        if (message.get("properties") or {}).get("priority"):
            raise NotImplementedError(PRIORITIES_REFUSED)
        return super().basic_publish(message, exchange, routing_key, **kwargs)

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        name = self._ensure_stream(queue)
        data = dumps(message).encode()
        # No Nats-TTL header for Kombu's ``expiration``: a stream that does not allow
        # per-message TTLs (the default, and every server before 2.11) refuses the publish.
        eta = _eta_of(message) if self._known_streams.get(name) else None
        if eta is not None:
            due = eta - datetime.timedelta(seconds=SCHEDULE_LEAD)
            if due > datetime.datetime.now(datetime.timezone.utc):
                # The server keeps the message on a subject of its own and publishes it to the
                # queue's subject when due (then removes it, in the same step): no worker
                # holds it meanwhile, and a restart of either loses nothing.
                self.js.publish(f"{SCHEDULE_PREFIX}{name}.{uuid.uuid4().hex}", data,
                                schedule_at=due, schedule_target=queue)
                return
        # Due within the lead, or no schedules here: the worker holds it until its eta.
        self.js.publish(queue, data)

    def _put_fanout(self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any) -> None:
        self.connection.nats().publish(fanout_subject(exchange), dumps(message).encode())

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        if self.typeof(exchange).type != "fanout":
            self.connection.bindings.add(exchange, routing_key, queue)
            return
        self._fanout_queues.setdefault(exchange, set()).add(queue)
        if exchange not in self._fanout_subs:
            def on_fanout(msg: Any, exchange: str = exchange) -> None:
                for bound in tuple(self._fanout_queues.get(exchange, ())):
                    # Anyone may publish on the subject: what is no envelope is dropped here,
                    # not raised from drain_events (where it would stop a Celery worker).
                    try:
                        payload = self._envelope(msg.data)
                    except _NotAnEnvelopeError as exc:
                        log.error("natsjs: fanout %r: dropping a message that is not a Kombu message (%s)",
                                  exchange, exc)
                        return
                    self.connection._inbox.put((bound, payload, self))
            self._fanout_subs[exchange] = self.connection.nats().subscribe(fanout_subject(exchange), cb=on_fanout)

    def get_table(self, exchange: str) -> list[tuple[str, Any, str]]:
        """The local bindings of ``exchange`` and those other processes made."""
        table = list(super().get_table(exchange))
        etype = self.typeof(exchange)
        if etype.type != "fanout":
            seen = {(rk, q) for rk, _p, q in table}
            for routing_key, queue in self.connection.bindings.of(exchange) - seen:
                table.append(etype.prepare_bind(queue, exchange, routing_key, None))
        return table

    def _lookup(self, exchange: str, routing_key: str, default: str | None = None) -> Any:
        if exchange and self.typeof(exchange).type != "fanout":
            try:
                found = self.typeof(exchange).lookup(self.get_table(exchange), exchange, routing_key, default)
            except KeyError:
                found = set()
            if not found:
                self.connection.bindings.refresh_missing(exchange)
        return super()._lookup(exchange, routing_key, default)

    def _fanout_only(self, queue: str) -> bool:
        bindings = list(self.state.queue_bindings(queue))
        return bool(bindings) and all(self.typeof(b.exchange).type == "fanout" for b in bindings)

    # ------------------------------------------------------------------ consuming

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> Any:
        result = super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)
        if queue not in self._pullers and not self._fanout_only(queue):
            self._ensure_consumer(queue)  # fail here, in the caller, when the server refuses
            puller = self._pullers[queue] = _Puller(self, queue)
            puller.start()
        return result

    def basic_cancel(self, consumer_tag: str) -> Any:
        queue = self._tag_to_queue.get(consumer_tag)
        result = super().basic_cancel(consumer_tag)
        if queue is not None and queue not in self._active_queues:
            puller = self._pullers.pop(queue, None)
            if puller is not None:
                puller.stop()
        return result

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        # basic_get: one message, now or within a short wait.
        consumer = self._ensure_consumer(queue)
        for msg in consumer.fetch(1, max_wait=timeout or 1.0):
            try:
                return self._payload(msg)
            except _NotAnEnvelopeError as exc:
                self._drop(queue, msg, exc)
        raise queue_module.Empty()

    def _get_many(self, queues: Any, timeout: float | None = None) -> None:
        # Only Transport.drain_events delivers (from the shared inbox); nothing to poll here.
        raise queue_module.Empty()

    def _envelope(self, data: bytes) -> dict[str, Any]:
        """``data`` as a Kombu message envelope with a fresh delivery tag (a redelivered message
        must not collide with its earlier copy, nor two queues' copies of one fanout message).

        Raises:
            _NotAnEnvelopeError: ``data`` is no envelope Kombu can make a message of.
        """
        try:
            payload = loads(data)
            if not (isinstance(payload, dict) and "body" in payload and isinstance(payload.get("properties"), dict)):
                # JSON, but no Kombu envelope (which always has both): the nats-py transport's
                # clean-body mode, another app.
                raise TypeError(f"a JSON {type(payload).__name__} without a Kombu envelope's body and properties")
            payload["properties"] = dict(payload["properties"], delivery_tag=uuid.uuid4().hex)
            # What Kombu makes of it when delivering (body decoding, decompression): failing here
            # drops the message; failing there would raise out of drain_events.
            self.Message(payload, channel=self)
        except Exception as exc:  # anything the data makes Kombu raise: untrusted input
            raise _NotAnEnvelopeError(f"{type(exc).__name__}: {exc}") from exc
        return payload

    def _drop(self, queue: str, msg: Any, exc: Exception) -> None:
        log.error("natsjs: %r: dropping a message that is not a Kombu message (%s)", queue, exc)
        msg.term("not a Kombu message")

    def _payload(self, msg: Any) -> dict[str, Any]:
        payload = self._envelope(msg.data)
        tag = payload["properties"]["delivery_tag"]
        try:
            payload["redelivered"] = msg.metadata.num_delivered > 1
        except NatsError:
            pass
        with self._lock:
            self._unsettled[tag] = msg
        return payload

    def _receive(self, queue: str, msg: Any) -> None:
        try:
            payload = self._payload(msg)
        except _NotAnEnvelopeError as exc:
            self._drop(queue, msg, exc)
            return
        self.connection._inbox.put((queue, payload, self))

    def _settle(self, tag: str, how: str) -> None:
        with self._lock:
            msg = self._unsettled.pop(tag, None)
            self._lock.notify_all()
        if msg is None:
            return  # a fanout message: nothing to settle
        getattr(msg, how)()

    # ------------------------------------------------------------------ prefetch slots

    def _reserve_slots(self, stop: threading.Event) -> int:
        """Up to the channel's free prefetch slots (waits a bounded while for one)."""
        with self._lock:
            free = self._free()
            if free <= 0 and not stop.is_set():
                self._lock.wait(self.fetch_wait)
                free = self._free()
            # Each queue's puller gets its share, so one idle queue's open pull request cannot
            # hold every slot while another queue has messages waiting.
            pullers = max(1, len(self._pullers))
            share = max(1, -(-self._limit() // pullers))
            take = max(0, min(free, share))
            self._reserved += take
            return take

    def _limit(self) -> int:
        return int(self.qos.prefetch_count or UNLIMITED_PULL * max(1, len(self._pullers)))

    def _free(self) -> int:
        return self._limit() - len(self._unsettled) - self._reserved

    def _release_slots(self, n: int) -> None:
        with self._lock:
            self._reserved -= n
            self._lock.notify_all()

    def _slots_changed(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def basic_qos(self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global: bool = False) -> None:
        super().basic_qos(prefetch_size, prefetch_count, apply_global)
        self._slots_changed()

    def _progress(self) -> None:
        """Reset the ack wait of every message this channel holds unsettled."""
        with self._lock:
            held = list(self._unsettled.values())
        for msg in held:
            msg.in_progress()

    def close(self) -> None:
        for puller in self._pullers.values():
            puller.stop()
        self._pullers.clear()
        for sub in self._fanout_subs.values():
            try:
                sub.unsubscribe()
            except NatsError:
                pass
        self._fanout_subs.clear()
        super().close()


class Transport(virtual.Transport):
    """Kombu transport for ``natsjs://[user:password@]host[:port]`` (one NATS connection per
    Kombu connection, shared by its channels). Thread-safe as Kombu's virtual transports are.

    Transport options (``broker_transport_options`` in Celery): ``visibility_timeout``
    (seconds, the consumers' ack wait, default 1800), ``max_ack_pending`` (per durable
    consumer, all workers together; default -1: unlimited), ``storage`` (``"file"`` or
    ``"memory"``, for streams this transport creates), ``stream_config`` and
    ``consumer_config`` (extra fields for them), ``stream_name_prefix``,
    ``consumer_name_prefix``, ``fetch_wait``, ``message_schedules`` (default True: on servers
    from :data:`SCHEDULES_MIN_SERVER`, new streams get schedule subjects and eta tasks wait in
    them), ``context`` (a nats CLI context name, used
    when the URL names no host; without it such a URL means ``NATS_URL``), and ``connect_options`` (keywords for
    :func:`natsjs_sync.connect`).
    """

    Channel = Channel
    default_port = 4222  # type: ignore[assignment]
    driver_type = "natsjs"
    driver_name = "natsjs_sync"
    polling_interval = None  # type: ignore[assignment]  # drain_events waits on the inbox
    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset(["direct", "topic", "fanout"]), heartbeats=False)
    connection_errors = (*virtual.Transport.connection_errors, NatsConnectionError, TimeoutError)  # type: ignore[assignment]
    channel_errors = (*virtual.Transport.channel_errors, APIError)  # type: ignore[assignment]

    def __init__(self, client: Any, **kwargs: Any):
        super().__init__(client, **kwargs)
        self._nc: Any = None
        self._js: Any = None
        self._nc_lock = threading.Lock()
        # (queue, payload, channel that received it); None wakes a drain at close.
        self._inbox: queue_module.Queue[tuple[str, dict[str, Any], Channel] | None] = queue_module.Queue()
        self._ticker_stop = threading.Event()
        self._ticker_wake = threading.Event()  # set at close and when the interval shrinks
        self._ticker: threading.Thread | None = None
        #: Seconds a consumer waits for an ack before redelivering (its ack wait).
        self.visibility_timeout = float(client.transport_options.get("visibility_timeout", 1800.0))
        #: Seconds between two in-progress acks of every held message (a third of the
        #: shortest ack wait of the consumers in use).
        self.progress_interval = max(0.2, self.visibility_timeout / 3)
        #: Bindings of direct and topic exchanges, shared through the server.
        self.bindings = BindingRegistry(self)

    def nats(self) -> Any:
        """The NATS client of this connection, connected on first use."""
        with self._nc_lock:
            if self._nc is None:
                self._nc = self._connect()
            return self._nc

    def jetstream(self) -> Any:
        nc = self.nats()
        with self._nc_lock:
            if self._js is None:
                self._js = nc.jetstream()
            return self._js

    def _connect(self) -> Any:
        conninfo: Any = self.client
        opts = dict(conninfo.transport_options.get("connect_options") or {})
        opts.setdefault("name", "celery")
        # A worker must outlive any outage: keep reconnecting.
        opts.setdefault("max_reconnect_attempts", -1)
        context = conninfo.transport_options.get("context")
        host = conninfo.hostname
        if not host and not conninfo.port:
            # natsjs:// alone: the context named, else NATS_URL, else 127.0.0.1:4222, as
            # natsjs_sync.connect() chooses.
            return natsjs_sync.connect(context=context, **opts)
        port = conninfo.port or self.default_port
        auth = ""
        if conninfo.userid:
            auth = conninfo.userid + (f":{conninfo.password}" if conninfo.password else "") + "@"
        scheme = "tls" if conninfo.ssl else "nats"
        return natsjs_sync.connect(f"{scheme}://{auth}{host or '127.0.0.1'}:{port}", **opts)

    def establish_connection(self) -> Any:
        self.nats()
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="natsjs-celery-progress", daemon=True)
            self._ticker.start()
        return super().establish_connection()

    def held_for(self, ack_wait: float) -> None:
        """Send in-progress acks often enough for a consumer whose ack wait is ``ack_wait``."""
        # Three in-progress acks per ack wait: one lost or late still leaves two.
        interval = max(0.2, ack_wait / 3)
        if interval < self.progress_interval:
            self.progress_interval = interval
            self._ticker_wake.set()  # the ticker may be in a longer wait

    def _tick(self) -> None:
        while True:
            self._ticker_wake.wait(self.progress_interval)
            self._ticker_wake.clear()
            if self._ticker_stop.is_set():
                return
            for channel in list(self.channels):
                try:
                    channel._progress()
                except Exception as exc:
                    log.debug("natsjs: in-progress acks failed: %s", exc)

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        try:
            item = self._inbox.get(timeout=timeout)
        except queue_module.Empty:
            raise TimeoutError() from None
        if item is None:
            raise TimeoutError()
        queue, payload, channel = item
        if queue not in self._callbacks:
            # Its consumer was cancelled since: hand it back to the server for another.
            channel._settle(payload["properties"]["delivery_tag"], "nak")
            raise TimeoutError()
        self._deliver(payload, queue)

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        self._ticker_stop.set()
        self._ticker_wake.set()
        self.bindings.close()
        self._inbox.put(None)
        with self._nc_lock:
            nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            try:
                nc.close()
            except NatsError as exc:
                log.debug("natsjs: close: %s", exc)

    def verify_connection(self, connection: Any) -> bool:
        nc = self._nc
        return nc is not None and bool(nc.is_connected)

    @property
    def default_connection_params(self) -> dict[str, Any]:
        return {"port": self.default_port, "hostname": "127.0.0.1"}
