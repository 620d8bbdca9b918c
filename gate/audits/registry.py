"""Registry of audits. Built-in audits register when their module is imported; the
registry imports them lazily so that heavy dependencies load only when a policy needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from gate.audits.base import Audit
from gate.errors import AuditError

_AUDITS: dict[str, type[Audit]] = {}

# Audits that ship with gate: name -> module that registers it.
BUILTIN_AUDITS: dict[str, str] = {
    "disclosure": "gate.audits.disclosure",
    "membership": "gate.audits.membership",
}


def register_audit(name: str) -> Callable[[type[Audit]], type[Audit]]:
    def decorate(cls: type[Audit]) -> type[Audit]:
        if name in _AUDITS and _AUDITS[name] is not cls:
            raise ValueError(f"an audit named {name!r} is already registered")
        cls.name = name
        _AUDITS[name] = cls
        return cls

    return decorate


class AuditUnavailableError(AuditError):
    """The policy asks for an audit this installation cannot run (never a pass)."""


def create_audit(name: str) -> Audit:
    if name not in _AUDITS and name in BUILTIN_AUDITS:
        try:
            importlib.import_module(BUILTIN_AUDITS[name])
        except ImportError as exc:
            raise AuditUnavailableError(
                f"audit {name!r} needs a package that is not installed: {exc}. "
                "Install the extra it needs (see the README)"
            ) from exc
    if name not in _AUDITS:
        raise AuditUnavailableError(
            f"audit {name!r} is not available in this version of gate "
            f"(available: {sorted(set(_AUDITS) | set(BUILTIN_AUDITS)) or 'none'})"
        )
    return _AUDITS[name]()


def available_audits() -> list[str]:
    return sorted(set(_AUDITS) | set(BUILTIN_AUDITS))
