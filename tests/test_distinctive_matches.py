"""Release matches that other users' records do not explain
(gate/features/distinctive_matches.py), on hand-made unit vectors."""

from __future__ import annotations

import numpy as np

from gate.features.distinctive_matches import distinctive_matches
from gate.features.embeddings import knn_search


def _search(queries: np.ndarray, base: np.ndarray, width: int):
    return knn_search(queries, base, k=width, method="exact")


def _unit(*rows: list[float]) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _matches(source, owner, users, release, release_owner, threshold=0.9):
    return distinctive_matches(
        source_windows=source,
        source_owner=np.asarray(owner),
        source_users=np.asarray(users),
        release_windows=release,
        release_owner=np.asarray(release_owner),
        threshold=threshold,
        search=_search,
    )


def test_a_copy_matches_and_a_copy_of_a_neighbour_is_explained() -> None:
    """Records 0 and 1 (users 0, 1) are 0.95-similar; record 2 (user 2) stands apart.
    Release: a copy of record 0. Record 0 is matched (1.0 > 0.95); record 1 is reached at
    0.95 >= 0.9 but no nearer than record 0 itself: explained; record 2 is not reached."""
    c = 0.95
    source = _unit([1, 0, 0], [c, np.sqrt(1 - c * c), 0], [0, 0, 1])
    found = _matches(source, [0, 1, 2], [0, 1, 2], source[:1], [0])
    assert found.matched.tolist() == [True, False, False]
    assert found.explained.tolist() == [False, True, False]
    assert found.release.tolist() == [0, -1, -1]
    assert found.similarity[0] == np.float32(1.0) and np.isnan(found.similarity[1:]).all()


def test_a_window_every_user_shares_matches_nothing_and_an_own_window_matches() -> None:
    """Each record: an own window and one shared window (a quoted newsletter). A release
    of the shared window alone matches no record; one that copies record 1's own window
    matches record 1 only."""
    own = np.eye(4, dtype=np.float32)[:3]
    shared = np.eye(4, dtype=np.float32)[3:]
    source = np.concatenate([own[0:1], shared, own[1:2], shared, own[2:3], shared])
    owner = [0, 0, 1, 1, 2, 2]
    found = _matches(source, owner, [0, 1, 2], shared, [0])
    assert not found.matched.any() and found.explained.all()
    found = _matches(source, owner, [0, 1, 2], np.concatenate([shared, own[1:2]]), [0, 0])
    assert found.matched.tolist() == [False, True, False]
    assert found.release.tolist() == [-1, 0, -1]


def test_a_user_s_own_duplicates_do_not_explain_a_copy() -> None:
    """User 0 wrote records 0 and 1 alike; a copy of them is nearer to both than user 1's
    record is. Had the user's own duplicate counted as another record, neither matched."""
    source = _unit([1, 0, 0], [1, 0, 0], [0.5, 0.8660254, 0])
    found = _matches(source, [0, 1, 2], [0, 0, 1], source[:1], [0])
    assert found.matched.tolist() == [True, True, False]


def test_the_threshold_holds_within_float32_rounding() -> None:
    """A copy's float32 cosine can fall short of 1 by about 1e-7: at threshold 1 it matches;
    a release 0.999-similar does not."""
    source = _unit([1, 2, 3], [-3, 0, 1])
    copy = (source[:1] * np.float32(1 - 1e-7)).astype(np.float32)
    assert _matches(source, [0, 1], [0, 1], copy, [0], threshold=1.0).matched.tolist() == [
        True,
        False,
    ]
    near = _unit([1, 2, 3.1])
    assert not _matches(source, [0, 1], [0, 1], near, [0], threshold=1.0).matched.any()


def test_when_every_neighbour_searched_is_the_user_s_own_the_farthest_stands_in(
    monkeypatch,
) -> None:
    """With one neighbour searched besides itself and it the user's own (cosine 0.97),
    a match must beat 0.97: 0.98 does, 0.96 does not."""
    import gate.features.distinctive_matches as module

    monkeypatch.setattr(module, "OTHER_USER_NEIGHBOURS", 2)
    a = np.array([1, 0, 0], np.float32)
    b = _unit([0.97, np.sqrt(1 - 0.97**2), 0])[0]
    far = _unit([0, 0, 1])[0]
    source = np.stack([a, b, far])
    for similarity, expected in ((0.98, True), (0.96, False)):
        release = _unit([similarity, -np.sqrt(1 - similarity**2), 0])
        found = _matches(source, [0, 1, 2], [0, 0, 1], release, [0], threshold=0.9)
        assert found.matched[0] == expected


def test_a_message_sent_more_often_than_the_neighbours_searched_is_still_matched() -> None:
    """A review: user 0 sent one message 40 times; its 32 nearest windows were all its
    own copies, the farthest of them (cosine 1) stood in for another user, and a verbatim
    copy never beat it. Identical windows of one user are searched once now."""
    rng = np.random.default_rng(5)
    others = rng.normal(size=(50, 16)).astype(np.float32)
    message = rng.normal(size=(1, 16)).astype(np.float32)
    source = np.concatenate([np.repeat(message, 40, axis=0), others])
    source /= np.linalg.norm(source, axis=1, keepdims=True)
    users = np.concatenate([np.zeros(40, np.int64), np.arange(1, 51)])
    found = _matches(source, np.arange(90), users, source[:1], [0])
    assert found.matched[:40].all() and not found.matched[40:].any()
