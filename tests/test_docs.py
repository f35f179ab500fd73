"""The Sphinx docs build nitpicky with warnings as errors (``-n -W``: every
reference must resolve, so a name that renders as plain text instead of a link
fails CI), and the built reference documents every public name, method,
property and field: autodoc's ``:members:`` silently drops what has no
docstring. The command line reference is generated from the parser."""

from __future__ import annotations

import enum
import html
import importlib
import inspect
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import msgspec
import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PUBLIC_MODULES = ["natsjs_sync", "natsjs_sync.jetstream", "natsjs_sync.micro", "natsjs_sync.spark",
                  "natsjs_sync.codecs", "natsjs_sync.testing", "natsjs_sync.health", "natsjs_sync.natscontext",
                  "natsjs_sync.contrib.process", "natsjs_sync.contrib.flask", "natsjs_sync.contrib.django",
                  "natsjs_sync.contrib.asgi", "natsjs_sync.advisories"]
NOT_DOCUMENTED = {"__version__", "USE_DEFAULT"}

#: The Sphinx build (the module's fixture) takes about a minute on 2 idle cores and
#: several on a loaded machine: the suite's 120 s per test would cut it, not a hang.
pytestmark = pytest.mark.timeout(600)


#: What the spark and test extras install and the others (test-core, docs) do not.
SPARK_ONLY = ("pyspark", "pyarrow")


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], pathlib.Path]:
    # A subprocess: pytest's warning filters would turn Sphinx's own internal
    # deprecation warnings into errors; -W still fails on any docs warning.
    # Built as the test-core and docs extras build it, without PySpark and pyarrow (packages of
    # those names that refuse to import come first on the path), whether or not they are installed.
    base = tmp_path_factory.mktemp("docs")
    out, hidden = base / "html", base / "hidden"
    for name in SPARK_ONLY:
        (hidden / name).mkdir(parents=True)
        (hidden / name / "__init__.py").write_text(f"raise ModuleNotFoundError('not installed here', name={name!r})\n")
    path = os.pathsep.join(p for p in (str(hidden), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )
    return proc, out


def _public_object(mod: Any, name: str) -> Any:
    """``mod.name``; a name that needs PySpark (``spark.JetStreamDataSource``) is imported with
    Sphinx's stand-ins for it when it is not installed, as the docs build imports it, and the
    modules imported so are forgotten after (a later import finds PySpark missing, as it is)."""
    try:
        return getattr(mod, name)
    except ImportError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in SPARK_ONLY:
            raise
    from sphinx.ext.autodoc.mock import mock

    before = set(sys.modules)
    try:
        with mock(list(SPARK_ONLY)):
            return getattr(mod, name)
    finally:
        for module in set(sys.modules) - before:
            del sys.modules[module]


def test_docs_build_without_warnings(built_docs: tuple[subprocess.CompletedProcess[str], pathlib.Path]) -> None:
    proc, out = built_docs
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "index.html").exists()


def _public_members(cls: type) -> list[str]:
    """Methods and properties a user sees on ``cls`` (its own and its natsjs_sync bases')."""
    names: dict[str, None] = {}
    for base in reversed(cls.__mro__):
        if not base.__module__.startswith("natsjs_sync"):
            continue
        for name, member in vars(base).items():
            if name.startswith("_"):
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if inspect.isfunction(member) or isinstance(member, property):
                names[name] = None
    return list(names)


def _fields(cls: type) -> list[str]:
    """The fields a struct declares itself (a base struct documents its own)."""
    inherited: set[str] = set()
    for base in cls.__mro__[1:]:
        fields = getattr(base, "__struct_fields__", ())
        if isinstance(fields, tuple):
            inherited.update(fields)
    return [f for f in getattr(cls, "__struct_fields__", ()) if f != "unknown_fields" and f not in inherited]


def _required() -> list[tuple[set[str], Any, list[str]]]:
    """(the paths an object may be documented under, the object, the member names it must show)."""
    by_id: dict[int, tuple[set[str], Any]] = {}
    for module in PUBLIC_MODULES:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            if name in NOT_DOCUMENTED:
                continue
            obj = _public_object(mod, name)
            paths, _ = by_id.setdefault(id(obj), (set(), obj))
            paths.add(f"{module}.{name}")
            if hasattr(obj, "__qualname__"):
                paths.add(f"{obj.__module__}.{obj.__qualname__}")
    out = []
    for paths, obj in by_id.values():
        members: list[str] = []
        if inspect.isclass(obj) and not issubclass(obj, (BaseException, enum.Enum)):
            members = _public_members(obj)
            if issubclass(obj, msgspec.Struct):
                members += _fields(obj)
        out.append((paths, obj, members))
    return out


def test_every_public_name_and_member_is_on_the_built_reference(
        built_docs: tuple[subprocess.CompletedProcess[str], pathlib.Path]) -> None:
    _, out = built_docs
    ids = set()
    for page in out.glob("*.html"):
        ids.update(re.findall(r'id="(natsjs_sync\.[^"]+)"', page.read_text()))
    missing = []
    for paths, _obj, members in _required():
        found = sorted(paths & ids)
        if not found:
            missing.append(min(paths))
            continue
        missing += [f"{found[0]}.{m}" for m in members if f"{found[0]}.{m}" not in ids]
    assert not missing, f"{len(missing)} public names missing from the built reference: {missing}"


def test_every_public_name_has_a_docstring() -> None:
    undocumented = []
    for paths, obj, members in _required():
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not obj.__module__.startswith("natsjs_sync"):
            continue  # constants and type aliases: the reference shows their values
        doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
        if not (doc or "").strip():
            undocumented.append(min(paths))
        for m in members:
            if m in _fields(obj):
                continue  # fields are described in the class's Attributes section
            attr = inspect.getattr_static(obj, m)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if not (getattr(attr, "__doc__", None) or "").strip():
                undocumented.append(f"{min(paths)}.{m}")
    assert not undocumented, f"{len(undocumented)} public names without a docstring: {undocumented}"


def _text(html_fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", html_fragment))


def test_public_signatures_show_no_private_types(
        built_docs: tuple[subprocess.CompletedProcess[str], pathlib.Path]) -> None:
    _, out = built_docs
    text = _text((out / "api.html").read_text())
    for private in ("_UseDefault", "TimeoutArg", "stream_config._M", "| Deadline", "ConsumerConfigFields"):
        assert private not in text, private
    # what they became: the public sentinel, the class itself, the config whose fields the keywords are
    assert "timeout (float | None | USE_DEFAULT)" in text
    page = (out / "api.html").read_text()
    replace = _text(page[page.index('id="natsjs_sync.jetstream.StreamConfig.replace"'):][:3000])
    assert "Return type:\nStreamConfig\n" in re.sub(r"\n\s*", "\n", replace)
    assert "kwargs (ConsumerConfig)" in text


def test_properties_render_their_docstring_as_written(
        built_docs: tuple[subprocess.CompletedProcess[str], pathlib.Path]) -> None:
    # Napoleon took "Seconds a value lives (0: for ever)" as "type: description". A property's type is
    # in its signature line: a "Type:" field under it can only be such a misreading.
    _, out = built_docs
    misread = []
    for page in out.glob("*.html"):
        for block in re.findall(r'<dl class="py property">(.*?)</dd>', page.read_text(), re.S):
            if re.search(r">Type<span class=\"colon\">", block):
                misread.append(_text(block).split("\n", 2)[1][:80])
    assert not misread, misread
    text = _text((out / "api.html").read_text())
    assert "Seconds a value or object is kept (0: for ever)." in text


def _cli_parsers() -> list[Any]:
    import argparse

    from natsjs_sync.cli import build_parser

    found, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def test_the_command_line_reference_has_every_command_and_option(
        built_docs: tuple[subprocess.CompletedProcess[str], pathlib.Path]) -> None:
    _, out = built_docs
    page = _text((out / "cli.html").read_text())
    missing = []
    for parser in _cli_parsers():
        if f"usage: {parser.prog} " not in page:
            missing.append(parser.prog)
        missing += [f"{parser.prog} {flag}" for action in parser._actions for flag in action.option_strings
                    if flag not in page]
    assert not missing, missing
