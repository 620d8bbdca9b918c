"""Keep optional packages a library would import, but the gate does not use, out of an
import (the ``sys.modules[name] = None`` protocol: ``import name`` raises ImportError, as
if the package were not installed)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def imports_blocked(modules: Sequence[str]) -> Iterator[None]:
    """While open, importing any of ``modules`` that is not imported yet raises
    ImportError; afterwards each imports normally. Meant for libraries that guard an
    optional dependency with ``try: import … except ImportError`` (Presidio and torch,
    Great Expectations and PySpark).

    Two consequences to keep in mind: a library imported inside the block may remember
    for the life of the process that the module is missing (spaCy's thinc does, for
    torch); and the block is process-wide, so another thread importing one of the modules
    while it is open fails (the gate opens it before its first PII analyzer and its first
    validation, before any MLflow logging)."""
    blocked = [m for m in modules if m not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
