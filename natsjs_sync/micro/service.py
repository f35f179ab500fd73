"""Services (ADR-32): endpoints, groups, discovery on ``$SRV.PING|INFO|STATS``.

The names and signatures are nats-py's ``nats.micro.service`` without the
``await``\\ s, so a nats-py service program runs with its imports changed.

Threads: every endpoint is a subscription with a callback, and by default its
handler runs as that callback, on the client's dispatcher: one request at a
time per endpoint, in arrival order, as in nats.go, nats.js and nats-py, while
different endpoints run in parallel. With ``max_concurrency=N`` the endpoint
callbacks hand the requests to a pool owned by the service instead, so up to N
requests of the service (all its endpoints together) are handled at once; while
N are in progress the endpoints hold further requests back in their
subscription queues. A drain of an endpoint's subscription (``stop()``, or the
client's ``drain()``) waits for the requests it handed to the pool, so they are
answered before the client stops publishing. Handlers never run on the client's
reader thread. The service uses the core through its declared interface
(:mod:`natsjs_sync._core.spi`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, Protocol, TypeVar, overload

import msgspec

from .._core import spi
from .._core.logs import of_msg
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..client import Client
from ..errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    NatsError,
    ServiceError,
    TimeoutError,
)
from ..msg import Msg
from ..protocol.nuid import next_nuid
from ..protocol.subjects import validate_subscribe_subject
from ..subscription import Subscription
from ._pool import WorkerPool
from .config import (
    NAME_REGEX,
    SEMVER_REGEX,
    SUBJECT_REGEX,
    EndpointConfig,
    GroupConfig,
    ServiceConfig,
    StatsHandler,
    _check_name,
)
from .models import (
    DEFAULT_PREFIX,
    DEFAULT_QUEUE_GROUP,
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointInfo,
    EndpointStats,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    ServiceVerb,
)
from .request import ERROR_CODE_HEADER, ERROR_HEADER, Handler, Request

log = logging.getLogger("natsjs_sync.micro")

#: Seconds :meth:`Service.start` may take to confirm its subscriptions with the server.
DEFAULT_START_TIMEOUT = 5.0
#: Seconds :meth:`Service.stop` may take to drain the endpoints and finish the requests in progress.
DEFAULT_STOP_TIMEOUT = 30.0


F = TypeVar("F", bound=Callable[..., Any])

# Which service's handler runs on this thread: a service stopped from its own
# handler cannot wait for that handler, so it stops on a thread of its own.
_current = threading.local()
_json = msgspec.json.Encoder()


def _resolve_queue(own: str | None, parent: str, disabled: bool, parent_disabled: bool) -> tuple[str, bool]:
    """The queue group (and whether there is none), after nats.go's inheritance rules."""
    if disabled:
        return "", True
    if own:
        return own, False
    if parent_disabled:
        return "", True
    return parent or DEFAULT_QUEUE_GROUP, False


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def control_subject(
    verb: ServiceVerb | str,
    name: str | None = None,
    id: str | None = None,  # noqa: A002 - nats-py's argument name
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """The discovery subject: ``$SRV.<verb>``, ``$SRV.<verb>.<name>`` or ``$SRV.<verb>.<name>.<id>``.

    Raises:
        ValueError: an unknown verb, an invalid name or id, or an id without a name.
    """
    try:
        v = ServiceVerb(verb.upper() if isinstance(verb, str) else verb).value
    except ValueError:
        raise ValueError(f"unknown verb {verb!r}: use PING, INFO or STATS") from None
    if not name:
        if id:
            raise ValueError("a service id needs the service name too")
        return f"{prefix}.{v}"
    _check_name("service", name)
    if not id:
        return f"{prefix}.{v}.{name}"
    _check_name("service id", id)
    return f"{prefix}.{v}.{name}.{id}"


class ServiceIdentity(Protocol):
    """What identifies a service instance (PING, INFO and STATS all carry it)."""

    id: str
    name: str
    version: str
    metadata: dict[str, str]


class EndpointManager(Protocol):
    """Something endpoints are added to: a :class:`Service` or a :class:`Group`."""

    def add_endpoint(self, config: EndpointConfig | str | None = None, handler: Handler | None = None,
                     **kwargs: Any) -> Endpoint: ...


class GroupManager(Protocol):
    """Something groups are added to: a :class:`Service` or a :class:`Group`."""

    def add_group(self, config: GroupConfig | str | None = None, **kwargs: Any) -> Group: ...


class Endpoint:
    """One endpoint of a running service (from :meth:`Service.add_endpoint`). Thread-safe."""

    def __init__(self, service: Service, name: str, subject: str, queue_group: str,
                 handler: Handler, metadata: dict[str, str] | None):
        self._service = service
        self.name = name
        self.subject = subject
        self.queue_group = queue_group
        """The queue group, ``""`` when it has none."""
        self.handler = handler
        self._metadata = metadata
        self._subscription: Subscription | None = None
        # Requests handed to the service's pool and not finished (pool mode only).
        self._in_flight = 0
        self._idle = threading.Condition(service._lock)
        self._num_requests = 0
        self._num_errors = 0
        self._processing_time = 0
        self._last_error = ""

    @property
    def metadata(self) -> dict[str, str]:
        """The endpoint's metadata (a copy)."""
        return dict(self._metadata or {})

    @property
    def subscription(self) -> Subscription | None:
        """The subscription that receives its requests."""
        return self._subscription

    def info(self) -> EndpointInfo:
        """This endpoint as INFO shows it."""
        return EndpointInfo(name=self.name, subject=self.subject, queue_group=self.queue_group,
                            metadata=self.metadata)

    def stats(self) -> EndpointStats:
        """Its counters now (``data`` is filled in by the service's stats handler in :meth:`Service.stats`)."""
        with self._service._lock:
            n, t = self._num_requests, self._processing_time
            return EndpointStats(
                name=self.name, subject=self.subject, queue_group=self.queue_group,
                num_requests=n, num_errors=self._num_errors, last_error=self._last_error,
                processing_time=t, average_processing_time=t // n if n else 0,
            )

    def _reset(self) -> None:
        self._num_requests = self._num_errors = self._processing_time = 0
        self._last_error = ""

    def _wait_idle(self, timeout: float | None) -> bool:
        """Wait until no request of this endpoint is in the pool (but the one this
        thread is handling, if it is one: that one cannot finish while we wait)."""
        mine = 1 if getattr(_current, "endpoint", None) is self else 0
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight <= mine, timeout)

    def __repr__(self) -> str:
        q = f" queue={self.queue_group!r}" if self.queue_group else " no queue"
        return f"<Endpoint {self.name!r} subject={self.subject!r}{q}>"


class _EndpointSubscription(Subscription):
    """An endpoint's subscription. With a pool, its callback only hands each
    request over, so waiting for it to be done (what a drain of the subscription
    or of the whole client does) also waits for the requests handed over: they
    are answered before the client stops publishing."""

    endpoint: Endpoint | None = None

    def wait_done(self, timeout: float | None) -> bool:
        deadline = Deadline(timeout)
        if not super().wait_done(timeout):
            return False
        endpoint = self.endpoint
        return endpoint is None or endpoint._wait_idle(deadline.remaining())


class _EndpointAdder:
    """``add_endpoint``, ``add_group`` and the ``@endpoint`` decorator, shared by services and groups."""

    _service: Service
    _prefix: str
    _queue_group: str
    _queue_group_disabled: bool

    def add_endpoint(self, config: EndpointConfig | str | None = None, handler: Handler | None = None,
                     **kwargs: Any) -> Endpoint:
        """Add an endpoint and start listening on it.

        Takes an :class:`EndpointConfig`, or its fields as keywords, or the name
        and handler first: ``add_endpoint("echo", echo, subject="svc.echo")``.
        Keywords given with a config replace its fields.

        Returns:
            The :class:`Endpoint`.

        Raises:
            ValueError, TypeError, BadSubjectError: an invalid configuration.
            RuntimeError: the service is stopped.
            ConnectionClosedError: the client is closed.
        """
        if isinstance(config, str):
            kwargs["name"] = config
            config = None
        if handler is not None:
            kwargs["handler"] = handler
        if config is None:
            config = EndpointConfig(**kwargs)
        elif not isinstance(config, EndpointConfig):
            raise TypeError(f"config must be an EndpointConfig, a name or None, not {type(config).__name__}")
        elif kwargs:
            config = replace(config, **kwargs)
        return self._service._add_endpoint(config, self._prefix, self._queue_group, self._queue_group_disabled)

    def add_group(self, config: GroupConfig | str | None = None, **kwargs: Any) -> Group:
        """A group of endpoints under this one's subject prefix (``name`` is appended with a dot).

        Takes a :class:`GroupConfig`, its fields as keywords, or the name first.

        Raises:
            ValueError, TypeError, BadSubjectError: an invalid configuration.
        """
        if isinstance(config, str):
            kwargs["name"] = config
            config = None
        if config is None:
            config = GroupConfig(**kwargs)
        elif not isinstance(config, GroupConfig):
            raise TypeError(f"config must be a GroupConfig, a name or None, not {type(config).__name__}")
        elif kwargs:
            config = replace(config, **kwargs)
        queue, disabled = _resolve_queue(config.queue_group, self._queue_group, config.queue_group_disabled,
                                         self._queue_group_disabled)
        return Group(self._service, _join(self._prefix, config.name), queue, disabled)

    @overload
    def endpoint(self, name: F, /) -> F: ...

    @overload
    def endpoint(self, name: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def endpoint(self, name: str | F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Decorator: the function becomes an endpoint's handler (its name by default).

        ``@svc.endpoint``, ``@svc.endpoint("name")`` or
        ``@svc.endpoint(subject="orders.get", metadata={...})``; the options are
        those of :class:`EndpointConfig`. The function is returned unchanged.
        """
        if callable(name):
            fn = name
            self.add_endpoint(EndpointConfig(name=fn.__name__, handler=fn))
            return fn

        def register(fn: F) -> F:
            self.add_endpoint(EndpointConfig(name=name or fn.__name__, handler=fn, **options))
            return fn

        return register


class Group(_EndpointAdder):
    """Endpoints under a common subject prefix (from :meth:`Service.add_group`). Thread-safe."""

    def __init__(self, service: Service, prefix: str, queue_group: str, queue_group_disabled: bool):
        self._service = service
        self._prefix = prefix
        self._queue_group = queue_group
        self._queue_group_disabled = queue_group_disabled

    @property
    def prefix(self) -> str:
        """The subject prefix of its endpoints."""
        return self._prefix

    @property
    def queue_group(self) -> str:
        """The default queue group of its endpoints (``""`` when they have none)."""
        return "" if self._queue_group_disabled else self._queue_group

    def __repr__(self) -> str:
        return f"<Group {self._prefix!r} of service {self._service.name!r}>"


class Service(_EndpointAdder):
    """A running service: its endpoints, its discovery subjects and its stats. Thread-safe.

    Made by :func:`add_service` (started), or ``Service(nc, config)`` and
    :meth:`start`. A context manager: the ``with`` block starts and stops it.
    """

    def __init__(self, client: Client, config: ServiceConfig | None = None, **kwargs: Any) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"client must be a natsjs_sync Client, not {type(client).__name__}")
        if config is None:
            config = ServiceConfig(**kwargs)
        elif not isinstance(config, ServiceConfig):
            raise TypeError(f"config must be a ServiceConfig or None, not {type(config).__name__}")
        else:
            config = replace(config, **kwargs)  # a copy: changing the caller's config changes nothing here
        self._client = client
        self._core = spi.link(client)
        self._config = config
        self._id = next_nuid()
        self._service = self
        self._prefix = ""
        self._queue_group = config.queue_group or DEFAULT_QUEUE_GROUP
        self._queue_group_disabled = config.queue_group_disabled
        self._metadata: dict[str, str] = dict(config.metadata or {})
        self._lock = threading.Lock()
        self._endpoints: list[Endpoint] = []
        self._verb_subs: list[Subscription] = []
        self._started = datetime.now(timezone.utc)
        self._stopping = False
        self._stopped = threading.Event()
        self._pid = os.getpid()
        tag = client.name or "client"
        self._pool = (WorkerPool(config.max_concurrency, f"natsjs-svc-{config.name}-{tag}",
                                 logger=self._core.logs.to(log))
                      if config.max_concurrency else None)
        self._ping = _json.encode(self.ping().to_dict())
        self._close_hook: spi.Handle | None = None

    # ------------------------------------------------------------------ identity

    @property
    def id(self) -> str:
        """This instance's unique id."""
        return self._id

    @property
    def name(self) -> str:
        """The service's name (as in ``add_service(nc, name=...)``)."""
        return self._config.name

    @property
    def version(self) -> str:
        """The service's version (semantic versioning, e.g. ``"1.0.0"``)."""
        return self._config.version

    @property
    def description(self) -> str:
        """The service's description (empty when none was given)."""
        return self._config.description or ""

    @property
    def metadata(self) -> dict[str, str]:
        """The service's metadata (a copy)."""
        return dict(self._metadata)

    @property
    def started(self) -> datetime:
        """When it started or was last reset (UTC)."""
        return self._started

    @property
    def client(self) -> Client:
        """The Client the service runs on."""
        return self._client

    @property
    def max_concurrency(self) -> int | None:
        """The most requests handled at once (``None``: one per endpoint)."""
        return self._config.max_concurrency

    @property
    def endpoints(self) -> list[Endpoint]:
        """The service's endpoints (a copy of the list)."""
        with self._lock:
            return list(self._endpoints)

    @property
    def stopped(self) -> threading.Event:
        """Set once :meth:`stop` has finished (``svc.stopped.wait()`` waits for it)."""
        return self._stopped

    @property
    def is_stopped(self) -> bool:
        """True once stopped, once its client is closed, and in a forked child
        (a service belongs to the process that started it)."""
        return self._stopped.is_set() or self._client.is_closed or os.getpid() != self._pid

    # ------------------------------------------------------------------ life cycle

    def start(self, timeout: TimeoutArg = USE_DEFAULT) -> Service:
        """Subscribe to the discovery subjects and confirm with the server (a flush).

        Safe to call again. Endpoints can be added before or after.

        Args:
            timeout: seconds for the server to confirm (default 5; ``None``: no limit).

        Raises:
            TimeoutError: the server did not confirm in time (the service runs anyway).
            RuntimeError: the service was stopped.
            ConnectionClosedError: the client is closed.
        """
        deadline = Deadline.of(timeout, DEFAULT_START_TIMEOUT)
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"service {self.name} is stopped")
            if self._verb_subs:
                return self
            # A service stops with its client's connection, as in the other implementations.
            self._close_hook = self._core.on_close(self._client_closed)
            handlers = {ServiceVerb.PING: self._on_ping, ServiceVerb.INFO: self._on_info,
                        ServiceVerb.STATS: self._on_stats}
            subs = []
            try:
                for verb, handler in handlers.items():
                    for name, sid in ((None, None), (self.name, None), (self.name, self._id)):
                        subs.append(self._client.subscribe(control_subject(verb, name, sid), cb=handler))
            except BaseException:
                for sub in subs:
                    _unsubscribe_quietly(sub)
                self._close_hook.cancel()
                self._close_hook = None
                raise
            self._verb_subs = subs
            self._started = datetime.now(timezone.utc)
        self._core.flush(deadline.remaining(), vouch=False)  # the SUBs took effect
        return self

    def stop(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Drain the endpoints (their queued requests are handled), wait for the
        requests in progress, drain the discovery subjects. Safe to call again.

        Called from one of this service's own handlers, it cannot wait for that
        handler: it then stops on a thread of its own and returns at once;
        :attr:`stopped` is set when that is done.

        Args:
            timeout: seconds for all of it (default 30; ``None``: no limit).

        Raises:
            TimeoutError: not finished in time (the service is stopped anyway).
        """
        deadline = Deadline.of(timeout, DEFAULT_STOP_TIMEOUT)
        if getattr(_current, "service", None) is self:
            thread = threading.Thread(target=self._stop_quietly, args=(deadline,),
                                      name=f"natsjs-svcstop-{self._client.name or 'client'}", daemon=True)
            thread.start()
            return
        self._stop(deadline)

    def _stop_quietly(self, deadline: Deadline) -> None:
        try:
            self._stop(deadline)
        except NatsError as exc:
            self._core.logs.to(log).warning("stopping service %s: %s", self.name, exc)

    def _stop(self, deadline: Deadline) -> None:
        with self._lock:
            if self._stopping:
                already = True
            else:
                already = False
                self._stopping = True
                endpoint_subs = [e._subscription for e in self._endpoints if e._subscription is not None]
                verb_subs = list(self._verb_subs)
        if already:
            # Another thread is stopping it: wait for that within this deadline.
            if not self._stopped.wait(deadline.remaining()):
                raise TimeoutError(f"service {self.name} did not stop in time")
            return
        if self._close_hook is not None:
            self._close_hook.cancel()
        late: list[str] = []
        try:
            for sub in endpoint_subs:  # with a pool, this waits for its requests too
                _drain_quietly(sub, deadline, late)
            if self._pool is not None:
                self._pool.shutdown(deadline.remaining())
            for sub in verb_subs:
                _drain_quietly(sub, deadline, late)
        finally:
            self._stopped.set()
        if late:
            raise TimeoutError(f"service {self.name} stopped before it finished: {'; '.join(late)}")

    def _client_closed(self) -> None:
        """Close hook (quick, never blocks): the subscriptions are gone with the connection."""
        with self._lock:
            self._stopping = True
        if self._pool is not None:
            self._pool.shutdown(0)  # its threads end once the requests they hold are done
        self._stopped.set()

    def _abort(self) -> None:
        """Unsubscribe everything at once, without draining (a start that failed half-way)."""
        with self._lock:
            self._stopping = True
            subs = [e._subscription for e in self._endpoints if e._subscription is not None] + self._verb_subs
        if self._close_hook is not None:
            self._close_hook.cancel()
        for sub in subs:
            _unsubscribe_quietly(sub)
        if self._pool is not None:
            self._pool.shutdown(0)
        self._stopped.set()

    def reset(self) -> None:
        """Zero every endpoint's counters and restart the ``started`` clock."""
        with self._lock:
            for endpoint in self._endpoints:
                endpoint._reset()
            self._started = datetime.now(timezone.utc)

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.is_stopped else "running"
        return f"<Service {self.name} {self.version} id={self._id} {state} endpoints={len(self._endpoints)}>"

    # ------------------------------------------------------------------ discovery documents

    def ping(self) -> ServicePing:
        """The PING reply of this instance."""
        return ServicePing(type=PING_RESPONSE_TYPE, name=self.name, id=self._id, version=self.version,
                           metadata=self.metadata)

    def info(self) -> ServiceInfo:
        """The INFO reply of this instance."""
        return ServiceInfo(type=INFO_RESPONSE_TYPE, name=self.name, id=self._id, version=self.version,
                           metadata=self.metadata, description=self.description,
                           endpoints=[e.info() for e in self.endpoints])

    def stats(self) -> ServiceStats:
        """The STATS reply of this instance; the stats handler fills in each endpoint's ``data``."""
        endpoints = [e.stats() for e in self.endpoints]
        handler = self._config.stats_handler
        if handler is not None:
            endpoints = [msgspec.structs.replace(st, data=self._stats_data(handler, st)) for st in endpoints]
        return ServiceStats(type=STATS_RESPONSE_TYPE, name=self.name, id=self._id, version=self.version,
                            metadata=self.metadata, started=self._started, endpoints=endpoints)

    def _stats_data(self, handler: StatsHandler, stats: EndpointStats) -> Any:
        try:
            data = handler(stats)
            _json.encode(data)  # fail here, not while encoding the whole reply
            return data
        except Exception:
            self._core.logs.to(log).exception("stats handler of service %s failed for endpoint %s", self.name,
                                              stats.name)
            return None

    # ------------------------------------------------------------------ endpoints

    def _add_endpoint(self, config: EndpointConfig, prefix: str, parent_queue: str,
                      parent_disabled: bool) -> Endpoint:
        subject = _join(prefix, config.subject or config.name)
        queue, _ = _resolve_queue(config.queue_group, parent_queue, config.queue_group_disabled, parent_disabled)
        validate_subscribe_subject(subject, queue or None)
        handler, metadata = config.handler, config.metadata
        if config.request_type is not None or config.response_type is not None or config.codec is not None:
            from ..codecs import JSON
            from .typed import schema_metadata, typed_handler

            codec = config.codec or JSON
            handler = typed_handler(handler, config.request_type, config.response_type, codec)
            metadata = schema_metadata(metadata, config.request_type, config.response_type, codec)
        endpoint = Endpoint(self, config.name, subject, queue, handler, metadata)
        if self._pool is None:
            cb: Callable[[Msg], None] = partial(self._handle, endpoint)
        else:
            cb = partial(self._hand_off, endpoint)
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"service {self.name} is stopped")
            sub = self._core.subscribe(
                subject, queue or None, cb, pending_msgs_limit=config.pending_msgs_limit,
                pending_bytes_limit=config.pending_bytes_limit, cls=_EndpointSubscription,
            )
            assert isinstance(sub, _EndpointSubscription)
            sub.endpoint = endpoint
            endpoint._subscription = sub
            self._endpoints.append(endpoint)
        return endpoint

    def _hand_off(self, endpoint: Endpoint, msg: Msg) -> None:
        """Endpoint callback with a pool: wait for a free slot, then let a pool thread handle it."""
        assert self._pool is not None
        with self._lock:
            endpoint._in_flight += 1
        try:
            self._pool.submit(partial(self._handle_pooled, endpoint, msg))
        except RuntimeError:  # the pool was shut down (the service stopped, the client closed)
            self._pooled_done(endpoint)
            _send_error(Request(msg), "503", f"service {self.name} is stopping")

    def _handle_pooled(self, endpoint: Endpoint, msg: Msg) -> None:
        try:
            self._handle(endpoint, msg)
        finally:
            self._pooled_done(endpoint)

    def _pooled_done(self, endpoint: Endpoint) -> None:
        with self._lock:
            endpoint._in_flight -= 1
            if endpoint._in_flight <= 1:
                endpoint._idle.notify_all()

    def _handle(self, endpoint: Endpoint, msg: Msg) -> None:
        """Run the handler for one request, answer errors, count."""
        previous = getattr(_current, "service", None), getattr(_current, "endpoint", None)
        _current.service, _current.endpoint = self, endpoint
        tally = _Tally(self, endpoint)
        request = Request(msg, tally.replied)
        raised: Exception | None = None
        try:
            endpoint.handler(request)
        except Exception as exc:
            raised = exc
        finally:
            _current.service, _current.endpoint = previous
        if isinstance(raised, ServiceError):
            tally.finish(repr(raised))
            if not request._responded:
                _send_error(request, raised.code, raised.description, raised.data)
        elif raised is not None:
            tally.finish(repr(raised))
            self._core.logs.to(log).error("handler of endpoint %s (%s) raised", endpoint.name, endpoint.subject,
                                          exc_info=raised)
            if not request._responded:
                # The caller learns only the exception's type: its text may hold anything
                # (the request's payload, internals) and be of any size, and an error
                # reply past max_payload could not be sent at all. The whole of it is
                # in the log and, shortened, in the endpoint's last_error.
                _send_error(request, "500", type(raised).__name__[:_MAX_ERROR_TYPE])
        else:
            tally.finish(repr(request._error) if request._error is not None else "")

    # ------------------------------------------------------------------ discovery handlers

    def _on_ping(self, msg: Msg) -> None:
        self._answer(msg, lambda: self._ping)

    def _on_info(self, msg: Msg) -> None:
        self._answer(msg, lambda: _json.encode(self.info().to_dict()))

    def _on_stats(self, msg: Msg) -> None:
        self._answer(msg, lambda: _json.encode(self.stats().to_dict()))

    def _answer(self, msg: Msg, body: Callable[[], bytes]) -> None:
        if not msg.reply:
            return
        previous = getattr(_current, "service", None)
        _current.service = self  # the stats handler runs here
        try:
            msg.respond(body())
        except Exception as exc:
            self._core.logs.to(log).warning("service %s could not answer %s: %r", self.name, msg.subject, exc)
        finally:
            _current.service = previous


#: The most characters of an exception's class name sent in a 500 error reply.
_MAX_ERROR_TYPE = 128
#: The most characters an endpoint's ``last_error`` keeps: STATS replies carry it,
#: and one past the server's max_payload could not be sent.
_MAX_LAST_ERROR = 4096


def _short_error(error: str) -> str:
    if len(error) <= _MAX_LAST_ERROR:
        return error
    return error[:_MAX_LAST_ERROR - 3] + "..."


class _Tally:
    """Counts one request exactly once: just before its first reply is sent (so the
    caller that has the reply sees it counted), else when the handler returns.

    A handler may hand its request to another thread that answers after the
    handler returned: that reply is not counted again (it counted the request
    and its processing time twice); an error reply counts the error alone.
    Thread-safe: every step runs under the service's lock.
    """

    __slots__ = ("_counted", "_endpoint", "_error_counted", "_service", "_start")

    def __init__(self, service: Service, endpoint: Endpoint):
        self._service = service
        self._endpoint = endpoint
        self._counted = False
        self._error_counted = False
        self._start = time.perf_counter_ns()

    def replied(self, error: ServiceError | None) -> None:
        """A reply is about to be sent (``error``: it is an error reply)."""
        self._count(repr(error) if error is not None else "")

    def finish(self, error: str) -> None:
        """The handler is done; ``error`` is what went wrong in it, if anything."""
        self._count(error)

    def _count(self, error: str) -> None:
        """Count the request the first time, and one error at most."""
        elapsed = time.perf_counter_ns() - self._start
        endpoint = self._endpoint
        with self._service._lock:
            if not self._counted:
                self._counted = True
                endpoint._num_requests += 1
                endpoint._processing_time += elapsed
            if error and not self._error_counted:
                self._error_counted = True
                endpoint._num_errors += 1
                endpoint._last_error = _short_error(error)


def _send_error(request: Request, code: str, description: str, data: bytes = b"") -> None:
    """Answer with an error, if there is someone to answer; never raises."""
    if not request.reply:
        return
    # Header values are one line: a multi-line message would make the reply unsendable.
    text = " ".join(description.split()) or "error"
    try:
        request.msg.respond(data, headers={ERROR_HEADER: text, ERROR_CODE_HEADER: str(code)})
    except Exception as exc:
        of_msg(request.msg, log).warning("could not send the error reply to %s: %r", request.subject, exc)


def _unsubscribe_quietly(sub: Subscription) -> None:
    try:
        sub.unsubscribe()
    except NatsError:
        pass


def _drain_quietly(sub: Subscription, deadline: Deadline, late: list[str]) -> None:
    """Drain one subscription; a closed client or an ended subscription is fine, a timeout is noted."""
    try:
        sub.drain(timeout=deadline.remaining())
    except (ConnectionClosedError, BadSubscriptionError):
        pass
    except TimeoutError:
        late.append(f"{sub.subject!r} not drained")


def add_service(client: Client, config: ServiceConfig | None = None, *, timeout: TimeoutArg = USE_DEFAULT,
                **kwargs: Any) -> Service:
    """Create and start a service (nats-py's ``add_service`` without the ``await``).

    Args:
        client: the connected client.
        config: a :class:`ServiceConfig`, or its fields as keywords (keywords
            given with a config replace its fields).
        timeout: seconds for the server to confirm the discovery subscriptions (default 5).

    Returns:
        The started :class:`Service`; add endpoints with :meth:`Service.add_endpoint`.

    Raises:
        ValueError, TypeError: an invalid configuration (nothing is sent).
        TimeoutError: the server did not confirm in time.
        ConnectionClosedError: the client is closed.
    """
    service = Service(client, config, **kwargs)
    return service.start(timeout=timeout)


__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "INFO_RESPONSE_TYPE",
    "NAME_REGEX",
    "PING_RESPONSE_TYPE",
    "SEMVER_REGEX",
    "STATS_RESPONSE_TYPE",
    "SUBJECT_REGEX",
    "Endpoint",
    "EndpointConfig",
    "EndpointInfo",
    "EndpointManager",
    "EndpointStats",
    "Group",
    "GroupConfig",
    "GroupManager",
    "Request",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "ServiceIdentity",
    "ServiceInfo",
    "ServicePing",
    "ServiceStats",
    "ServiceVerb",
    "StatsHandler",
    "add_service",
    "control_subject",
]
