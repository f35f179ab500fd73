"""``typed()`` on every reader of messages: subscriptions, consumers and their nats-py forms.

One definition for all of them (a mixin without state), so the typed view
(:class:`~natsjs_sync.codecs.TypedReader`) is made the same way everywhere.
Nothing of :mod:`natsjs_sync.codecs` is imported until a program asks for a view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .codecs import Codec, DecodeErrorHandler, TypedReader

_T = TypeVar("_T")


class TypedReads:
    """Gives a reader of messages :meth:`typed`."""

    __slots__ = ()

    def typed(self, type_: type[_T], codec: Codec | None = None,
              on_decode_error: DecodeErrorHandler | None = None) -> TypedReader[_T]:
        """A view of this reader whose reads (``next_msg``/``next``, iteration, ``fetch``,
        ``messages``, ``consume``: those this reader has) yield decoded
        :class:`~natsjs_sync.codecs.TypedMsg`.

        Args:
            type_: what payloads decode to (a msgspec Struct, dataclass, TypedDict,
                plain type or pydantic model).
            codec: for messages without a ``content-type`` header (default JSON).
            on_decode_error: ``cb(msg, error)`` for messages that do not decode
                (a dead-letter path; they are left out); without it the read raises
                :class:`~natsjs_sync.errors.PayloadDecodeError`.
        """
        from .codecs.typed import TypedReader

        return TypedReader(self, type_, codec, on_decode_error)
