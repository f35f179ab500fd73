"""Sphinx extension: the command line reference, generated from the parser itself.

``.. cli-reference:: natsjs_sync.cli:build_parser`` builds the parser when the
docs are built and writes one section per command, at every depth, with the
help text ``natsjs-sync COMMAND --help`` prints: a new command or option is in
the docs the moment it is in the code, and no copy can fall behind.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: The width the help is wrapped at (argparse reads it from ``$COLUMNS``).
WIDTH = "88"


@contextmanager
def _columns(width: str) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


class CliReference(SphinxDirective):
    """The parser that ``module:function`` builds: its own help, then a section per command
    (the sections of a command's subcommands inside its own)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module_name, _, function = self.arguments[0].partition(":")
        module = importlib.import_module(module_name)
        self.env.note_dependency(module.__file__ or "")
        parser = getattr(module, function)()
        with _columns(WIDTH):
            return [self._help(parser), *(self._section(child) for child in parser.commands().values())]

    def _help(self, parser: Any) -> nodes.literal_block:
        text = parser.format_help()
        return nodes.literal_block(text, text, language="text")

    def _section(self, parser: Any) -> nodes.section:
        title = parser.prog
        section = nodes.section(ids=[nodes.make_id(f"cli {title}")], names=[nodes.fully_normalize_name(title)])
        section += nodes.title(text=title)
        section += self._help(parser)  # the description included
        for child in parser.commands().values():
            section += self._section(child)
        self.state.document.note_implicit_target(section, section)
        return section


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("cli-reference", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
