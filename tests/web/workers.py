"""Workers for the nats_worker tests (a project's ``shop/workers.py``)."""

from __future__ import annotations

import natsjs_sync as nats
from natsjs_sync import micro


def stock_service(nc: nats.Client) -> micro.Service:
    """A service answering ``stock.<sku>``."""

    def stock(req: micro.Request) -> None:
        req.respond(b"12")

    service = micro.add_service(nc, name="stock", version="1.0.0")
    service.add_endpoint("stock", stock, subject="stock.*")
    return service
