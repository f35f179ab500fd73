"""Sphinx extension: every reference to one of natsjs_sync's own names resolves.

The reference documents each object once, under the name users import it by
(``natsjs_sync.errors.TimeoutError``, ``natsjs_sync.jetstream.ClusterInfo``),
while docstrings and type hints name it as their module sees it
(``natsjs_sync.TimeoutError``, ``natsjs_sync.jetstream.stream_config.ClusterInfo``,
or a bare ``ClusterInfo`` imported for type checking only). So:

- a reference that Sphinx cannot resolve by its path is resolved by the object
  it names: the object is imported, and the reference goes to wherever that
  same object is documented;
- the type hints autodoc records are rewritten as users see them: the timeout
  parameters take ``float | None | USE_DEFAULT`` (the internal ``Deadline`` a
  compound call hands down is left out); a type variable is what it stands for
  in the class at hand (``replace() -> StreamConfig``, ``KeyWatcher.next() ->
  KeyValueEntry | None``) or, unbound, its plain name; a type alias is shown
  expanded; keyword arguments typed by a config's ``...Fields`` TypedDict show
  as that config;
- a class documented with an explicit empty signature (``.. autoclass:: X()``,
  for classes the library makes and users never construct) gets no parameter
  list from its internal constructor either;
- a class of the internals (in a private module, or private itself) that a
  public signature still shows is written as its name, without a link.

Anything else that is not documented stays unresolved, so the nitpicky build
(``-n -W``) reports it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import re
import sys
import typing
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

PROJECT = "natsjs_sync"
_NOT_FOUND = object()
#: Drops the union member it stands in (with its ``|``).
_DROP = "\x00drop\x00"
#: A dotted name, with Sphinx's ``~`` (show the last part only) kept.
_NAME = re.compile(r"~?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_UNPACK = re.compile(r"(?:~?typing\.)?Unpack\[\s*(~?[\w.]+)\s*\]")
_KEEP = frozenset(dir(builtins))

#: Names rendered as plain text: unbound type variables (``T``, ``F``).
_PLAIN: set[str] = set()


def _import(dotted: str) -> Any:
    """The object at ``dotted`` (a module, then attributes), or ``_NOT_FOUND``."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, _NOT_FOUND)
            if obj is _NOT_FOUND:
                return _NOT_FOUND
        return obj
    return _NOT_FOUND


def _project_names() -> dict[str, list[Any]]:
    """Every module-level name of the loaded natsjs_sync modules -> the distinct objects it names."""
    index: dict[str, list[Any]] = {}
    for modname, module in list(sys.modules.items()):
        if module is None or not (modname == PROJECT or modname.startswith(PROJECT + ".")):
            continue
        for name, value in list(vars(module).items()):
            found = index.setdefault(name, [])
            if not any(v is value for v in found):
                found.append(value)
    return index


@functools.cache
def _imported_names(modname: str) -> dict[str, str]:
    """The names ``modname`` imports anywhere (``if TYPE_CHECKING:`` blocks included) -> their dotted paths."""
    module = sys.modules.get(modname)
    try:
        tree = ast.parse(inspect.getsource(module)) if module is not None else None
    except (OSError, TypeError, SyntaxError):
        tree = None
    names: dict[str, str] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.ImportFrom):
            package = modname if getattr(module, "__path__", None) else modname.rpartition(".")[0]
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _lookup(name: str, context: Any) -> tuple[Any, Any]:
    """The object a name in a type hint means, and the module it was found in.

    ``name`` is dotted (imported as it is) or bare: looked up in ``context``'s
    module, then among the names it imports for type checking only (which are
    not in the module at run time), then among all the project's module-level
    names when exactly one object has it.
    """
    if "." in name:
        obj = _import(name)
        return obj, sys.modules.get(getattr(obj, "__module__", "") or "")
    module = context if inspect.ismodule(context) else sys.modules.get(getattr(context, "__module__", "") or "")
    if module is not None and name in vars(module):
        return vars(module)[name], module
    dotted = _imported_names(module.__name__).get(name) if module is not None else None
    if dotted:
        obj = _import(dotted)
        if obj is not _NOT_FOUND:
            return obj, sys.modules.get(getattr(obj, "__module__", "") or "")
    candidates = _project_names().get(name, [])
    if len(candidates) == 1:
        obj = candidates[0]
        return obj, sys.modules.get(getattr(obj, "__module__", "") or "")
    return _NOT_FOUND, None


def _qualified(obj: Any) -> str:
    return f"~{obj.__module__}.{obj.__qualname__}"  # ~: shown by its last name


def _bound_class(tv: Any) -> Any:
    bound = tv.__bound__
    if isinstance(bound, typing.ForwardRef):
        bound = vars(sys.modules[tv.__module__]).get(bound.__forward_arg__)
    return bound if inspect.isclass(bound) else None


def _type_var(tv: Any, owner: Any) -> str:
    """What the type variable ``tv`` stands for in the class ``owner`` (``None``: outside a class)."""
    if inspect.isclass(owner):
        for klass in owner.__mro__:  # a generic base made concrete: Watcher[KeyValueEntry]
            for base in getattr(klass, "__orig_bases__", ()):
                params = getattr(typing.get_origin(base), "__parameters__", ())
                arg = typing.get_args(base)[params.index(tv)] if tv in params else None
                if inspect.isclass(arg):
                    return _qualified(arg)
        bound = _bound_class(tv)
        if bound is not None and issubclass(owner, bound):  # self-typed: def replace(self: _M) -> _M
            return _qualified(owner)
    name: str = tv.__name__
    _PLAIN.add(name)
    return name


def _config_of(fields: Any) -> str | None:
    """The config class a ``...Fields`` TypedDict lists the fields of (its docstring names it)."""
    found = re.search(r":class:`~?([\w.]+)`", inspect.getdoc(fields) or "")
    return f"~{found.group(1)}" if found else None


def _is_alias(obj: Any) -> bool:
    return not inspect.isclass(obj) and (typing.get_origin(obj) is not None or isinstance(obj, typing.ForwardRef))


def public_annotation(text: str, context: Any, owner: Any, depth: int = 0) -> str:
    """A recorded type hint rewritten with the names users see (see the module docstring)."""
    from sphinx.util.typing import stringify_annotation

    if depth > 5:
        return text

    def unpack(m: re.Match[str]) -> str:
        fields, _ = _lookup(m.group(1).lstrip("~"), context)
        config = _config_of(fields) if inspect.isclass(fields) and typing.is_typeddict(fields) else None
        return config or m.group(0)

    def name(m: re.Match[str]) -> str:
        token = m.group(0)
        bare = token.lstrip("~")
        if bare in _KEEP or not (bare.startswith(PROJECT + ".") or "." not in bare):
            return token
        obj, home = _lookup(bare, context)
        if obj is _NOT_FOUND:
            return token
        if inspect.isclass(obj) and obj.__module__ == f"{PROJECT}._timeout":
            if obj.__name__ == "_UseDefault":
                return f"~{PROJECT}.USE_DEFAULT"
            if obj.__name__ == "Deadline":
                return _DROP
        if isinstance(obj, typing.TypeVar):
            return _type_var(obj, owner)
        if _is_alias(obj):
            expanded = stringify_annotation(obj, "smart")
            return public_annotation(expanded, home or context, owner, depth + 1)
        if inspect.isclass(obj) and "." not in bare:
            return _qualified(obj)
        return token

    out = _NAME.sub(name, _UNPACK.sub(unpack, text))
    out = re.sub(rf"\s*\|\s*{_DROP}|{_DROP}\s*\|\s*", "", out)
    return out.replace(_DROP, f"~{PROJECT}._timeout.Deadline")  # not in a union: an internal parameter


def _owner(what: str, name: str) -> Any:
    if what in ("class", "exception"):
        return _import(name)
    owner = _import(name.rpartition(".")[0])
    return owner if inspect.isclass(owner) else None


def _rewrite_recorded(app: Sphinx, what: str, name: str, obj: Any, options: Any, args: str | None,
                      retann: str | None) -> tuple[str, str] | None:
    """After autodoc recorded ``obj``'s type hints: put them in users' names."""
    document = getattr(app.env, "current_document", None)  # Sphinx 8.2+; before, temp_data
    store = document.autodoc_annotations if document is not None else app.env.temp_data.get("annotations")
    recorded: dict[str, str] = (store or {}).get(name, {})
    if what in ("class", "exception") and args == "()":
        recorded.clear()  # an explicit empty signature: the constructor is the library's own
    owner = _owner(what, name)
    context = obj if inspect.ismodule(obj) else sys.modules.get(getattr(obj, "__module__", "") or "")
    for key, hint in list(recorded.items()):
        recorded[key] = public_annotation(hint, context, owner)
    if retann:
        public = public_annotation(retann, context, owner)
        if public != retann:
            return args or "", public
    return None


#: (the domain's identity, its number of objects) -> id(object) -> the name it is documented under.
_documented_cache: dict[tuple[int, int], dict[int, str]] = {}


def _documented(env: BuildEnvironment) -> dict[int, str]:
    """id(object) -> the name it is documented under, for the project's classes, functions,
    properties and modules (the documented objects are known once every page is read)."""
    domain: Any = env.get_domain("py")
    key = (id(domain), len(domain.objects))
    if key not in _documented_cache:
        _documented_cache.clear()
        index: dict[int, str] = {}
        # An alias entry (a second path to a documented object) never takes the place of the entry.
        for fullname, entry in sorted(domain.objects.items(), key=lambda item: bool(item[1].aliased)):
            obj = _import(fullname) if fullname.startswith(PROJECT) and not entry.aliased else _NOT_FOUND
            if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj) or isinstance(obj, property):
                index.setdefault(id(obj), fullname)
        _documented_cache[key] = index
    return _documented_cache[key]


def _candidates(target: str, node: Any) -> list[Any]:
    """The objects ``target`` may name where the reference stands (its module's, its class's)."""
    target = target.lstrip("~.")
    module, klass = node.get("py:module"), node.get("py:class")
    paths = [target] if target.startswith(PROJECT) else []
    if module:
        if klass:
            paths.append(f"{module}.{klass}.{target}")
        paths.append(f"{module}.{target}")
    found = [obj for obj in map(_import, paths) if obj is not _NOT_FOUND]
    if "." not in target and module:  # a bare name: as the defining module of the class at hand sees it
        context = _import(f"{module}.{klass}") if klass else _import(module)
        obj, _ = _lookup(target, context) if context is not _NOT_FOUND else (_NOT_FOUND, None)
        if obj is not _NOT_FOUND:
            found.append(obj)
    return found


def _resolve(app: Sphinx, env: BuildEnvironment, node: Any, contnode: nodes.Element) -> nodes.Element | None:
    """A reference Sphinx could not resolve by its path: resolve it by the object it names."""
    if node.get("refdomain") != "py":
        return None
    target: str = node["reftarget"]
    if target in _PLAIN:
        return contnode
    documented = _documented(env)
    for obj in _candidates(target, node):
        if isinstance(obj, typing.TypeVar):
            return contnode
        fullname = documented.get(id(obj))
        if fullname is not None:
            domain: Any = env.get_domain("py")
            return domain.resolve_xref(env, node.get("refdoc", ""), app.builder, "obj", fullname, node,
                                       contnode)
        if _internal(obj):
            return contnode  # the machinery's own (``_core``, ``_Token``): a name, not a page
    return None


def _internal(obj: Any) -> bool:
    """Whether ``obj`` is a class of the library's internals: defined in a private module or itself
    private. A public signature may show one (``Subscription.lane``); it has no page to link to."""
    if not inspect.isclass(obj) or not obj.__module__.startswith(PROJECT):
        return False
    return any(part.startswith("_") for part in (*obj.__module__.split("."), obj.__name__))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-signature", _rewrite_recorded, priority=600)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
