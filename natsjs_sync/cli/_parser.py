"""The command line's argument parser, which masks what a usage error quotes."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

from .._redact import mask_values, redact, redact_urls

__all__ = ["ArgumentParser"]

#: An option whose value is, or may be, a secret (the nats CLI's ``--user`` takes a token too):
#: ``--password``, ``--token``, ``--seed``, ``--user-jwt``, ``--creds``, ``--nkey`` ... and any
#: abbreviation or misspelling of them a parser refuses.
_SECRET_OPTION = re.compile(r"^--?[\w-]*(?:pas|pw|secret|tok|seed|jwt|key|cred|auth|user)", re.IGNORECASE)
#: The whole command line while it is parsed: a command's parser sees only the words after its
#: name, but the error it reports may quote any of them (main() reports the words no parser took).
_command_line: ContextVar[tuple[str, ...] | None] = ContextVar("natsjs_sync_command_line", default=None)


def secret_values(argv: Sequence[str]) -> list[str]:
    """The values typed for options that take a secret (``--password VALUE``, ``--token=VALUE``),
    which a usage error may quote when the option is not taken where it was typed."""
    values = []
    for i, word in enumerate(argv):
        if not _SECRET_OPTION.match(word):
            continue
        _, equals, value = word.partition("=")
        if equals:
            values.append(value)
        elif i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


class ArgumentParser(argparse.ArgumentParser):
    """The parser of the command line and of each of its commands (``add_subparsers`` makes
    subparsers of the parent's class).

    A usage error quotes what was typed, and a mistyped command line may hold a server URL
    with its password (``--server nats://app:s3cret@host`` where no ``--server`` is taken):
    every message given to :meth:`error` is masked first, in this class and in any subclass
    that defines its own ``error`` (a check's UNKNOWN line, for one). Each word typed with an
    ``@`` in it is masked as the URL it may be, whole (a password may hold spaces and commas,
    which free text cannot tell from the words around it); so is the value typed for an
    option that takes a secret (``pub x y --password s3cret``: "unrecognized arguments: ...",
    ``--password s3cret pub``: "invalid choice: ..."), wherever it stands whole.
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
        outer = _command_line.get()
        self._typed = tuple(sys.argv[1:] if args is None else args) if outer is None else outer
        token = _command_line.set(self._typed) if outer is None else None
        try:
            return super().parse_known_args(args, namespace)
        finally:
            if token is not None:
                _command_line.reset(token)

    def _masked(self, message: str) -> str:
        message = mask_values(message, secret_values(self._typed))  # first: a value may hold an '@'
        for word in sorted((w for w in self._typed if "@" in w), key=len, reverse=True):
            message = message.replace(word, redact_urls(word))
        return redact(message)

    def error(self, message: str) -> NoReturn:
        super().error(self._masked(message))
