"""One plug-in mechanism for every pluggable part of the gate.

A :class:`Registry` maps names to plug-ins (audit classes, disclosure classes, membership
scorers; later generators and engines). Three ways in, all ending in the same table:

* built-ins: ``name -> module`` imported lazily on first use, so that heavy optional
  dependencies load only when a policy asks for them;
* in-process: the :meth:`Registry.register` decorator;
* third-party packages: a Python entry point in the registry's group (for example
  ``[project.entry-points."gate.audits"] copies = "my_pkg.audit:CopiesAudit"``).

A name that cannot be loaded raises :class:`PluginUnavailableError` naming the plug-in,
what failed and what is available: an unavailable plug-in is never silently skipped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from gate.errors import AuditError, missing_dependency_message

T = TypeVar("T")


class PluginUnavailableError(AuditError):
    """A policy names a plug-in this installation cannot load (exit 3, never a pass)."""


class Registry(Generic[T]):
    """Named plug-ins of one kind.

    Args:
        kind: what the plug-ins are, for messages ("audit", "disclosure class").
        group: the entry-point group third-party packages register under.
        builtins: name -> module that registers the built-in plug-in when imported.
    """

    def __init__(self, kind: str, *, group: str, builtins: Mapping[str, str]) -> None:
        self.kind = kind
        self.group = group
        self._builtins = dict(builtins)
        self._loaded: dict[str, T] = {}
        self._entry_points_checked: set[str] = set()

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (one name, one plug-in)."""

        def decorate(obj: T) -> T:
            known = self._loaded.get(name)
            if known is not None and known is not obj:
                raise ValueError(f"a {self.kind} named {name!r} is already registered")
            declared = getattr(obj, "name", name)
            if declared != name:
                raise ValueError(
                    f"{self.kind} {obj!r} declares name {declared!r} but is registered as "
                    f"{name!r}; the two must agree"
                )
            self._loaded[name] = obj
            return obj

        return decorate

    def _entry_points(self) -> dict[str, list[EntryPoint]]:
        found: dict[str, list[EntryPoint]] = {}
        for ep in entry_points(group=self.group):
            found.setdefault(ep.name, []).append(ep)
        return found

    def names(self) -> list[str]:
        """Every name this installation knows (built-in, registered or an entry point),
        without importing any of them."""
        return sorted(set(self._loaded) | set(self._builtins) | set(self._entry_points()))

    def _checked_entry_points(self, name: str) -> list[EntryPoint]:
        """The entry points registering ``name``, refused when they clash with a built-in
        or with each other. Checked on every name's first use, also when the plug-in is
        already loaded (a built-in module registers several names at once: without the
        check a clashing plug-in would be ignored once its built-in namesake was loaded)."""
        entries = self._entry_points().get(name, [])
        if name in self._builtins and entries:
            raise PluginUnavailableError(
                f"{self.kind} {name!r}: the entry point {entries[0].value!r} in group "
                f"{self.group!r} uses the name of a built-in {self.kind}; rename the plug-in"
            )
        if len({ep.value for ep in entries}) > 1:
            raise PluginUnavailableError(
                f"{self.kind} {name!r} is registered by several entry points in group "
                f"{self.group!r} ({', '.join(sorted(ep.value for ep in entries))}); "
                "uninstall all but one"
            )
        self._entry_points_checked.add(name)
        return entries

    def get(self, name: str) -> T:
        """The plug-in called ``name``, importing it on first use.

        Raises:
            PluginUnavailableError: no such plug-in, or its package failed to import.
        """
        if name in self._loaded and name in self._entry_points_checked:
            return self._loaded[name]
        entries = self._checked_entry_points(name)
        if name in self._loaded:
            return self._loaded[name]
        if name in self._builtins:
            try:
                importlib.import_module(self._builtins[name])
            except ImportError as exc:
                raise PluginUnavailableError(
                    missing_dependency_message(exc, needed_by=f"{self.kind} {name!r}")
                ) from exc
        elif entries:
            entry = entries[0]
            try:
                loaded = entry.load()
                self.register(name)(loaded)
            except Exception as exc:
                raise PluginUnavailableError(
                    f"{self.kind} {name!r} (entry point {entry.value!r} in group "
                    f"{self.group!r}) failed to load: {type(exc).__name__}: {exc}"
                ) from exc
        if name not in self._loaded:
            raise PluginUnavailableError(
                f"{self.kind} {name!r} is not available in this installation "
                f"(available: {', '.join(self.names()) or 'none'})"
            )
        return self._loaded[name]
