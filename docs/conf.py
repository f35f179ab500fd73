"""Sphinx configuration for natsjs-sync."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.abspath(".."))

from natsjs_sync import __version__

project = "natsjs-sync"
author = "natsjs-sync maintainers"
release = __version__
version = __version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
nitpicky = False
exclude_patterns = ["_build"]
try:
    import furo  # noqa: F401

    html_theme = "furo"
except ImportError:  # the docs extra brings furo; plain sphinx falls back
    html_theme = "alabaster"
html_static_path = ["_static"]
# The page tables of contents list sections, not every class and method of the
# reference (the index page would otherwise be a list of exception classes).
toc_object_entries = False


def _plain_builtins(app: Any) -> None:
    """Type hints naming builtins (``bytes``, ``type``, ``id`` ...) stay plain text.

    Without an inventory of Python's own docs, Sphinx would resolve ``bytes``
    in a signature to any documented attribute named ``bytes``
    (``StreamState.bytes``) and warn that several targets match.
    """
    import builtins

    from docutils import nodes
    from sphinx.addnodes import pending_xref
    from sphinx.transforms.post_transforms import SphinxPostTransform

    names = set(dir(builtins))

    class PlainBuiltins(SphinxPostTransform):
        default_priority = 5  # before the references are resolved (10)

        def run(self, **kwargs: object) -> None:
            for node in list(self.document.findall(pending_xref)):
                if node.get("refdomain") == "py" and node.get("reftarget") in names:
                    node.replace_self(node.children or [nodes.literal(text=node["reftarget"])])

    app.add_post_transform(PlainBuiltins)


def setup(app: Any) -> None:
    _plain_builtins(app)
