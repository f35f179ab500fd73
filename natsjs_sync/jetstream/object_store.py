"""Object store on JetStream (ADR-20).

A bucket ``B`` is the stream ``OBJ_B`` on ``$O.B.C.>`` (chunks) and
``$O.B.M.>`` (metadata). An object is a run of chunk messages on
``$O.B.C.<nuid>`` and one JSON ObjectInfo on ``$O.B.M.<base64url(name)>``
(rolled up, so only the newest stays). The info carries the size, chunk count
and ``SHA-256=<base64url>`` digest, the same format every NATS client writes.

Objects are streamed both ways: ``put`` reads its source a chunk at a time and
keeps a bounded number of chunk publishes in flight; ``get`` returns a
file-like result that pulls chunks by size as it is read and checks the digest
at the end. Neither holds a whole object in memory.

The stored JSON and its codec live in :mod:`.object_models`; their names are
importable from here too.
"""

from __future__ import annotations

import builtins
import datetime
import hashlib
import io
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

import msgspec

from .._core.logs import of_msg
from .._timeout import USE_DEFAULT, Deadline, TimeoutArg
from ..errors import (
    BucketNotFoundError,
    DigestMismatchError,
    InvalidObjectNameError,
    JetStreamError,
    MsgNotFoundError,
    NatsConnectionError,
    NatsError,
    NoRespondersError,
    NotSentError,
    ObjectAlreadyExists,
    ObjectBucketNotFoundError,
    ObjectDeletedError,
    ObjectNotFoundError,
    ObjectStoreError,
    StreamNotFoundError,
    TimeoutError,
    WrongLastSequenceError,
)
from ..protocol.nuid import next_nuid
from ._api import encode_json
from ._bucket import bucket_stream, open_bucket_stream
from .object_models import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    ObjectStoreStatus,
    _decode_digest,
    decode_info,
    digest_value,
    encode_info,
    encode_name,
)
from .publish import PubAck
from .publish_async import PublishPipeline
from .stream_config import Placement
from .watcher import Watcher

_T = TypeVar("_T")

if TYPE_CHECKING:
    from ..codecs import Codec, TypedObjectStore
    from ..msg import Msg
    from .context import JetStream
    from .messages import MessagesContext
    from .stream import Stream

_log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 128 * 1024
#: Chunk bytes in flight during a put, and requested ahead during a get.
WINDOW_BYTES = 8 * 1024 * 1024
#: The shortest wait worth one more attempt at a put's info (seconds).
_MIN_META_ATTEMPT = 0.1
#: Room in a read's pull window for a chunk's subject, reply subject and headers.
_CHUNK_OVERHEAD = 64 * 1024

Progress = Callable[[int, "int | None"], None]


def _chunk_size(chunk_size: int | None, meta: ObjectMeta) -> int:
    """The chunk size of a put: the argument, else the meta's, else the default."""
    if meta.options is not None and meta.options.link is not None:
        raise ObjectStoreError("put cannot store a link: use add_link")
    size = chunk_size or (meta.options.max_chunk_size if meta.options else None) or DEFAULT_CHUNK_SIZE
    if size < 1:
        raise ValueError("chunk_size must be >= 1")
    return size


def _meta_attempt(deadline: Deadline) -> Deadline | None:
    """The deadline of one attempt at a put's info: half of what is left, so that a
    lost or slow answer leaves time to ask again (all of it when little is left);
    None when too little is left for another attempt after an unconfirmed one."""
    left = deadline.remaining()
    if left is None or left > 2 * _MIN_META_ATTEMPT:
        return deadline if left is None else Deadline(left / 2)
    return deadline if left > _MIN_META_ATTEMPT else None


def _unconfirmed_error(info: ObjectInfo) -> TimeoutError:
    """The error of a put whose info was sent but never confirmed (its chunks are left behind)."""
    return TimeoutError(
        f"object {info.name!r}: its info was sent but not confirmed within the put's timeout; it may"
        f" still be stored (chunks under nuid {info.nuid} are kept until a later put of the name"
        f" is confirmed)")


def _chunk_nuids(info: ObjectInfo | None) -> set[str]:
    """The nuid of the chunks ``info`` points at, if any (not a deleted object, not a link)."""
    return {info.nuid} if info is not None and not info.deleted and not info.is_link else set()


def _check_name(name: object) -> str:
    """An object name: any non-empty str.

    Raises:
        InvalidObjectNameError: anything else (also a ValueError; nothing is sent).
    """
    if not isinstance(name, str) or not name:
        raise InvalidObjectNameError(f"object name must be a non-empty str, got {name!r}")
    return name


def _read_window(info: ObjectInfo) -> int:
    """The pull window (``max_bytes``) of a read: :data:`WINDOW_BYTES`, or one
    of the object's chunks with room for its subject and headers when chunks are larger.

    The server never delivers a message larger than a pull's ``max_bytes``: with a
    fixed 8 MiB window, an object written in larger chunks (allowed when the
    server's max_payload is larger) could never be read. The chunk size is the
    one the object was written with, or, when the writer did not record it, a
    bound from the size and the chunk count: every chunk but the last is full
    and the last holds at least a byte, so ``n`` chunks of ``c`` bytes hold more
    than ``(n - 1) * c`` bytes, and no chunk is larger than ``size / (n - 1)``
    (the whole size for one chunk). The average is no bound: two chunks of
    9 MiB and 1 byte average 4.5 MiB.
    """
    recorded = info.options.max_chunk_size if info.options is not None else None
    if info.chunks > 1:
        largest = -(-info.size // (info.chunks - 1))
    else:
        largest = info.size
    return max(WINDOW_BYTES, max(recorded or 0, largest) + _CHUNK_OVERHEAD)


class ObjectResult(io.RawIOBase):
    """An object being read: a binary file-like stream (``read``, ``readinto``,
    iteration over chunks with :meth:`chunks`, ``with``). The digest is checked
    when the last byte is read (DigestMismatchError)."""

    def __init__(self, store: ObjectStore, info: ObjectInfo, progress: Progress | None, timeout: float):
        super().__init__()
        self.info = info
        self._progress = progress
        self._timeout = timeout
        self._buf = memoryview(b"")
        self._sha = hashlib.sha256()
        self._read = 0
        self._chunks_seen = 0
        self._done = info.size == 0 and info.chunks == 0
        self._it: MessagesContext | None = None
        self._oc: Any = None
        if not self._done:
            subject = f"$O.{store.bucket}.C.{info.nuid}"
            self._oc = store._js.ordered_consumer(store.stream_name, filter_subjects=[subject])
            self._it = self._oc.messages(max_bytes=_read_window(info), expires=10.0)
        else:
            self._verify()

    def readable(self) -> bool:
        """Always True (a readable binary stream)."""
        return True

    def _next_chunk(self) -> bytes | None:
        if self._done:
            return None
        assert self._it is not None
        try:
            msg = self._it.next(timeout=self._timeout)
        except TimeoutError:
            raise TimeoutError(f"object {self.info.name!r}: no chunk within {self._timeout} s") from None
        data = msg.data
        self._sha.update(data)
        self._read += len(data)
        self._chunks_seen += 1
        if self._progress is not None:
            self._progress(self._read, self.info.size)
        if self._chunks_seen >= self.info.chunks or self._read >= self.info.size:
            self._finish()
        return data

    def _finish(self) -> None:
        self._done = True
        if self._it is not None:
            self._it.stop()
        self._verify()

    def _verify(self) -> None:
        if self._read != self.info.size:
            raise ObjectStoreError(f"object {self.info.name!r}: read {self._read} bytes, info says {self.info.size}")
        if self.info.digest:
            if self._sha.digest() != _decode_digest(self.info.digest):
                raise DigestMismatchError(f"object {self.info.name!r}: SHA-256 digest does not match its data")

    def readinto(self, b: Any) -> int:
        """Read into the buffer ``b``; returns the number of bytes read (0 at the end).

        Raises:
            DigestMismatchError: at the end, when the data does not match the stored digest.
        """
        view = memoryview(b).cast("B")
        while not self._buf:
            chunk = self._next_chunk()
            if chunk is None:
                return 0
            self._buf = memoryview(chunk)
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (all the rest when negative); fewer only at the end."""
        if size is None or size < 0:
            return b"".join(self.chunks())
        parts = []
        want = size
        while want > 0:
            if not self._buf:
                chunk = self._next_chunk()
                if chunk is None:
                    break
                self._buf = memoryview(chunk)
            piece = self._buf[:want]
            parts.append(bytes(piece))
            self._buf = self._buf[len(piece):]
            want -= len(piece)
        return b"".join(parts)

    def readall(self) -> bytes:
        """The rest of the object, checked against its digest."""
        return self.read(-1)

    @property
    def data(self) -> bytes:
        """The rest of the object in one bytes (nats-py's ``result.data``; loads it into memory)."""
        rest = self.read(-1)
        self._data = getattr(self, "_data", b"") + rest
        return self._data

    def chunks(self) -> Iterator[bytes]:
        """The object's data chunk by chunk (as stored), after anything already buffered."""
        if self._buf:
            rest = bytes(self._buf)
            self._buf = memoryview(b"")
            yield rest
        while True:
            chunk = self._next_chunk()
            if chunk is None:
                return
            yield chunk

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks()

    def close(self) -> None:
        """Stop reading: the ordered consumer behind the read is stopped."""
        if not self._done and self._it is not None:
            self._done = True
            self._it.stop()
        super().close()

    def __enter__(self) -> ObjectResult:
        return self


class _Leftovers:
    """Chunks that puts of a client could not purge yet, by object (one per client). Thread-safe.

    A put whose info went unconfirmed cannot tell whether it replaced the
    previous version: both versions' chunks are kept. The next put (or delete)
    of that object on the same client that is confirmed is newer than both, so
    it purges them (:meth:`ObjectStore.put`): a retry leaves nothing behind.
    Chunks nothing points at whose purge went unanswered (lost with the
    connection, withdrawn, timed out) are kept here too, for that next put or
    delete to purge again; a nuid leaves once the server answers its purge.
    """

    KEY = "natsjs_sync.jetstream.object_store.leftovers"
    #: The most nuids kept for one object. Each confirmed put of it asks for all of
    #: them to be purged; where purges are never answered (the client may not purge)
    #: the set would grow by one a put, and so would every put's requests.
    MAX_PER_OBJECT = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_object: dict[tuple[str, str, str], set[str]] = {}

    def add(self, key: tuple[str, str, str], nuids: set[str]) -> None:
        """Keep ``nuids`` for ``key``, up to :attr:`MAX_PER_OBJECT` (the rest stay logged only)."""
        with self._lock:
            kept = self._by_object.setdefault(key, set())
            for nuid in sorted(nuids):
                if len(kept) >= self.MAX_PER_OBJECT:
                    break
                kept.add(nuid)

    def of(self, key: tuple[str, str, str]) -> set[str]:
        """The nuids left behind for ``key`` (a copy)."""
        with self._lock:
            return set(self._by_object.get(key, ()))

    def settled(self, key: tuple[str, str, str], nuids: set[str]) -> None:
        """``nuids`` were purged; any added meanwhile stay."""
        if not nuids:
            return
        with self._lock:
            left = self._by_object.get(key, set()) - nuids
            if left:
                self._by_object[key] = left
            else:
                self._by_object.pop(key, None)

    def after_fork_in_child(self) -> None:
        """The parent cleans up what its puts left: a child starts with nothing."""
        self._lock = threading.Lock()
        self._by_object = {}


class ObjectStore:
    """An object store bucket. Thread-safe; get one from ``js.object_store(bucket)``."""

    def __init__(self, js: JetStream, bucket: str, stream: Stream):
        self._js = js
        self.bucket = bucket
        self._stream = stream
        self.stream_name = stream.name
        self._leftovers = js._core.attachment(_Leftovers.KEY, _Leftovers)

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{encode_name(name)}"

    # ------------------------------------------------------------------ info

    def get_info(self, name: str, show_deleted: bool = False, timeout: TimeoutArg = USE_DEFAULT) -> ObjectInfo:
        """The object's info.

        Args:
            name: the object's name.
            show_deleted: return the info of a deleted object (its deleted marker) too.
            timeout: seconds for the request.

        Returns:
            The newest info of the object.

        Raises:
            ObjectNotFoundError: there is no object of that name.
            ObjectDeletedError: the object was deleted (and not ``show_deleted``). It is an
                ObjectNotFoundError too, which is what nats-py and nats.go raise here.
            BucketNotFoundError: the bucket is gone (deleted). It is an ObjectNotFoundError
                too, as nats-py raises then.
        """
        try:
            info, _ = self._last_meta(_check_name(name), timeout)
        except ObjectBucketNotFoundError:
            raise
        except BucketNotFoundError as exc:
            raise ObjectBucketNotFoundError(exc.description, code=404) from None
        if info is None:
            raise ObjectNotFoundError(f"object {name!r} not found in bucket {self.bucket!r}")
        if info.deleted and not show_deleted:
            raise ObjectDeletedError(f"object {name!r} was deleted from bucket {self.bucket!r}")
        return info

    def _raise_if_gone(self, timeout: TimeoutArg) -> None:
        """Raises BucketNotFoundError (a NotFoundError) when the bucket's stream is gone."""
        try:
            self._stream.info(timeout=timeout)
        except StreamNotFoundError:
            raise BucketNotFoundError(f"object store {self.bucket!r} not found", code=404) from None

    def _last_meta(self, name: str, timeout: TimeoutArg) -> tuple[ObjectInfo | None, int]:
        """The newest info of ``name`` (deleted ones too) and its stream sequence; ``(None, 0)``
        when there is none (0 is what ``Nats-Expected-Last-Subject-Sequence`` says for "none")."""
        try:
            raw = self._stream.get_last_msg_for_subject(self._meta_subject(name), timeout=timeout)
        except MsgNotFoundError:
            return None, 0
        except StreamNotFoundError:
            # asked through the API (a bucket without direct gets): the stream is gone
            raise BucketNotFoundError(f"object store {self.bucket!r} not found", code=404) from None
        except NoRespondersError:
            # A direct get nobody answers: the bucket's stream may be gone (nats-py, which
            # asks the API, raises NotFoundError then). Ask the API which it is.
            self._raise_if_gone(timeout)
            raise
        info = decode_info(raw.data, f"object {name!r} in bucket {self.bucket!r}")
        if raw.time is not None:
            info = info.replace(mtime=raw.time)
        return info, raw.seq

    def _publish_meta(self, info: ObjectInfo, timeout: TimeoutArg, **options: Any) -> PubAck:
        # Every client reads this JSON: see encode_info for what it must hold.
        data = encode_info(info)
        return self._js.publish(self._meta_subject(info.name), data, headers={"Nats-Rollup": "sub"},
                                timeout=timeout, **options)

    def _purge_quietly(self, subject: str, deadline: Deadline, why: str) -> bool:
        """Purge ``subject`` within what is left of ``deadline``; a failure is logged, not raised.

        The purge request is sent even when no time is left (it is only not
        waited for), so the server still cleans up after a put that ran out of time.

        Returns:
            True when the server answered: it purged, or refused (asking again
            would be refused again); False when it may not have happened
            (unanswered, withdrawn, lost with the connection).
        """
        try:
            try:
                self._stream.purge(subject=subject, timeout=deadline)
            except NotSentError:
                # Withdrawn unsent at the deadline (the connection is away): the clean-up
                # must still reach the server, so it goes without waiting for the answer.
                api = self._js._api
                api.core.publish(api.subject(f"STREAM.PURGE.{self.stream_name}"), encode_json({"filter": subject}),
                                 api.core.new_inbox())
                raise
        except NatsError as exc:
            self._js._core.logs.to(_log).warning("object store %s: %s (%s) may be left behind: %s", self.bucket,
                                                 subject, why, exc)
            return isinstance(exc, JetStreamError)
        return True

    def _purge_chunks_of(self, name: str, nuid: str, deadline: Deadline, why: str) -> None:
        """Purge the chunks under ``nuid``, which nothing points at (any more); a failure
        is logged, and when the server did not answer the nuid is kept for the next
        put or delete of ``name`` that is confirmed to purge again (:class:`_Leftovers`):
        a purge lost with the connection or left unanswered left them in the bucket for ever."""
        key = self._object_key(name)
        if self._purge_quietly(f"$O.{self.bucket}.C.{nuid}", deadline, why):
            self._leftovers.settled(key, {nuid})
        else:
            self._leftovers.add(key, {nuid})

    # ------------------------------------------------------------------ put

    def put(self, name: str | ObjectMeta, data: Any, meta: ObjectMeta | None = None,
            chunk_size: int | None = None, progress: Progress | None = None,
            timeout: TimeoutArg = USE_DEFAULT) -> ObjectInfo:
        """Store an object from bytes, a str (UTF-8), a path (``os.PathLike``) or any
        binary file-like object (anything with ``read``), chunk by chunk.

        Replacing an object removes the old one's chunks once the new one is in.
        ``progress(bytes_sent, total_or_None)`` is called after each chunk.

        The chunks are written first, then the info that makes them the object.
        The new chunks are purged only when the put definitely failed; the info is
        published under the stream's check that the object is still the version
        read at the start (another put in between is read again and replaced, so
        each put purges the chunks of exactly the version it replaced), with a
        message id of its own, so a publish that timed out is sent again safely.

        Args:
            timeout: one budget for the whole put, clean-up included (default: the context's).

        Returns:
            The stored object's info.

        Raises:
            InvalidObjectNameError: an empty name (nothing is sent).
            TimeoutError: the put ran out of time. When the info was sent but not
                confirmed, the message says so: the object may still be stored,
                and its chunks are kept, with the previous version's; the next put
                or delete of the name on this client that is confirmed purges both.
            ObjectStoreError, JetStreamError: the server refused a chunk or the info
                (the new chunks are purged).
        """
        if isinstance(name, ObjectMeta):
            meta, name = name, name.name
        meta = meta or ObjectMeta()
        name = _check_name(name or meta.name)
        size = _chunk_size(chunk_size, meta)
        if isinstance(data, os.PathLike):
            with open(data, "rb") as f:
                return self.put(name, f, meta, size, progress, timeout)
        deadline = self._js._api.deadline(timeout)  # one budget for every chunk, the info and clean-up
        source, total = _reader(data)
        existing, existing_seq = self._last_meta(name, deadline)
        nuid = next_nuid()
        chunk_subject = f"$O.{self.bucket}.C.{nuid}"
        try:
            sent, chunks, digest = self._put_chunks(chunk_subject, source, size, total, progress, deadline)
        except BaseException as exc:
            # No info points at the new chunks yet: they go, whatever went wrong.
            self._purge_chunks_of(name, nuid, deadline, f"chunks of a failed put of {name!r}")
            if isinstance(exc, builtins.TimeoutError):
                # Ours or the bare one of a chunk's future (concurrent.futures): the
                # caller gets ours, naming the object.
                raise TimeoutError(f"object {name!r}: chunks not all acknowledged within the put's"
                                   f" timeout: {exc or type(exc).__name__}") from exc
            raise
        opts = meta.options or ObjectMetaOptions()
        info = ObjectInfo(name=name, bucket=self.bucket, nuid=nuid, description=meta.description,
                          headers=meta.headers, metadata=meta.metadata,
                          options=opts.replace(max_chunk_size=size), size=sent, chunks=chunks, digest=digest)
        leftovers = self._leftovers.of(self._object_key(name))  # read before the info goes out
        unreferenced = self._commit_meta(info, existing, existing_seq, deadline)
        # The put succeeded: what it replaced goes, and what earlier puts of this name
        # left behind (their info unconfirmed): this info is newer than all of them.
        # A failed clean-up is logged, never raised (a caller told "failed" would put
        # again what is already stored).
        self._purge_chunks(name, (unreferenced | leftovers) - {nuid}, deadline)
        return info.replace(mtime=datetime.datetime.now(datetime.timezone.utc))

    def _object_key(self, name: str) -> tuple[str, str, str]:
        return self._js._api.prefix, self.stream_name, name

    def _purge_chunks(self, name: str, nuids: Iterable[str], deadline: Deadline) -> None:
        for old in sorted(nuids):
            self._purge_chunks_of(name, old, deadline, f"chunks of an older version of {name!r}")

    def _left_behind(self, info: ObjectInfo, nuids: set[str]) -> None:
        """A put whose info went unconfirmed: its chunks, and those of the versions its
        attempts expected to replace, are kept (the info may be stored) and purged by
        the next put or delete of the name that is confirmed, which is newer than all of them."""
        self._leftovers.add(self._object_key(info.name), nuids | {info.nuid})

    def _commit_meta(self, info: ObjectInfo, existing: ObjectInfo | None, existing_seq: int,
                     deadline: Deadline) -> set[str]:
        """Publish the info of a put whose chunks are stored; returns the nuids of the
        versions it made unreferenced (their chunks are to be purged).

        Each attempt expects the object's info to be the one at ``existing_seq``
        and carries the put's nuid as its message id:

        - another writer's info since then (wrong last sequence): read it again;
          if it is this put's own (an earlier attempt was stored), done; else replace that one;
        - no answer in time: send the same info again while time is left; the
          stream stores it once (the message id), and answers a copy sent after a
          stored one as a duplicate;
        - any other refusal: nothing points at the new chunks, they are purged.

        What a put replaced is what the attempt that was stored expected: the
        current one's, or, when an earlier attempt that went unconfirmed was
        stored (a duplicate answer, or this put's own info read back), what the
        unconfirmed attempts expected. An attempt refused for a wrong last
        sequence replaced nothing: what it expected may live on under another
        name (a rename keeps the nuid), so its chunks are never purged here.

        Raises:
            TimeoutError: no attempt was confirmed in time (chunks kept: the info may
                be stored; see :meth:`_left_behind`).
        """
        name, nuid = info.name, info.nuid
        unconfirmed: BaseException | None = None
        # The expectation of the attempts that went unconfirmed; a duplicate answer
        # means one of them was stored, and it replaced what they expected.
        unconfirmed_seq: int | None = None
        expected_nuids: set[str] = set()  # what the unconfirmed attempts expected to replace (chunks only)
        while True:
            attempt = _meta_attempt(deadline)
            if unconfirmed is not None and attempt is None:
                self._left_behind(info, expected_nuids)
                raise _unconfirmed_error(info) from unconfirmed
            try:
                ack = self._publish_meta(info, attempt or deadline, msg_id=nuid,
                                         expected_last_subject_seq=existing_seq)
                if not ack.duplicate:
                    return _chunk_nuids(existing)  # no earlier attempt was stored: only this one's
                if unconfirmed_seq != existing_seq:
                    # Stored by an attempt made before another writer's info was read:
                    # that writer's info (the newest read) replaced this one and keeps its chunks.
                    return expected_nuids - _chunk_nuids(existing)
                return expected_nuids | _chunk_nuids(existing)
            except WrongLastSequenceError:
                try:
                    existing, existing_seq = self._last_meta(name, deadline)
                except NatsError as exc:
                    if self._abandon(info, expected_nuids, unconfirmed, deadline):
                        raise _unconfirmed_error(info) from exc
                    raise
                if getattr(existing, "nuid", None) == nuid:
                    # An earlier attempt was stored: it is the newest, newer than all it expected.
                    return expected_nuids
            except NotSentError as exc:
                # Withdrawn unsent: this attempt can never be stored. Again while time is left.
                if not deadline.expired():
                    continue
                if self._abandon(info, expected_nuids, unconfirmed, deadline):
                    raise _unconfirmed_error(info) from unconfirmed
                raise NotSentError(f"object {name!r}: its info could not be sent within the put's timeout; the"
                                   f" put stored nothing (its chunks are purged), a retry is safe") from exc
            except TimeoutError as exc:
                if unconfirmed is None:
                    unconfirmed_seq = existing_seq
                unconfirmed = exc
                expected_nuids |= _chunk_nuids(existing)
            except NatsConnectionError as exc:
                # Sent or not, nobody can tell now: keep the chunks the info may point at.
                self._left_behind(info, expected_nuids | _chunk_nuids(existing))
                raise TimeoutError(f"object {name!r}: the connection failed before its info was confirmed;"
                                   f" it may be stored (chunks under nuid {nuid} are kept): {exc}") from exc
            except BaseException:
                self._abandon(info, expected_nuids, unconfirmed, deadline)
                raise

    def _abandon(self, info: ObjectInfo, expected_nuids: set[str], unconfirmed: BaseException | None,
                 deadline: Deadline) -> bool:
        """A put's info can be sent no more. After an unconfirmed attempt the info may
        be stored: the chunks are kept (:meth:`_left_behind`) and this returns True.
        Otherwise nothing points at the new chunks: they are purged (False)."""
        if unconfirmed is not None:
            self._left_behind(info, expected_nuids)
            return True
        self._purge_chunks_of(info.name, info.nuid, deadline, f"chunks of a failed put of {info.name!r}")
        return False

    def _put_chunks(self, subject: str, source: Callable[[int], bytes], size: int, total: int | None,
                    progress: Progress | None, deadline: Deadline) -> tuple[int, int, str]:
        """Publish the data chunk by chunk, pipelined in a bounded window; ``(bytes, chunks, digest)``."""
        sha = hashlib.sha256()
        sent = chunks = 0
        with PublishPipeline(self._js.publish_async, max(2, WINDOW_BYTES // size), deadline) as pipe:
            while True:
                block = source(size)
                if not block:
                    break
                sha.update(block)
                pipe.publish(subject, block)  # bounded memory: waits for the oldest acks
                sent += len(block)
                chunks += 1
                if progress is not None:
                    progress(sent, total)
        return sent, chunks, digest_value(sha)

    def put_bytes(self, name: str, data: bytes, **kwargs: Any) -> ObjectInfo:
        """Store ``data`` as object ``name``; the keywords of :meth:`put`."""
        return self.put(name, data, **kwargs)

    def put_string(self, name: str, data: str, **kwargs: Any) -> ObjectInfo:
        """Store the UTF-8 encoding of ``data`` as object ``name``; the keywords of :meth:`put`."""
        return self.put(name, data.encode(), **kwargs)

    def put_file(self, path: str | os.PathLike[str], name: str | None = None, **kwargs: Any) -> ObjectInfo:
        """Store the file at ``path`` (under its base name unless ``name`` is given)."""
        with open(path, "rb") as f:
            return self.put(name or os.path.basename(os.fspath(path)), f, **kwargs)

    # ------------------------------------------------------------------ get

    def get(self, name: str, show_deleted: bool = False, progress: Progress | None = None,
            timeout: float = 30.0, writeinto: IO[bytes] | IO[str] | None = None) -> ObjectResult:
        """A file-like reader of the object (links followed). Use it with ``with``.

        With ``writeinto`` (nats-py's argument) the object is streamed into that
        file object before returning, and the returned result is closed. A text
        file (one with a ``buffer``, as ``open(path, "w")`` gives) gets the bytes
        through its binary buffer, as nats-py does.
        """
        info = self.get_info(name, show_deleted=show_deleted)
        if info.is_link:
            link = info.options.link if info.options is not None else None
            if link is None or not link.name:
                raise ObjectStoreError(f"{name!r} links to a whole bucket, not an object")
            target = self if link.bucket == self.bucket else self._js.object_store(link.bucket)
            return target.get(link.name, progress=progress, timeout=timeout, writeinto=writeinto)
        result = ObjectResult(self, info, progress, timeout)
        if writeinto is not None:
            # A text file's write() takes str: its bytes go to the binary buffer beneath.
            # Flushing the text layer first keeps what was written through it in order.
            buffer = getattr(writeinto, "buffer", None)
            write: Callable[[bytes], object] = cast("IO[bytes]", writeinto).write
            if buffer is not None:
                writeinto.flush()
                write = buffer.write
            with result:
                for chunk in result.chunks():
                    write(chunk)
        return result

    def typed(self, type_: type[_T], codec: Codec | None = None) -> TypedObjectStore[_T]:
        """A view of this store whose objects are values, encoded by ``codec`` (default JSON).

        The content type goes into each object's headers and decides how it reads back.
        """
        from ..codecs.typed import TypedObjectStore

        return TypedObjectStore(self, type_, codec)

    def get_bytes(self, name: str, **kwargs: Any) -> bytes:
        """The whole content of object ``name``, checked against its digest; the keywords of :meth:`get`.

        Raises:
            ObjectNotFoundError: no such object (or it is deleted).
            DigestMismatchError: the data read does not match the stored digest.
        """
        with self.get(name, **kwargs) as result:
            return b"".join(result.chunks())

    def get_string(self, name: str, encoding: str = "utf-8", **kwargs: Any) -> str:
        """The content of object ``name`` decoded with ``encoding``; the keywords of :meth:`get`."""
        return self.get_bytes(name, **kwargs).decode(encoding)

    def get_file(self, name: str, path: str | os.PathLike[str], **kwargs: Any) -> ObjectInfo:
        """Write the object to ``path`` (streamed); returns its info."""
        with self.get(name, **kwargs) as result, open(path, "wb") as f:
            for chunk in result.chunks():
                f.write(chunk)
            return result.info

    # ------------------------------------------------------------------ change

    def update_meta(self, name: str, meta: ObjectMeta, timeout: TimeoutArg = USE_DEFAULT) -> ObjectInfo:
        """Change description, headers, metadata, or the name (a rename).

        Raises:
            ObjectDeletedError: there is no object of that name, or it was deleted (an
                ObjectNotFoundError; nats-py raises this class for both).
            ObjectAlreadyExists: another object has the new name (an ObjectStoreError).
        """
        timeout = self._js._api.deadline(timeout)  # one budget for every step
        try:
            info = self.get_info(name, timeout=timeout)
        except ObjectDeletedError:
            raise
        except ObjectNotFoundError as exc:
            raise ObjectDeletedError(str(exc)) from None
        new_name = meta.name or name
        if new_name != name:
            other, _ = self._last_meta(_check_name(new_name), timeout)
            if other is not None and not other.deleted:
                raise ObjectAlreadyExists(f"an object named {new_name!r} exists already")
        updated = info.replace(name=new_name, description=meta.description, headers=meta.headers,
                               metadata=meta.metadata)
        self._publish_meta(updated, timeout)
        if new_name != name:
            self._stream.purge(subject=self._meta_subject(name), timeout=timeout)
        return updated

    def delete(self, name: str, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Delete the object: a deleted-marker info, and its chunks purged.

        Raises:
            ObjectNotFoundError: there is no object of that name.
            ObjectDeletedError: the object is deleted already (an ObjectNotFoundError, as
                nats-py raises). Its chunks are purged again first, so repeating a delete
                that failed between the marker and the purge still frees them.
        """
        timeout = self._js._api.deadline(timeout)  # one budget for every step
        info = self.get_info(name, show_deleted=True, timeout=timeout)
        if info.deleted:
            if info.nuid:
                self._purge_chunks_of(name, info.nuid, timeout, "the chunks of a deleted object")
            raise ObjectDeletedError(f"object {name!r} was deleted from bucket {self.bucket!r} already")
        leftovers = self._leftovers.of(self._object_key(name))
        self._publish_meta(info.replace(deleted=True, size=0, chunks=0, digest=None), timeout)
        try:
            self._stream.purge(subject=f"$O.{self.bucket}.C.{info.nuid}", timeout=timeout)
        except NatsError as exc:
            if not isinstance(exc, JetStreamError):
                # Unanswered, and the marker is stored: a later put of the name reads
                # no chunks from it, so it purges them from what is remembered here.
                self._leftovers.add(self._object_key(name), {info.nuid})
            raise
        self._purge_chunks(name, leftovers - {info.nuid}, timeout)  # older than the marker, as after a put

    def add_link(self, name: str, target: ObjectInfo, timeout: TimeoutArg = USE_DEFAULT) -> ObjectInfo:
        """A link called ``name`` to the object ``target`` (here or in another bucket)."""
        _check_name(name)
        if target.deleted:
            raise ObjectStoreError("cannot link to a deleted object")
        if target.is_link:
            raise ObjectStoreError("cannot link to a link")
        return self._put_link(name, ObjectLink(bucket=target.bucket, name=target.name), timeout)

    def add_bucket_link(self, name: str, bucket: ObjectStore, timeout: TimeoutArg = USE_DEFAULT) -> ObjectInfo:
        """A link called ``name`` to a whole bucket."""
        _check_name(name)
        return self._put_link(name, ObjectLink(bucket=bucket.bucket), timeout)

    def _put_link(self, name: str, link: ObjectLink, timeout: TimeoutArg) -> ObjectInfo:
        timeout = self._js._api.deadline(timeout)  # one budget for every step
        existing, _ = self._last_meta(name, timeout)
        if existing is not None and not existing.deleted and not existing.is_link:
            raise ObjectStoreError(f"an object named {name!r} exists already")
        info = ObjectInfo(name=name, bucket=self.bucket, nuid=next_nuid(), options=ObjectMetaOptions(link=link))
        self._publish_meta(info, timeout)
        return info

    # ------------------------------------------------------------------ listing

    def _infos(self, include_history: bool = False, updates_only: bool = False) -> Any:
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        return self._js.ordered_consumer(self.stream_name, filter_subjects=[f"$O.{self.bucket}.M.>"],
                                         deliver_policy=policy)

    def list(self, show_deleted: bool = False, timeout: TimeoutArg = 30.0, *,
             ignore_deletes: bool | None = None) -> list[ObjectInfo]:
        """Every object's info (deleted ones only with ``show_deleted``), within one ``timeout``.

        ``ignore_deletes`` is nats-py's keyword (``ignore_deletes=False`` lists
        deleted objects too); given, it decides instead of ``show_deleted``.

        Raises:
            ObjectNotFoundError: nothing to list (as nats.go and nats-py).
        """
        if ignore_deletes is not None:
            show_deleted = not ignore_deletes
        out = self._list(show_deleted, Deadline.of(timeout, 30.0))
        if not out:
            raise ObjectNotFoundError(f"no objects in bucket {self.bucket!r}")
        return out

    def _list(self, show_deleted: bool, deadline: Deadline) -> builtins.list[ObjectInfo]:
        oc = self._infos()
        it = oc.messages(max_messages=256)
        out: list[ObjectInfo] = []
        try:
            cinfo = oc.cached_info
            if cinfo is not None and cinfo.num_pending == 0:
                return out
            while True:
                msg = it.next(timeout=deadline.remaining())
                md = msg.metadata
                try:
                    info: ObjectInfo | None = decode_info(msg.data, f"bucket {self.bucket!r}").replace(
                        mtime=md.timestamp)
                except ObjectStoreError as exc:
                    # One unreadable info (another tool's, a damaged one) must not hide the rest.
                    self._js._core.logs.to(_log).warning("skipping an object info: %s", exc)
                    info = None
                if info is not None and (show_deleted or not info.deleted):
                    out.append(info)
                if md.num_pending == 0:
                    return out
        finally:
            it.stop()

    def watch(self, ignore_deletes: bool = False, include_history: bool = False, updates_only: bool = False
              ) -> ObjectWatcher:
        """Infos as objects change: the current ones first, then ``None``, then changes."""
        return ObjectWatcher(self._infos(include_history, updates_only), ignore_deletes, not updates_only)

    # ------------------------------------------------------------------ bucket

    def seal(self, timeout: TimeoutArg = USE_DEFAULT) -> None:
        """Make the bucket read-only for good."""
        timeout = self._js._api.deadline(timeout)  # one budget for every step
        cfg = self._stream.info(timeout=timeout).config
        self._stream = self._js.update_stream(cfg.replace(sealed=True), timeout=timeout)

    def status(self, timeout: TimeoutArg = USE_DEFAULT) -> ObjectStoreStatus:
        """The store's state and settings, read from the server now."""
        return ObjectStoreStatus(self._stream.info(timeout=timeout), self.bucket)

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket}>"


#: Stands for an info that could not be decoded; the watcher never hands it out.
_UNREADABLE = ObjectInfo(name="", bucket="")


class ObjectWatcher(Watcher[ObjectInfo]):
    """Infos of a watch, ``None`` once at the end of the current ones; :meth:`stop` ends it.

    An info no client could have meant (not JSON, not an object info) is
    logged and skipped; the watch goes on.
    """

    def next(self, timeout: TimeoutArg = None) -> ObjectInfo | None:
        """The next info, or ``None`` for the end of the current ones.

        Raises:
            TimeoutError: nothing within ``timeout`` seconds (``None``: wait for ever).
            BadSubscriptionError: the watcher was stopped.
        """
        deadline = Deadline.of(timeout, None)
        while True:
            item = super().next(deadline)
            if item is not _UNREADABLE:
                return item

    def _decode(self, msg: Msg) -> tuple[ObjectInfo, int, bool]:
        md = msg.metadata
        try:
            info = decode_info(msg.data, msg.subject).replace(mtime=md.timestamp)
        except ObjectStoreError as exc:
            # Skipped like a delete (the watcher passes over those when told to), never raised
            # out of the watch: one bad entry must not end it.
            of_msg(msg, _log).warning("skipping an object info: %s", exc)
            return _UNREADABLE, md.num_pending, True
        return info, md.num_pending, info.deleted


def _reader(data: Any) -> tuple[Callable[[int], bytes], int | None]:
    """``(read(n), total size or None)`` for bytes, str or a file-like object."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        pos = [0]

        def read(n: int) -> bytes:
            start = pos[0]
            pos[0] = start + n
            return bytes(view[start:start + n])

        return read, len(view)
    if hasattr(data, "read"):
        f: BinaryIO = data
        total = None
        try:
            if f.seekable():
                here = f.tell()
                total = f.seek(0, io.SEEK_END) - here
                f.seek(here)
        except (AttributeError, OSError, ValueError):
            total = None

        def read_file(n: int) -> bytes:
            # File-likes may return short reads: fill the chunk (stable chunking).
            parts = []
            want = n
            while want > 0:
                block = f.read(want)
                if not block:
                    break
                if isinstance(block, str):
                    block = block.encode()
                parts.append(block)
                want -= len(block)
            return b"".join(parts)

        return read_file, total
    raise TypeError(f"cannot store {type(data).__name__}: give bytes, str, a path or a binary file-like object")


# ---------------------------------------------------------------------- bucket management

def create_object_store(js: JetStream, config: ObjectStoreConfig, action: str, timeout: TimeoutArg
                        ) -> ObjectStore:
    stream = bucket_stream(js, config.stream_config(), action, f"object store {config.bucket!r}",
                           ObjectStoreError, timeout)
    return ObjectStore(js, config.bucket, stream)


def open_object_store(js: JetStream, bucket: str, timeout: TimeoutArg) -> ObjectStore:
    return ObjectStore(js, bucket, open_bucket_stream(js, bucket, f"OBJ_{bucket}", f"object store {bucket!r}",
                                                      timeout))


def obj_config(config: ObjectStoreConfig | str | None, kwargs: Mapping[str, Any]) -> ObjectStoreConfig:
    if isinstance(config, str):  # nats-py: create_object_store("bucket", ...)
        config, kwargs = None, {**kwargs, "bucket": config}
    if "placement" in kwargs and isinstance(kwargs["placement"], dict):
        kwargs = {**kwargs, "placement": msgspec.convert(kwargs["placement"], Placement)}
    if config is None:
        return ObjectStoreConfig(**kwargs)
    if not isinstance(config, ObjectStoreConfig):
        raise TypeError(f"expected an ObjectStoreConfig, got {type(config).__name__}")
    return config.replace(**kwargs) if kwargs else config


# The models are imported from here too (their home before object_models existed).
__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "WINDOW_BYTES",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectResult",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "Progress",
    "create_object_store",
    "decode_info",
    "digest_value",
    "encode_info",
    "encode_name",
    "obj_config",
    "open_object_store",
]
