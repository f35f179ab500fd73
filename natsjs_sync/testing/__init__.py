"""Test helpers: real nats-server processes for your tests and ours.

``NatsServer`` runs one server, ``NatsCluster`` a JetStream cluster, both on
127.0.0.1. The pytest plugin (registered as the ``natsjs_sync`` entry point)
provides the ``nats_server``, ``nats_url`` and ``nats_cluster`` fixtures.
"""

from .server import NatsCluster, NatsServer, docker_available, find_nats_server, free_port, render_config

__all__ = ["NatsCluster", "NatsServer", "docker_available", "find_nats_server", "free_port", "render_config"]
