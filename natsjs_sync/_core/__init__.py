"""The I/O half of the core (private): transports, threads, the state machine's driver.

Nothing here is public API. The layers above (JetStream, the stores,
services) reach it only through :mod:`natsjs_sync._core.spi`.
"""
