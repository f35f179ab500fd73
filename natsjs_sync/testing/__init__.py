"""Test helpers: real nats-server processes for your tests and ours.

``NatsServer`` runs one server, ``NatsCluster`` a JetStream cluster, both on
127.0.0.1; ``FaultProxy`` sits between a client and a server and breaks the
network on demand. The pytest plugin (registered as the ``natsjs_sync`` entry
point) provides the ``nats_server``, ``nats_url``, ``nats_cluster`` and
``nats_fault_proxy`` fixtures, the ``spark_cluster`` (:class:`SparkStandaloneCluster`)
and ``spark_connect`` (:class:`SparkConnectServer`) fixtures, and the ``server`` marker:
``@pytest.mark.server("2.11")`` skips a test, saying why, when the nats-server
binary it runs is older.
"""

from .faultproxy import FaultProxy
from .server import (
    NatsCluster,
    NatsServer,
    docker_available,
    find_nats_server,
    free_port,
    nats_server_version,
    render_config,
)
from .spark import SparkConnectServer, SparkDriver, SparkStandaloneCluster, spark_skip_reason

__all__ = ["FaultProxy", "NatsCluster", "NatsServer", "SparkConnectServer", "SparkDriver", "SparkStandaloneCluster",
           "docker_available", "find_nats_server", "free_port", "nats_server_version", "render_config",
           "spark_skip_reason"]
