"""The Sphinx docs build with warnings as errors (broken references fail CI),
and the built reference documents every public name, method, property and
field: autodoc's ``:members:`` silently drops what has no docstring."""

from __future__ import annotations

import enum
import importlib
import inspect
import pathlib
import re
import subprocess
import sys
from typing import Any

import msgspec
import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PUBLIC_MODULES = ["natsjs_sync", "natsjs_sync.jetstream", "natsjs_sync.micro", "natsjs_sync.spark",
                  "natsjs_sync.testing", "natsjs_sync.health", "natsjs_sync.natscontext",
                  "natsjs_sync.contrib.process", "natsjs_sync.contrib.flask", "natsjs_sync.contrib.django"]
NOT_DOCUMENTED = {"__version__", "USE_DEFAULT"}


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], pathlib.Path]:
    # A subprocess: pytest's warning filters would turn Sphinx's own internal
    # deprecation warnings into errors; -W still fails on any docs warning.
    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, out


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
            obj = getattr(mod, name)
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
