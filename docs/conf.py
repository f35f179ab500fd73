"""Sphinx configuration for natsjs-sync."""

from __future__ import annotations

import os
import sys

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
