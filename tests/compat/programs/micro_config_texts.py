"""Service and endpoint configs refused with nats-py's texts; a service without a
description, tested the way that holds for both clients."""

import asyncio
import json
import os

import nats
from nats.micro import add_service
from nats.micro.service import EndpointConfig, ServiceConfig

URL = os.environ["NATS_URL"]


def refused(make, text):
    try:
        make()
    except ValueError as exc:
        assert str(exc) == text, str(exc)
    else:
        raise AssertionError(f"accepted, expected {text!r}")


def noop(request):
    pass


async def main():
    refused(lambda: ServiceConfig(name="", version="0.1.0"), "Name cannot be empty.")
    refused(lambda: ServiceConfig(name="test.service@!", version="0.1.0"),
            "Invalid name. It must contain only alphanumeric characters, dashes, and underscores.")
    refused(lambda: ServiceConfig(name="svc", version=""), "Version cannot be empty.")
    refused(lambda: ServiceConfig(name="svc", version="abc"),
            "Invalid version. It must follow semantic versioning (e.g., 1.0.0, 2.1.3-alpha.1).")
    refused(lambda: ServiceConfig(name="svc", version="0.1.0", queue_group="a b"),
            "Invalid queue group. It must contain only alphanumeric characters, dashes, and underscores.")
    refused(lambda: EndpointConfig(name="", handler=noop), "Name cannot be empty.")
    refused(lambda: EndpointConfig(name="a.b", handler=noop),
            "Invalid name. Name must contain only alphanumeric characters, underscores, and hyphens.")
    refused(lambda: EndpointConfig(name="ep", subject="endpoint subject", handler=noop),
            "Invalid subject. Subject must not contain spaces, and can only have '>' at the end.")
    refused(lambda: EndpointConfig(name="ep", subject="a.>.b", handler=noop),
            "Invalid subject. Subject must not contain spaces, and can only have '>' at the end.")
    refused(lambda: EndpointConfig(name="ep", queue_group="a b", handler=noop),
            "Invalid queue group. Queue group must not contain spaces.")

    nc = await nats.connect(URL)
    svc = await add_service(nc, ServiceConfig(name="plain", version="0.1.0"))
    assert not svc.info().description  # None in nats-py, "" here
    reply = await nc.request("$SRV.INFO.plain", b"", timeout=5)
    assert (json.loads(reply.data)["description"] or "") == ""
    await svc.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
