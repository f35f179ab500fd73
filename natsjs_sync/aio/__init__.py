"""nats-py's ``nats.aio`` package paths: ``natsjs_sync.aio.client`` (``Client``, also
known as ``NATS``), ``.msg``, ``.subscription`` and ``.errors``."""
