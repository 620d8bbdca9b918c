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
    Great Expectations and PySpark)."""
    blocked = [m for m in modules if m not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
