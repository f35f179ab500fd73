"""Test helpers: real nats-server processes for your tests and ours.

``NatsServer`` runs one server, ``NatsCluster`` a JetStream cluster, both on
127.0.0.1. The pytest plugin (registered as the ``natsjs_sync`` entry point)
provides the ``nats_server``, ``nats_url`` and ``nats_cluster`` fixtures, and
the ``server`` marker: ``@pytest.mark.server("2.11")`` skips a test, saying why,
when the nats-server binary it runs is older.
"""

from .server import (
    NatsCluster,
    NatsServer,
    docker_available,
    find_nats_server,
    free_port,
    nats_server_version,
    render_config,
)

__all__ = ["NatsCluster", "NatsServer", "docker_available", "find_nats_server", "free_port", "nats_server_version",
           "render_config"]
