"""Progress reporting for long steps: rich bars on stderr, or nothing (``--quiet``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

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
    """One rich live display on stderr (stdout stays the verdict); steps and bars nest as
    tasks of it, since rich allows a single live display at a time."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichBars

        self._bars = RichBars(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=True,
        )
        self._depth = 0

    @contextmanager
    def _live(self) -> Iterator[None]:
        if self._depth == 0:
            self._bars.start()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._bars.stop()

    def track(self, items: Iterable[T], *, total: int | None, description: str) -> Iterator[T]:
        with self._live():
            task = self._bars.add_task(description, total=total)
            try:
                for item in items:
                    yield item
                    self._bars.advance(task)
            finally:
                self._bars.remove_task(task)

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        with self._live():
            task = self._bars.add_task(description, total=None)
            try:
                yield
            finally:
                self._bars.remove_task(task)
