"""Celery and Kombu on JetStream: a Kombu transport and a Celery result backend.

Importing this package registers the ``natsjs://`` URL scheme with Kombu, so a Celery app
module that imports it once can say::

    import natsjs_sync.contrib.celery  # registers natsjs:// with Kombu

    app = Celery("proj", broker="natsjs://127.0.0.1:4222", backend="natsjs://127.0.0.1:4222")

Kombu 5 has no entry-point group for transports, so the import is the registration (no
``.pth`` file does it behind your back). The result backend is also registered through
Celery's ``celery.result_backends`` entry point, so ``backend="natsjs://..."`` works in a
process that did not import this package; the import registers it too, for installs
whose entry points are not current.

See :doc:`/celery` for the stream layout, the options and the guarantees.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

#: The Kombu URL scheme (and Celery result backend scheme) this package registers.
SCHEME = "natsjs"

TRANSPORT_ALIASES.setdefault(SCHEME, "natsjs_sync.contrib.celery.transport:Transport")

try:  # Celery is optional: Kombu alone can use the transport.
    from celery.app.backends import BACKEND_ALIASES
except ImportError:  # pragma: no cover - Kombu without Celery
    pass
else:
    BACKEND_ALIASES.setdefault(SCHEME, "natsjs_sync.contrib.celery.backend:KeyValueBackend")

__all__ = ["SCHEME"]
