"""Progress bars nest (a step around a bar) without two live displays."""

from __future__ import annotations

import io

from rich.console import Console

from gate.progress import NullProgress, RichProgress


def test_rich_progress_nests_steps_and_bars() -> None:
    buffer = io.StringIO()
    progress = RichProgress(Console(file=buffer, force_terminal=True, width=100))
    with progress.step("audit disclosure"):
        with progress.step("loading"):
            loaded = True
        assert list(progress.track(range(5), total=5, description="n-grams")) == [0, 1, 2, 3, 4]
    with progress.step("again"):  # the display restarts cleanly after it stopped
        restarted = True
    assert loaded and restarted
    assert "n-grams" in buffer.getvalue()


def test_null_progress_passes_items_through() -> None:
    progress = NullProgress()
    with progress.step("x"):
        assert list(progress.track([1, 2], total=2, description="y")) == [1, 2]
