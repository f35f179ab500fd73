"""The command line's argument parser, which masks what a usage error quotes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._redact import redact, redact_urls

__all__ = ["ArgumentParser"]


class ArgumentParser(argparse.ArgumentParser):
    """The parser of the command line and of each of its commands (``add_subparsers`` makes
    subparsers of the parent's class).

    A usage error quotes what was typed, and a mistyped command line may hold a server URL
    with its password (``--server nats://app:s3cret@host`` where no ``--server`` is taken):
    every message given to :meth:`error` is masked first, in this class and in any subclass
    that defines its own ``error`` (a check's UNKNOWN line, for one). Each word typed with an
    ``@`` in it is masked as the URL it may be, whole (a password may hold spaces and commas,
    which free text cannot tell from the words around it).
    """

    _typed: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("error")
        if own is not None:
            def error(self: ArgumentParser, message: str) -> NoReturn:
                own(self, self._masked(message))
                raise AssertionError("error() returned")  # argparse's contract: it exits

            cls.error = error  # type: ignore[method-assign]

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._typed = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _masked(self, message: str) -> str:
        for word in sorted((w for w in self._typed if "@" in w), key=len, reverse=True):
            message = message.replace(word, redact_urls(word))
        return redact(message)

    def error(self, message: str) -> NoReturn:
        super().error(self._masked(message))
