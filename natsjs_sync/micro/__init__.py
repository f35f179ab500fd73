"""Services: request/reply endpoints that other programs discover and monitor (ADR-32).

The names are nats-py's ``nats.micro`` without the ``await``\\ s::

    from natsjs_sync.micro import add_service

    svc = add_service(nc, name="echo", version="1.0.0")
    svc.add_endpoint(name="echo", handler=lambda req: req.respond(req.data))

plus :class:`ServiceDefinition` (the decorator form, for Flask and Django
modules), :class:`ServiceClient` (discovery and calls) and ``max_concurrency``
(a pool owned by the service). See docs/services.rst.
"""

from ..errors import ServiceError
from .client import ServiceClient, service_error
from .definition import GroupDefinition, ServiceDefinition
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
from .service import (
    Endpoint,
    EndpointConfig,
    Group,
    GroupConfig,
    Service,
    ServiceConfig,
    StatsHandler,
    add_service,
    control_subject,
)

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "Endpoint",
    "EndpointConfig",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "GroupConfig",
    "GroupDefinition",
    "Handler",
    "Request",
    "Service",
    "ServiceClient",
    "ServiceConfig",
    "ServiceDefinition",
    "ServiceError",
    "ServiceInfo",
    "ServicePing",
    "ServiceStats",
    "ServiceVerb",
    "StatsHandler",
    "add_service",
    "control_subject",
    "service_error",
]
