"""nats-py's error classes and their bases."""

import asyncio
import os

import nats
import nats.errors
import nats.js.errors
from nats.errors import BadSubjectError, ConnectionClosedError, Error, NoRespondersError, TimeoutError
from nats.js.errors import APIError, NotFoundError

URL = os.environ["NATS_URL"]


async def main():
    assert issubclass(nats.errors.TimeoutError, nats.errors.Error)
    assert issubclass(nats.errors.TimeoutError, asyncio.TimeoutError)
    assert issubclass(nats.errors.FlushTimeoutError, nats.errors.TimeoutError)
    assert issubclass(nats.errors.DrainTimeoutError, nats.errors.TimeoutError)
    assert issubclass(nats.errors.UnexpectedEOF, nats.errors.StaleConnectionError)
    assert issubclass(nats.js.errors.Error, nats.errors.Error)
    assert issubclass(nats.js.errors.APIError, nats.js.errors.Error)
    assert issubclass(nats.js.errors.NotFoundError, nats.js.errors.APIError)
    assert issubclass(nats.js.errors.BadRequestError, nats.js.errors.APIError)
    assert issubclass(nats.js.errors.ServiceUnavailableError, nats.js.errors.APIError)
    assert issubclass(nats.js.errors.KeyNotFoundError, nats.js.errors.NotFoundError)
    assert issubclass(nats.js.errors.KeyDeletedError, nats.js.errors.KeyValueError)
    assert issubclass(nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError)
    assert issubclass(nats.js.errors.BucketNotFoundError, nats.js.errors.NotFoundError)
    assert issubclass(nats.js.errors.ObjectNotFoundError, nats.js.errors.NotFoundError)
    assert issubclass(nats.js.errors.FetchTimeoutError, nats.errors.TimeoutError)
    for name in ("NoServersError", "ConnectionDrainingError", "SlowConsumerError", "BadSubscriptionError",
                 "AuthorizationError", "MaxPayloadError", "BadTimeoutError", "ProtocolError",
                 "OutboundBufferLimitError", "NotJSMessageError", "MsgAlreadyAckdError",
                 "InvalidCallbackTypeError", "ConnectionReconnectingError", "SecureConnRequiredError"):
        assert issubclass(getattr(nats.errors, name), nats.errors.Error), name
    for name in ("NoKeysError", "BadBucketError", "NoStreamResponseError", "InvalidBucketNameError",
                 "InvalidKeyError", "DigestMismatchError", "ObjectDeletedError", "ServerError"):
        assert issubclass(getattr(nats.js.errors, name), nats.js.errors.Error), name

    nc = await nats.connect(URL)
    try:
        await nc.request("nobody.home", b"", timeout=1)
    except NoRespondersError as e:
        assert isinstance(e, Error)

    try:
        await nc.publish("bad subject", b"")
    except BadSubjectError:
        pass
    else:
        raise AssertionError("bad subject accepted")

    sub = await nc.subscribe("quiet")
    try:
        await sub.next_msg(timeout=0.05)
    except TimeoutError as e:
        assert isinstance(e, asyncio.TimeoutError)

    js = nc.jetstream()
    try:
        await js.stream_info("NOSUCHSTREAM")
    except NotFoundError as e:
        assert isinstance(e, APIError)
        assert e.code == 404
        assert e.err_code == 10059
        assert e.description
    else:
        raise AssertionError("expected NotFoundError")

    await nc.close()
    try:
        await nc.flush()
    except ConnectionClosedError:
        pass
    else:
        raise AssertionError("flush after close must fail")


if __name__ == "__main__":
    asyncio.run(main())
