"""The decorator form: a service declared at import time, started on a client later.

Flask and Django modules declare routes at import time and get their
resources later (an app factory, ``AppConfig.ready()``, a worker that was just
forked). A :class:`ServiceDefinition` works the same way::

    orders = ServiceDefinition("orders", "1.2.0", description="Order lookups")

    @orders.endpoint(subject="orders.get")
    def get_order(req):
        req.respond_json(load(req.json()["id"]))

    # at startup, once per process:
    service = orders.start(nc)

Each :meth:`~ServiceDefinition.start` makes a new running :class:`Service`
instance (with its own id) from the same declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..client import Client
from .service import (
    DEFAULT_START_TIMEOUT,
    EndpointConfig,
    GroupConfig,
    Service,
    ServiceConfig,
    StatsHandler,
    _EndpointAdder,
)

F = TypeVar("F", bound=Callable[..., Any])

_Path = tuple[GroupConfig, ...]


class _Declarer:
    """The ``@endpoint`` decorator and ``group()``, recording instead of subscribing."""

    _definition: ServiceDefinition
    _path: _Path

    @overload
    def endpoint(self, name: F, /) -> F: ...

    @overload
    def endpoint(self, name: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def endpoint(self, name: str | F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Decorator: declare the function as an endpoint's handler (its name by default).

        ``@svc.endpoint``, ``@svc.endpoint("name")`` or
        ``@svc.endpoint(subject="orders.get", metadata={...})``; the options are
        those of :class:`EndpointConfig`, checked now. The function is returned unchanged.

        Raises:
            ValueError, TypeError, BadSubjectError: an invalid option.
        """
        if callable(name):
            fn = name
            self._definition._declare(self._path, EndpointConfig(name=fn.__name__, handler=fn))
            return fn

        def register(fn: F) -> F:
            config = EndpointConfig(name=name or fn.__name__, handler=fn, **options)
            self._definition._declare(self._path, config)
            return fn

        return register

    def group(self, name: str, *, queue_group: str | None = None,
              queue_group_disabled: bool = False) -> GroupDefinition:
        """Endpoints declared on the returned group get ``name.`` in front of their subjects.

        Raises:
            ValueError, TypeError, BadSubjectError: an invalid option.
        """
        config = GroupConfig(name=name, queue_group=queue_group, queue_group_disabled=queue_group_disabled)
        return GroupDefinition(self._definition, (*self._path, config))


class GroupDefinition(_Declarer):
    """A group declared on a :class:`ServiceDefinition` (from its :meth:`~ServiceDefinition.group`)."""

    def __init__(self, definition: ServiceDefinition, path: _Path):
        self._definition = definition
        self._path = path

    def __repr__(self) -> str:
        return f"<GroupDefinition {'.'.join(g.name for g in self._path if g.name)!r}>"


class ServiceDefinition(_Declarer):
    """A service declared without a client; :meth:`start` runs it on one.

    The arguments are those of :class:`ServiceConfig`, checked at once. Declaring
    is not thread-safe (do it at import time); :meth:`start` is.
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        description: str | None = None,
        metadata: dict[str, str] | None = None,
        queue_group: str | None = None,
        queue_group_disabled: bool = False,
        stats_handler: StatsHandler | None = None,
        max_concurrency: int | None = None,
    ):
        self.config = ServiceConfig(
            name=name, version=version, description=description, metadata=metadata, queue_group=queue_group,
            queue_group_disabled=queue_group_disabled, stats_handler=stats_handler, max_concurrency=max_concurrency,
        )
        self._definition = self
        self._path: _Path = ()
        self._declared: list[tuple[_Path, EndpointConfig]] = []

    @property
    def name(self) -> str:
        """The service's name, from its config."""
        return self.config.name

    @property
    def endpoints(self) -> list[EndpointConfig]:
        """The endpoints declared so far (their configurations, group prefixes not applied)."""
        return [config for _, config in self._declared]

    def _declare(self, path: _Path, config: EndpointConfig) -> None:
        self._declared.append((path, config))

    def start(self, client: Client, *, timeout: TimeoutArg = USE_DEFAULT) -> Service:
        """Start an instance of this service on ``client``: every declared endpoint,
        then the discovery subjects, confirmed by the server before this returns.

        Args:
            client: the connected client.
            timeout: seconds for the server to confirm (default 5).

        Returns:
            The running :class:`Service`.

        Raises:
            TimeoutError: the server did not confirm in time.
            ConnectionClosedError: the client is closed.
        """
        deadline = Deadline.of(timeout, DEFAULT_START_TIMEOUT)  # a bad timeout fails before any SUB
        service = Service(client, self.config)
        try:
            for path, config in self._declared:
                target: _EndpointAdder = service
                for group in path:
                    target = target.add_group(group)
                target.add_endpoint(config)
            return service.start(timeout=deadline.remaining())
        except BaseException:
            service._abort()  # nothing half-started stays subscribed
            raise

    def __repr__(self) -> str:
        return f"<ServiceDefinition {self.name} {self.config.version} endpoints={len(self._declared)}>"
