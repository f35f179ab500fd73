"""nats-py's ``nats.aio.errors``: the deprecated ``Err...`` names, as aliases of the one tree."""

from __future__ import annotations

from .. import errors as _e

NatsError = _e.NatsError
ErrConnectionClosed = _e.ConnectionClosedError
ErrDrainTimeout = _e.DrainTimeoutError
ErrInvalidUserCredentials = _e.InvalidUserCredentialsError
ErrInvalidCallbackType = _e.InvalidCallbackTypeError
ErrConnectionReconnecting = _e.ConnectionReconnectingError
ErrConnectionDraining = _e.ConnectionDrainingError
ErrMaxPayload = _e.MaxPayloadError
ErrStaleConnection = _e.StaleConnectionError
ErrJsonParse = _e.JsonParseError
ErrSecureConnRequired = _e.SecureConnRequiredError
ErrSecureConnWanted = _e.SecureConnWantedError
ErrSecureConnFailed = _e.SecureConnFailedError
ErrBadSubscription = _e.BadSubscriptionError
ErrBadSubject = _e.BadSubjectError
ErrSlowConsumer = _e.SlowConsumerError
ErrTimeout = _e.TimeoutError
ErrBadTimeout = _e.BadTimeoutError
ErrAuthorization = _e.AuthorizationError
ErrNoServers = _e.NoServersError

__all__ = [
    "ErrAuthorization",
    "ErrBadSubject",
    "ErrBadSubscription",
    "ErrBadTimeout",
    "ErrConnectionClosed",
    "ErrConnectionDraining",
    "ErrConnectionReconnecting",
    "ErrDrainTimeout",
    "ErrInvalidCallbackType",
    "ErrInvalidUserCredentials",
    "ErrJsonParse",
    "ErrMaxPayload",
    "ErrNoServers",
    "ErrSecureConnFailed",
    "ErrSecureConnRequired",
    "ErrSecureConnWanted",
    "ErrSlowConsumer",
    "ErrStaleConnection",
    "ErrTimeout",
    "NatsError",
]
