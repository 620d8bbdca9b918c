"""Seeds of random streams: children of a seed sequence, never offsets of the seed."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from gate.generators.base import GeneratorStream, generator_stream_seed
from gate.remediation.loop import round_seed
from gate.seeds import stream_seed

from .conftest import REPO


def test_a_stream_seed_is_the_first_word_of_the_child_seed_sequence() -> None:
    child = np.random.SeedSequence(7, spawn_key=(2,))
    assert stream_seed(7, 2) == int(child.generate_state(1)[0])
    assert stream_seed(7, 5, 3) == int(
        np.random.SeedSequence(7, spawn_key=(5, 3)).generate_state(1)[0]
    )


def test_neighbouring_seeds_share_no_stream() -> None:
    """With offsets, stream 1 of seed s was stream 0 of seed s + 1; children never meet."""
    seeds = {
        generator_stream_seed(seed, stream) for seed in range(500) for stream in GeneratorStream
    }
    assert len(seeds) == 500 * len(GeneratorStream)
    offsets = {seed + stream for seed in range(500) for stream in GeneratorStream}
    assert len(offsets) < 500 * len(GeneratorStream)  # what the offsets gave


def test_keys_of_different_lengths_are_different_streams() -> None:
    assert stream_seed(3, 1) != stream_seed(3, 1, 0)
    assert stream_seed(3, 5, 0) != stream_seed(3, 5, 1)


def test_round_seeds_are_streams_of_the_run_seed() -> None:
    seed, record = round_seed(11, 2)
    assert seed == stream_seed(11, 2)
    assert record == {"entropy": 11, "spawn_key": [2]}


@pytest.mark.parametrize(
    ("seed", "key", "message"),
    [
        (-1, (0,), "seed must be >= 0; found -1"),
        (1, (), "at least one integer; found none"),
        (1, (0, -2), r"entries must be >= 0; found \(0, -2\)"),
    ],
)
def test_bad_seeds_and_keys_are_refused(seed: int, key: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stream_seed(seed, *key)


def test_no_seed_in_the_product_is_an_offset_of_another() -> None:
    """``seed + k`` (or ``k + seed``) anywhere in gate/ would bring overlapping streams back."""
    offsets = []
    for path in sorted((REPO / "gate").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                names = [
                    side.id if isinstance(side, ast.Name) else getattr(side, "attr", "")
                    for side in (node.left, node.right)
                ]
                if any("seed" in name for name in names):
                    offsets.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offsets == []
