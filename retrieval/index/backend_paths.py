"""Backends named by a setting: a short alias from a table, or any dotted import path.

The answerer (`LODE_ANSWERER`), the entailment scorer (`LODE_ENTAILMENT`) and the lexical
backend (`LODE_LEXICAL_BACKEND`) are each resolved here, so a new backend is a class or
module named in the environment, not an edit to an if-chain. Each owner keeps one table of
its short names (the values those settings have always taken) and the Protocol its backends
satisfy; the system checks (`retrieval/web/backend_checks.py`) resolve every setting at
start-up, so a path that does not import, or names something that lacks what the Protocol
asks for, stops `manage.py check` with the setting's name instead of failing a request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any, get_protocol_members

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string


class BackendPathError(ImproperlyConfigured, ValueError):
    """A setting names a backend that does not import or does not fit its Protocol; str() says
    which setting, what it named and what to use instead."""


def dotted_path(setting: str, value: str, aliases: Mapping[str, str], kind: str) -> str:
    """The import path `value` stands for: its entry in `aliases`, else `value` itself when it
    is dotted. Raises BackendPathError for an unknown short name (`kind` names the backend)."""
    value = value.strip()
    if value in aliases:
        return aliases[value]
    if "." not in value:
        raise BackendPathError(
            f"{setting}={value!r}: unknown {kind} backend; use one of "
            f"{', '.join(sorted(aliases))} or a dotted import path"
        )
    return value


def load_object(setting: str, value: str, aliases: Mapping[str, str], kind: str) -> Any:
    """The class or factory `value` names (`django.utils.module_loading.import_string`)."""
    path = dotted_path(setting, value, aliases, kind)
    try:
        return import_string(path)
    except ImportError as exc:
        raise BackendPathError(f"{setting}={value!r}: {path} does not import ({exc})") from None


def load_module(setting: str, value: str, aliases: Mapping[str, str], kind: str) -> ModuleType:
    """The module `value` names (a backend that is a module of functions)."""
    path = dotted_path(setting, value, aliases, kind)
    try:
        return import_module(path)
    except ImportError as exc:
        raise BackendPathError(f"{setting}={value!r}: {path} does not import ({exc})") from None


def protocol_members(protocol: type) -> frozenset[str]:
    """The attributes and methods a `typing.Protocol` declares."""
    return frozenset(get_protocol_members(protocol))


def require_members(setting: str, value: str, backend: object, members: Iterable[str]) -> None:
    """Raise BackendPathError naming what `backend` (built from `value`) lacks of `members`."""
    missing = sorted(name for name in members if not hasattr(backend, name))
    if missing:
        what = backend.__name__ if isinstance(backend, ModuleType) else type(backend).__name__
        raise BackendPathError(f"{setting}={value!r}: {what} lacks {', '.join(missing)}")


def build_backend(
    setting: str,
    value: str,
    aliases: Mapping[str, str],
    protocol: type,
    *,
    kind: str,
    **arguments: Any,
) -> Any:
    """Call the class or factory `value` names with `arguments` and return what it builds,
    which must have every member of `protocol`; raises BackendPathError otherwise."""
    factory = load_object(setting, value, aliases, kind)
    try:
        backend = factory(**arguments)
    except TypeError as exc:
        given = ", ".join(f"{name}=" for name in arguments) or "no arguments"
        raise BackendPathError(
            f"{setting}={value!r}: {getattr(factory, '__name__', factory)!s} cannot be called "
            f"with {given} ({exc})"
        ) from None
    require_members(setting, value, backend, protocol_members(protocol))
    return backend
