"""Progress reporting for long steps: rich bars on stderr, or nothing (``--quiet``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeVar

T = TypeVar("T")


class Progress(Protocol):
    def track(self, items: Iterable[T], *, total: int | None, description: str) -> Iterator[T]:
        """Yield ``items`` while showing a bar."""
        ...

    def step(self, description: str) -> AbstractContextManager[None]:
        """Show a spinner while a step of unknown length runs."""
        ...


class NullProgress:
    def track(self, items: Iterable[T], *, total: int | None, description: str) -> Iterator[T]:
        yield from items

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        yield


class RichProgress:
    """Bars on stderr so that stdout stays the verdict."""

    def __init__(self) -> None:
        from rich.console import Console

        self._console = Console(stderr=True)

    def track(self, items: Iterable[T], *, total: int | None, description: str) -> Iterator[T]:
        from rich.progress import track

        yield from track(
            items, total=total, description=description, console=self._console, transient=True
        )

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        with self._console.status(description):
            yield
