"""Release matches of source records that other users' records do not explain.

A release record near a source record is evidence about that record only when it is
nearer to it than anything else the source holds: a release that copies one user's
record is, to every record of another user, no nearer than that user's record itself. A
window of a source record is matched when a release window is at least ``threshold``
cosine-similar to it **and** more similar to it than any window of another user's
record. So boilerplate many users share (a quoted newsletter, a disclaimer, a system
prompt) matches nothing: other users' copies of it are as similar. A review found
every rare record, train and holdout alike, "disclosed" through such a shared window, and
a verbatim copy of train passing (T 11, H 9).

The criterion reads the source (its records and their users, never which are members)
and the release, so train and holdout records are judged alike and the disclosure
test's level holds. Records are the windows of :mod:`gate.features.text_windows` (one
per record unless the texts are read in windows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# neighbours searched for each source window's nearest window of another user (a user's
# identical windows counted once); when all of them are the same user's, the farthest of
# them stands in (at least as similar as the nearest other user's: a stricter criterion)
OTHER_USER_NEIGHBOURS = 32
# float32 cosine of a text with itself can fall short of 1 by about 1e-7
_SIMILARITY_TOLERANCE = 1e-5

Search = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray, Any]]


@dataclass(frozen=True)
class DistinctiveMatches:
    """Per source record: a distinctive match, its similarity and release record."""

    matched: np.ndarray  # (n_source,) bool: a window matched nearer than other users'
    similarity: np.ndarray  # (n_source,) float64: that match's cosine (nan where none)
    release: np.ndarray  # (n_source,) int64: its release record (-1 where none)
    explained: np.ndarray  # (n_source,) bool: at the threshold, but no nearer than others
    release_search: Any  # how the nearest release windows were searched


def distinctive_matches(
    *,
    source_windows: np.ndarray,
    source_owner: np.ndarray,
    source_users: np.ndarray,
    release_windows: np.ndarray,
    release_owner: np.ndarray,
    threshold: float,
    search: Search,
) -> DistinctiveMatches:
    """Source records whose windows a release window matches more closely than any window
    of another user's records does.

    Args:
        source_windows, release_windows: unit-norm rows (cosine = inner product).
        source_owner, release_owner: the record of each window.
        source_users: the user (integer code) of each source record.
        threshold: the cosine a match must reach.
        search: ``search(queries, base, width)``: each query's ``width`` nearest base rows
            (similarities, indices, how it searched).
    """
    n_source = int(source_users.size)
    best, hit, how = search(source_windows, release_windows, 1)
    nearest_release = best[:, 0].astype(np.float64)
    release_of = release_owner[hit[:, 0]]
    others = _nearest_other_user(source_windows, source_owner, source_users, search)
    at_threshold = nearest_release >= threshold - _SIMILARITY_TOLERANCE
    matched_window = at_threshold & (nearest_release > others + _SIMILARITY_TOLERANCE)
    matched = np.zeros(n_source, dtype=bool)
    matched[source_owner[matched_window]] = True
    near = np.zeros(n_source, dtype=bool)
    near[source_owner[at_threshold]] = True
    similarity = np.full(n_source, np.nan)
    release = np.full(n_source, -1, dtype=np.int64)
    rows = np.flatnonzero(matched_window)
    # the best matched window of each record: sorted by similarity, the last one wins
    rows = rows[np.argsort(nearest_release[rows], kind="stable")]
    similarity[source_owner[rows]] = nearest_release[rows]
    release[source_owner[rows]] = release_of[rows]
    return DistinctiveMatches(matched, similarity, release, near & ~matched, how)


def _nearest_other_user(
    windows: np.ndarray, owner: np.ndarray, users: np.ndarray, search: Search
) -> np.ndarray:
    """Each window's cosine to the nearest window of another user's record: -1 when there
    is no other user's window; when the ``OTHER_USER_NEIGHBOURS`` nearest are all its
    user's, the farthest of them (at least as similar as the nearest other user's, so a
    match must beat more: the criterion is then stricter than it means to be).

    A user's identical windows (a message sent many times) are searched once, so that
    they do not fill the neighbours searched (a review: a user who sent one message 33
    times had its verbatim copy explained by the user's own copies).
    """
    window_user = users[owner]
    row_hash = pd.util.hash_pandas_object(pd.DataFrame(windows), index=False).to_numpy()
    key = pd.MultiIndex.from_arrays([row_hash, window_user])
    codes, _ = pd.factorize(key)
    _, first = np.unique(codes, return_index=True)
    distinct, distinct_user = windows[first], window_user[first]
    width = min(OTHER_USER_NEIGHBOURS, distinct.shape[0])
    sims, ids, _ = search(distinct, distinct, width)
    other = distinct_user[ids] != distinct_user[:, None]
    nearest = np.where(
        other.any(axis=1), sims[np.arange(distinct.shape[0]), np.argmax(other, axis=1)], sims[:, -1]
    )
    if np.unique(distinct_user).size < 2:  # no other user at all
        nearest = np.full(distinct.shape[0], -1.0)
    return nearest.astype(np.float64)[codes]
