"""Integrations with web frameworks: :mod:`natsjs_sync.contrib.flask` and :mod:`natsjs_sync.contrib.django`;
``natsjs_sync.contrib.celery`` makes JetStream Celery's broker and result backend (see the Celery page).

Each imports its framework itself; importing :mod:`natsjs_sync` (or this
package) imports neither. What they share, the process's client holder and the
settings they read, is in :mod:`natsjs_sync.contrib.process`.
"""
