"""Sphinx configuration for natsjs-sync."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

from natsjs_sync import __version__

project = "natsjs-sync"
author = "natsjs-sync maintainers"
release = __version__
version = __version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx", "sphinx.ext.viewcode",
              "natsjs_refs", "cli_reference"]
autodoc_member_order = "bysource"
# The Spark integration's modules import PySpark (and read data with pyarrow), which only the
# spark and test extras install: the reference is built from stand-ins for them, with or
# without them installed, so that every install that builds the docs builds the same pages.
autodoc_mock_imports = ["pyspark", "pyarrow"]
autodoc_typehints = "description"
napoleon_google_docstring = True
# No inventories of other projects: the docs build offline (CI has no network but the package
# index). Their names are listed in nitpick_ignore below instead.
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
# Every reference must resolve (the build runs with -n -W): a name of natsjs_sync's that points
# nowhere fails the build. natsjs_refs resolves the project's names by the object they name.
nitpicky = True
#: Names of Python and of other projects that the type hints and docstrings mention. Without an
#: intersphinx inventory (see above) they have no target here; they stay plain text.
nitpick_ignore = [
    # the standard library: abstract collections and callables in type hints
    *(("py:class", f"collections.abc.{name}") for name in
      ("Awaitable", "Callable", "Collection", "Iterable", "Iterator", "Mapping", "MutableMapping", "Sequence")),
    # the standard library: values the API takes or returns
    ("py:class", "datetime.datetime"),
    ("py:class", "os.PathLike"),
    ("py:class", "pathlib.Path"),
    ("py:class", "threading.Event"),
    ("py:class", "ssl.SSLContext"),
    ("py:class", "socket.socket"),
    ("py:func", "socket.create_connection"),
    ("py:class", "subprocess.Popen"),
    ("py:class", "concurrent.futures.Future"),
    ("py:class", "concurrent.futures.thread.ThreadPoolExecutor"),
    ("py:class", "concurrent.futures._base.Future"),  # Future's defining module, as typing names it
    # the standard library: exceptions the docs compare ours with or say are raised
    ("py:class", "ssl.SSLError"),
    ("py:class", "ssl.SSLCertVerificationError"),
    ("py:class", "asyncio.TimeoutError"),
    ("py:class", "concurrent.futures.TimeoutError"),
    ("py:exc", "subprocess.TimeoutExpired"),
    # PySpark: the Python data source API the Spark integration implements
    *(("py:class", f"pyspark.sql.datasource.{name}") for name in
      ("DataSourceReader", "DataSourceStreamReader", "DataSourceStreamWriter", "DataSourceWriter")),
    ("py:class", "pyspark.sql.types.StructType"),
    # Flask: the application the extension attaches to
    ("py:class", "flask.app.Flask"),
    # OpenTelemetry: the context and span the hooks of the instrumentor receive
    ("py:class", "opentelemetry.context.context.Context"),
    ("py:class", "opentelemetry.trace.span.Span"),
    ("py:class", "opentelemetry.metrics.MeterProvider"),
    ("py:class", "opentelemetry.metrics._internal.MeterProvider"),
]
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


def _prose_property_docstrings(app: Any) -> None:
    """A property's or an attribute's docstring is prose: its type comes from its annotation.

    Napoleon reads the first line of an attribute's docstring as ``type: description``, so
    ``"Seconds a value lives (0: for ever)."`` would render with the type "Seconds a value lives
    (0". An empty reST comment put first (before napoleon runs) is what napoleon takes as that
    line instead, and the docstring is parsed as written.
    """

    def process(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
        if what in ("property", "attribute") and lines and ":" in lines[0]:
            lines[:0] = ["..", ""]

    app.connect("autodoc-process-docstring", process, priority=400)  # napoleon's runs at 500


def setup(app: Any) -> None:
    _plain_builtins(app)
    _prose_property_docstrings(app)
