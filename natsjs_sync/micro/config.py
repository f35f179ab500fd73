"""The configuration of a service, its groups and its endpoints, checked as it is made: nats-py's
``ServiceConfig``, ``GroupConfig`` and ``EndpointConfig``, with nats-py's texts for the refusals nats-py
makes itself."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..client import check_callback
from ..codecs import Codec
from ..errors import BadSubjectError, InvalidCallbackTypeError
from ..protocol.subjects import validate_queue, validate_subscribe_subject
from .models import EndpointStats
from .request import Handler

SEMVER_REGEX = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
"""The official semver.org expression; a service version must match it."""

NAME_REGEX = re.compile(r"^[A-Za-z0-9\-_]+$")
"""Service and endpoint names: letters, digits, ``-`` and ``_``."""

SUBJECT_REGEX = re.compile(r"^[^ >]*[>]?$")
"""The reference clients' loose subject check (subjects are checked more strictly here)."""

StatsHandler = Callable[[EndpointStats], Any]
"""Returns the ``data`` of one endpoint's stats (anything JSON can encode)."""


# nats-py's texts for the refusals it makes itself (a migrated program may compare
# str(err)); the stricter checks of this client that nats-py does not make keep their own.
_EMPTY_NAME = "Name cannot be empty."
_BAD_ENDPOINT_NAME = "Invalid name. Name must contain only alphanumeric characters, underscores, and hyphens."
_BAD_SERVICE_NAME = "Invalid name. It must contain only alphanumeric characters, dashes, and underscores."
_EMPTY_VERSION = "Version cannot be empty."
_BAD_VERSION = "Invalid version. It must follow semantic versioning (e.g., 1.0.0, 2.1.3-alpha.1)."
_BAD_ENDPOINT_SUBJECT = "Invalid subject. Subject must not contain spaces, and can only have '>' at the end."
_BAD_ENDPOINT_QUEUE = "Invalid queue group. Queue group must not contain spaces."
_BAD_SERVICE_QUEUE = "Invalid queue group. It must contain only alphanumeric characters, dashes, and underscores."


def _check_config_name(what: str, name: object, bad_text: str) -> None:
    """A service's or endpoint's name, refused with nats-py's texts where nats-py refuses it."""
    if not name:
        raise ValueError(_EMPTY_NAME)
    if isinstance(name, str) and not NAME_REGEX.match(name):
        raise ValueError(bad_text)
    _check_name(what, name)


def _check_loose_subject(value: object, bad_text: str) -> None:
    """nats-py's one subject check (no blanks, ``>`` only last), with its text."""
    if isinstance(value, str) and value and not SUBJECT_REGEX.match(value):
        raise BadSubjectError(bad_text)


def _check_name(what: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty str, got {name!r}")
    if not NAME_REGEX.match(name):
        raise ValueError(f"invalid {what} name {name!r}: use only letters, digits, '-' and '_'")
    return name


def _check_metadata(what: str, metadata: object) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise TypeError(f"{what} metadata must be a dict of str to str, got {metadata!r}")
    return dict(metadata)  # a copy: metadata is immutable once set (ADR-32)


def _check_queue(queue_group: object, disabled: object) -> None:
    if not isinstance(disabled, bool):
        raise TypeError(f"queue_group_disabled must be a bool, got {disabled!r}")
    if queue_group is None or queue_group == "":
        return  # inherit
    if not isinstance(queue_group, str):
        raise TypeError(f"queue_group must be a str, got {type(queue_group).__name__}")
    validate_queue(queue_group)
    if disabled:
        raise ValueError(f"queue_group={queue_group!r} and queue_group_disabled=True contradict each other")


def _check_handler(handler: object, what: str = "handler") -> None:
    """The client's one callback check (an ``async def``, also as ``__call__``, is refused); None is no handler."""
    if handler is None:
        raise InvalidCallbackTypeError(f"{what} must be callable, not None")
    check_callback(handler, what)


@dataclass
class EndpointConfig:
    """The configuration of an endpoint (nats-py's names; ``add_endpoint`` takes the same as keywords).

    Args:
        name: the endpoint's name (letters, digits, ``-``, ``_``); several endpoints may share one.
        handler: ``handler(request)``, a plain function.
        queue_group: its queue group; by default the group's or service's, else ``"q"``.
        subject: the subject it listens on (wildcards allowed); by default its name.
            In a group, the group's prefix goes in front.
        metadata: free-form ``str -> str`` data shown in INFO.
        queue_group_disabled: subscribe without a queue group: every instance of the
            service gets every request.
        pending_msgs_limit, pending_bytes_limit: the subscription's slow-consumer
            limits (default: the client's).
        request_type: make it a typed endpoint: ``handler(value)`` gets the
            request decoded to this type and returns the response value (see
            :doc:`codecs`); its JSON Schema is shown in INFO's metadata.
        response_type: the type of what a typed handler returns (for the schema in INFO).
        codec: how a typed endpoint reads requests without a ``content-type``
            header and writes responses (default :data:`~natsjs_sync.codecs.JSON`).

    Raises:
        ValueError, TypeError, BadSubjectError: an invalid field.
    """

    name: str
    handler: Handler
    queue_group: str | None = None
    subject: str | None = None
    metadata: dict[str, str] | None = None
    queue_group_disabled: bool = False
    pending_msgs_limit: int | None = None
    pending_bytes_limit: int | None = None
    request_type: Any = None
    response_type: Any = None
    codec: Codec | None = None

    def __post_init__(self) -> None:
        _check_config_name("endpoint", self.name, _BAD_ENDPOINT_NAME)
        _check_handler(self.handler)
        if self.subject is not None and self.subject != "":
            _check_loose_subject(self.subject, _BAD_ENDPOINT_SUBJECT)
            validate_subscribe_subject(self.subject)
        _check_loose_subject(self.queue_group, _BAD_ENDPOINT_QUEUE)
        _check_queue(self.queue_group, self.queue_group_disabled)
        self.metadata = _check_metadata("endpoint", self.metadata)
        for limit in (self.pending_msgs_limit, self.pending_bytes_limit):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                raise TypeError(f"pending limits must be ints, got {limit!r}")


@dataclass
class GroupConfig:
    """The configuration of a group of endpoints: a subject prefix and a default queue group.

    Args:
        name: the subject prefix (``""`` adds none); may hold dots, not ``>``.
        queue_group: the default queue group of its endpoints.
        queue_group_disabled: its endpoints subscribe without a queue group.

    Raises:
        ValueError, TypeError, BadSubjectError: an invalid field.
    """

    name: str
    queue_group: str | None = None
    queue_group_disabled: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"group name must be a str, got {type(self.name).__name__}")
        if self.name:
            validate_subscribe_subject(self.name)
            if self.name.split(".")[-1] == ">":
                raise BadSubjectError(f"group name {self.name!r} cannot contain '>': it is a subject prefix")
        _check_queue(self.queue_group, self.queue_group_disabled)


@dataclass
class ServiceConfig:
    """The configuration of a service (nats-py's names; ``add_service`` takes the same as keywords).

    Args:
        name: the kind of service, shared by all its instances (letters, digits, ``-``, ``_``).
        version: a semantic version (``1.0.0``, ``2.1.3-alpha.1``).
        description: shown in INFO.
        metadata: free-form ``str -> str`` data shown in PING, INFO and STATS.
        queue_group: the default queue group of its endpoints (default ``"q"``).
        stats_handler: ``stats_handler(endpoint_stats)`` returns the ``data`` of
            each endpoint's stats.
        queue_group_disabled: its endpoints subscribe without a queue group.
        max_concurrency: handle up to this many requests at once on a pool of
            threads owned by the service; ``None`` (the default) handles each
            endpoint's requests one at a time, in order, on the client's dispatcher.

    Raises:
        ValueError, TypeError, BadSubjectError: an invalid field.
    """

    name: str
    version: str
    description: str | None = None
    metadata: dict[str, str] | None = None
    queue_group: str | None = None
    stats_handler: StatsHandler | None = None
    queue_group_disabled: bool = False
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        _check_config_name("service", self.name, _BAD_SERVICE_NAME)
        if not self.version:
            raise ValueError(_EMPTY_VERSION)
        if not isinstance(self.version, str):
            raise ValueError(f"invalid version {self.version!r}: it must be a semantic version, e.g. 1.0.0")
        if not SEMVER_REGEX.match(self.version):
            raise ValueError(_BAD_VERSION)
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(f"description must be a str, got {type(self.description).__name__}")
        self.metadata = _check_metadata("service", self.metadata)
        _check_loose_subject(self.queue_group, _BAD_SERVICE_QUEUE)
        _check_queue(self.queue_group, self.queue_group_disabled)
        if self.stats_handler is not None:
            _check_handler(self.stats_handler, "stats_handler")
        mc = self.max_concurrency
        if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 1):
            raise ValueError(f"max_concurrency must be an int >= 1 or None, got {mc!r}")
