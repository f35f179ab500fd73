"""A Celery result backend on a JetStream key-value bucket: ``natsjs://host:port[/bucket]``.

Results, group results and chord counters are keys of one bucket (default
``celery-results``, stream ``KV_celery-results``) whose TTL is Celery's ``result_expires``:
the server removes a result that long after it was written. Chord counters are incremented
with compare-and-set updates, so chords work across workers. Keys are Celery's
(``celery-task-meta-<task id>``): task ids must be valid key characters (UUIDs are).

Thread-safe; a forked child opens a connection of its own on first use.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from celery.backends.base import KeyValueStoreBackend
from celery.exceptions import ImproperlyConfigured

import natsjs_sync
from natsjs_sync.errors import APIError, KeyExistsError, KeyNotFoundError, KeyWrongLastSequenceError, NatsError

log = logging.getLogger(__name__)

#: The bucket used when the URL names none.
DEFAULT_BUCKET = "celery-results"
#: Compare-and-set attempts of one chord counter increment before giving up.
INCR_ATTEMPTS = 100


class KeyValueBackend(KeyValueStoreBackend):
    """Celery result backend storing each result under its key in a KV bucket."""

    supports_autoexpire = True
    implements_incr = True
    supports_native_join = False

    def __init__(self, url: str | None = None, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.url = url or "natsjs://127.0.0.1:4222"
        parts = urlsplit(self.url)
        if parts.scheme != "natsjs":
            raise ImproperlyConfigured(f"not a natsjs:// result backend URL: {self.url!r}")
        self.bucket = parts.path.strip("/") or DEFAULT_BUCKET
        netloc = parts.netloc or "127.0.0.1:4222"
        self.server_url = f"nats://{netloc}" if ":" in netloc.rsplit("@", 1)[-1] else f"nats://{netloc}:4222"
        expires = self.prepare_expires(kwargs.get("expires"), type=float)
        self.ttl: float | None = expires if expires else None
        options = self.app.conf.get("natsjs_backend_connect_options") or {}
        self.connect_options: dict[str, Any] = {"name": "celery-results", "max_reconnect_attempts": -1,
                                                **options}
        self._lock = threading.Lock()
        self._pid = -1
        self._nc: Any = None
        self._kv: Any = None

    def __reduce__(self, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        return super().__reduce__(args, {**(kwargs or {}), "url": self.url})

    @property
    def kv(self) -> Any:
        """The bucket, opened (and made, with the TTL) on first use in this process."""
        with self._lock:
            if self._kv is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._nc = natsjs_sync.connect(self.server_url, **self.connect_options)
                js = self._nc.jetstream()
                try:
                    self._kv = js.create_key_value(bucket=self.bucket, ttl=self.ttl, history=1)
                except APIError:
                    # Made already (perhaps with other limits by an operator): use it as it is.
                    self._kv = js.key_value(self.bucket)
            return self._kv

    def get(self, key: Any) -> bytes | None:
        try:
            return bytes(self.kv.get(_text(key)).value)
        except KeyNotFoundError:
            return None

    def mget(self, keys: Any) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def set(self, key: Any, value: Any) -> None:
        self.kv.put(_text(key), value)

    def delete(self, key: Any) -> None:
        try:
            self.kv.delete(_text(key))
        except KeyNotFoundError:
            pass

    def incr(self, key: Any) -> int:
        """Add one to the counter at ``key`` (compare-and-set, so concurrent workers count right)."""
        key = _text(key)
        kv = self.kv
        for _ in range(INCR_ATTEMPTS):
            try:
                entry = kv.get(key)
            except KeyNotFoundError:
                try:
                    kv.create(key, b"1")
                    return 1
                except KeyExistsError:
                    continue  # another worker made it first: count on top of theirs
            value = int(bytes(entry.value) or b"0") + 1
            try:
                kv.update(key, str(value).encode(), last=entry.revision)
                return value
            except KeyWrongLastSequenceError:
                continue
        raise NatsError(f"chord counter {key!r}: {INCR_ATTEMPTS} concurrent updates in a row")

    def expire(self, key: Any, value: Any) -> None:
        """Nothing to do: every key expires with the bucket's TTL."""

    def as_uri(self, include_password: bool = False) -> str:
        return self.url

    def close(self) -> None:
        with self._lock:
            nc, self._nc, self._kv = self._nc, None, None
        if nc is not None and self._pid == os.getpid():
            try:
                nc.close()
            except NatsError as exc:
                log.debug("natsjs result backend: close: %s", exc)


def _text(key: Any) -> str:
    return key.decode() if isinstance(key, (bytes, bytearray)) else str(key)

