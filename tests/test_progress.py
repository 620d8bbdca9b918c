"""Progress bars nest (a step around a bar) in one live display that stops when the
outermost step ends, and leaves no task behind."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gate.progress import NullProgress, RichProgress


def test_rich_progress_nests_steps_and_bars_in_one_display() -> None:
    buffer = io.StringIO()
    progress = RichProgress(Console(file=buffer, force_terminal=True, width=100))
    bars = progress._bars
    with progress.step("audit disclosure"):
        assert bars.live.is_started
        with progress.step("loading"):
            assert [t.description for t in bars.tasks] == ["audit disclosure", "loading"]
        assert list(progress.track(range(5), total=5, description="n-grams")) == [0, 1, 2, 3, 4]
    assert not bars.live.is_started and bars.tasks == []
    with progress.step("again"):  # the display restarts after it stopped
        assert bars.live.is_started
    assert not bars.live.is_started
    shown = buffer.getvalue()
    assert "audit disclosure" in shown and "n-grams" in shown


def test_a_failing_step_stops_the_display() -> None:
    progress = RichProgress(Console(file=io.StringIO(), force_terminal=True))
    with pytest.raises(RuntimeError), progress.step("audit"):
        raise RuntimeError("boom")
    assert not progress._bars.live.is_started and progress._bars.tasks == []


def test_null_progress_passes_items_through() -> None:
    progress = NullProgress()
    with progress.step("x"):
        assert list(progress.track(iter([1, 2]), total=2, description="y")) == [1, 2]
