"""Request many: one request, every reply that comes back, as an iterator.

Scatter-gather and streamed answers (ADR-47, nats.go's ``natsext.RequestMany``,
nats.js's ``requestMany``). The request goes out on a fresh inbox of its own;
the iterator yields the replies as they arrive and ends on the first of:

- ``max_messages`` replies yielded;
- the total ``timeout`` (counted from the call) has passed;
- ``stall`` seconds passed waiting for a reply after the first one;
- the sentinel: a reply with an empty payload (``sentinel=True``) or one for
  which ``sentinel(msg)`` is true. The sentinel marks the end and is not yielded.

A 503 "no responders" status raises :class:`~natsjs_sync.NoRespondersError`.
The inbox subscription is closed when the iterator ends, on ``close()``, at the
end of a ``with`` block, and when the iterator is garbage collected (so a
``break`` out of ``for msg in nc.request_many(...)`` releases it too: within
moments, by the client's timer thread, since a finalizer must not take the
connection's lock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Union

from ._core.spi import core_of
from ._timeout import USE_DEFAULT, Deadline, TimeoutArg, check_seconds
from .errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    MaxPayloadError,
    NatsError,
    NoRespondersError,
    TimeoutError,
)
from .msg import Msg
from .protocol.headers import HeadersInput, encode_headers
from .protocol.jetstream.status import is_no_responders
from .protocol.subjects import publish_subject

if TYPE_CHECKING:
    from .client import Client
    from .subscription import Subscription

#: ``sentinel=``: ``True`` for the standard sentinel (an empty payload), or a
#: predicate that is true for the message that ends the replies.
Sentinel = Union[bool, Callable[[Msg], bool], None]

#: The total wait when ``timeout`` is not given, as for :meth:`Client.request`.
DEFAULT_TIMEOUT = 1.0


def _is_standard_sentinel(msg: Msg) -> bool:
    return not msg.data


def _unsubscribe_quietly(sub: Subscription) -> None:
    """End the inbox subscription; it may have ended already (max reached, client closed)."""
    try:
        sub.unsubscribe()
    except NatsError:
        pass


class ReplyIterator(Iterator[Msg]):
    """The replies to one request, in arrival order. Made by :func:`request_many`.

    Iterate it once, from one thread (it is not thread-safe). Also a context
    manager; :meth:`close` ends it early.
    """

    def __init__(
        self,
        sub: Subscription,
        deadline: Deadline,
        max_messages: int | None,
        stall: float | None,
        sentinel: Callable[[Msg], bool] | None,
    ):
        self._sub = sub
        self._deadline = deadline
        self._max = max_messages
        self._stall = stall
        self._sentinel = sentinel
        self._received = 0
        self._done = False
        # Runs once: on close() (here), or when this iterator is collected unfinished
        # (on a core thread: see spi.Release). It holds no reference to self.
        self._release = core_of(sub).release_on_collect(self, _unsubscribe_quietly, sub)

    @property
    def received(self) -> int:
        """Replies yielded so far."""
        return self._received

    @property
    def inbox(self) -> str:
        """The reply subject the request was sent with."""
        return self._sub.subject

    def __iter__(self) -> ReplyIterator:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        wait = self._deadline.remaining()
        if self._received and self._stall is not None:
            # Later replies: the stall bounds each wait, the total still holds.
            wait = self._stall if wait is None else min(wait, self._stall)
        try:
            msg = self._sub.next_msg(timeout=wait)
        except (TimeoutError, BadSubscriptionError):
            self.close()
            raise StopIteration from None
        except ConnectionClosedError:
            self.close()
            raise
        if is_no_responders(msg.raw_headers, msg.data):
            self.close()
            raise NoRespondersError(f"no responders on the request that replies to {self._sub.subject!r}")
        if self._sentinel is not None and self._sentinel(msg):
            self.close()
            raise StopIteration
        self._received += 1
        if self._max is not None and self._received >= self._max:
            self.close()
        return msg

    def close(self) -> None:
        """Stop receiving replies and release the inbox (safe to call more than once)."""
        self._done = True
        self._release()

    def __enter__(self) -> ReplyIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"<ReplyIterator {self._sub.subject!r} {state} received={self._received}>"


def _check_options(
    payload: object, max_messages: object, stall: object, sentinel: object
) -> Callable[[Msg], bool] | None:
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(f"payload must be bytes-like, not {type(payload).__name__}")
    if max_messages is not None and (
        isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1
    ):
        raise ValueError(f"max_messages must be an int >= 1 or None, got {max_messages!r}")
    if stall is not None:
        seconds = check_seconds(stall, "stall")  # inf: no stall
        if seconds is not None and seconds <= 0:
            raise ValueError(f"stall must be a number of seconds > 0 or None, got {stall!r}")
    if sentinel is None or sentinel is False:
        return None
    if sentinel is True:
        return _is_standard_sentinel
    if callable(sentinel):
        return sentinel
    raise TypeError(f"sentinel must be True, False, None or a callable taking a Msg, not {type(sentinel).__name__}")


def request_many(
    client: Client,
    subject: str,
    payload: bytes | bytearray | memoryview = b"",
    *,
    headers: HeadersInput | None = None,
    timeout: TimeoutArg = USE_DEFAULT,
    max_messages: int | None = None,
    stall: float | None = None,
    sentinel: Sentinel = None,
) -> ReplyIterator:
    """Send a request and iterate over the replies (also ``client.request_many``).

    The request is sent before this returns; the replies wait in the inbox's
    queue until read.

    Args:
        client: the connected client.
        subject: where to send the request.
        payload: the request data.
        headers: optional request headers.
        timeout: the total seconds, counted from this call, for all the replies
            (default 1 s; ``None``: no total limit). Replies that arrived in time
            are still yielded when read later.
        max_messages: end after this many replies.
        stall: end when no further reply comes this many seconds after the
            previous one (the first reply is waited for up to ``timeout``).
        sentinel: ``True`` to end at the first reply with an empty payload, or a
            function that returns true for the reply that ends the stream.
            The sentinel itself is not yielded.

    Returns:
        A :class:`ReplyIterator` of :class:`~natsjs_sync.Msg`.

    Raises:
        BadSubjectError: invalid subject.
        BadHeaderError: headers that cannot be sent.
        MaxPayloadError: the request is larger than the server's max_payload.
        TypeError, ValueError: an invalid option (before anything is sent).
        NoRespondersError: while iterating, nobody was subscribed to ``subject``.
        ConnectionClosedError: the client is closed (now, or while iterating).
    """
    deadline = Deadline.of(timeout, DEFAULT_TIMEOUT)
    publish_subject(subject)
    check = _check_options(payload, max_messages, stall, sentinel)
    size = len(payload)
    if headers is not None:
        size += len(encode_headers(headers))
    if size > client.max_payload:
        raise MaxPayloadError(f"request of {size} bytes exceeds the server's max_payload of {client.max_payload}")
    inbox = client.new_inbox()
    # The server ends the subscription by itself after max_messages replies.
    sub = client.subscribe(inbox, max_msgs=max_messages)
    replies = ReplyIterator(sub, deadline, max_messages, check_seconds(stall, "stall"), check)
    try:
        client.publish_now(subject, payload, reply=inbox, headers=headers)
    except BaseException:
        replies.close()
        raise
    return replies
