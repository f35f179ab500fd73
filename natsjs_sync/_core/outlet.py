"""The publishing end of a connection's write buffer: a plain publish in one call.

:meth:`Client.publish <natsjs_sync.Client.publish>` without reply or headers
calls the connection's :data:`Outlet` with the subject and payload. When the
connection is up, the payload is ``bytes``, the subject was validated before
(it is in the subject cache of :mod:`~natsjs_sync.protocol.subjects`) and the
payload fits ``max_payload``, the outlet lays the ``PUB`` frame out in the
buffer, counts it and sees that it gets sent; it returns True. Otherwise it
does nothing and returns False, and the caller takes the general path, which
validates, raises or buffers while reconnecting.

It appends without the connection's lock, as the writer's docstring explains
(:mod:`.writer`): one C call under the GIL, or one ``bytearray +=`` in the
twin. ``open`` is nonzero only while that is allowed (connected, GIL on).

The class here is the reference and what runs without a compiler; the
compiled twin is ``_speedups.Outlet``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protocol._compiled import twin

_HEADS_MAX = 4096


class OutletPy:
    """A connection's publishing end (Python twin of ``_speedups.Outlet``).

    Args:
        buffer: the writer's buffer (appended to, never replaced here).
        subjects: subject -> its validated bytes (the cache of ``publish_subject``).
        threshold: past this many buffered bytes, ``on_full`` sends from the publisher's thread.
        on_wake: asks the flusher to send (called when ``flush_requested`` is down).
        on_full: sends the buffer now (back-pressure).

    Attributes the connection and writer set: ``open``, ``max_payload``,
    ``flush_requested``, ``buffer`` (a forked child's new one); counters
    ``out_msgs`` and ``out_bytes`` (the client's stats read them).
    """

    __slots__ = ("_heads", "buffer", "flush_requested", "max_payload", "on_full", "on_wake", "open", "out_bytes",
                 "out_msgs", "subjects", "threshold")

    def __init__(self, buffer: bytearray, subjects: dict[str, bytes], threshold: int,
                 on_wake: Callable[[], object], on_full: Callable[[], object]):
        self.buffer = buffer
        self.subjects = subjects
        self.threshold = threshold
        self.on_wake = on_wake
        self.on_full = on_full
        self.open = 0
        self.flush_requested = 0
        self.max_payload = 1024 * 1024
        self.out_msgs = self.out_bytes = 0
        # subject -> (size, its PUB line) of the last publish to it: a loop of
        # publishes of one size formats nothing (the compiled twin writes the
        # size itself, which costs it less than this look-up).
        self._heads: dict[str, tuple[int, bytes]] = {}

    def __call__(self, subject: str, payload: object, block: bytes | None = None) -> bool:
        """Publish ``payload`` to ``subject`` if this is the common case; True when done.

        ``block``: a header block the library encoded (a typed publish's
        content type): the frame is an ``HPUB`` with it in front of the payload.
        """
        if not self.open or payload.__class__ is not bytes or subject.__class__ is not str:
            return False
        if block is not None:
            return self._headed(subject, payload, block)
        size = len(payload)
        head = self._heads.get(subject)
        if head is None or head[0] != size:
            subj = self.subjects.get(subject)
            if subj is None:
                return False  # not validated: the general path validates
            if len(self._heads) >= _HEADS_MAX:
                self._heads.clear()
            head = self._heads[subject] = (size, b"PUB %b %d\r\n" % (subj, size))
        if size > self.max_payload:
            return False
        buffer = self.buffer
        buffer += head[1] + payload + b"\r\n"  # one append: frames of two threads never interleave
        self.out_msgs += 1
        self.out_bytes += size
        if len(buffer) > self.threshold:
            self.on_full()
        elif not self.flush_requested:
            self.on_wake()
        return True

    def _headed(self, subject: str, payload: bytes, block: bytes) -> bool:
        if block.__class__ is not bytes:
            return False
        subj = self.subjects.get(subject)
        if subj is None:
            return False
        size = len(block) + len(payload)
        if size > self.max_payload:
            return False
        buffer = self.buffer
        buffer += b"HPUB %b %d %d\r\n%b%b\r\n" % (subj, len(block), size, block, payload)
        self.out_msgs += 1
        self.out_bytes += size
        if len(buffer) > self.threshold:
            self.on_full()
        elif not self.flush_requested:
            self.on_wake()
        return True


#: The class of a connection's outlet: compiled where built.
Outlet: type[OutletPy] = twin("Outlet", OutletPy)
