"""The generator's training data checked against the split.

Every statement of the gate compares train users with holdout users, who stand in for
users the generator never saw (phantoms). A split drawn after the generator was trained
(or a holdout that reached training) puts users the generator saw into holdout: their
disclosures then look like chance, and the comparison cannot see what the release holds
of them. The split's records alone cannot show this; the file the generator was trained
on can. A holdout user's id, or a text of at least :data:`DISTINCTIVE_WORDS` words that
holdout records hold and train records do not, found in that file means the generator
saw a holdout user, and the bundle is refused. A shorter such text ("Thank you.") may
come from any public corpus: it is counted and warned of, not refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.io import RawTable, given_ids, require_text
from gate.data.normalize import WHITE_SPACE, normalize_shown_text, normalize_text
from gate.errors import BundleError
from gate.policy.models import TextPolicy

DISTINCTIVE_WORDS = 8
"""Words (white-space separated) a holdout-only text needs to be taken as proof that the
generator saw its writer."""

_SPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):X}}}" for c in WHITE_SPACE) + "]"
_SPACES = _SPACE_CLASS + "+"
# a text whose white space is not single spaces between words (RE2's syntax)
_UNMATCHED_SPACE = (
    "[" + "".join(f"\\x{{{ord(c):X}}}" for c in WHITE_SPACE if c != " ") + "]|  |^ | $"
)
_REMEDY = (
    "holdout users must be users the generator never saw: draw the split before training "
    "(`gate split`) and train the generator on train only"
)


@dataclass(frozen=True)
class TrainingDataCheck:
    """What the generator's training data holds of the split, in distinct texts and users.
    Texts are compared as the bundle reads them (the policy's ``text`` reading; under
    ``markup: html`` also as their HTML shows them), users by the split's user column when
    both the source and the training data have it."""

    path: str
    sha256: str
    records: int
    user_column: str | None  # None: the source or the training data has no such column
    users: int | None  # distinct users of the training data, None without a user column
    train_texts: int  # non-blank texts train holds and holdout does not
    train_texts_found: int
    holdout_only_texts: int  # non-blank texts holdout holds and train does not, long ones
    short_holdout_texts: int  # the same, of fewer than DISTINCTIVE_WORDS words
    short_holdout_texts_found: int
    short_holdout_first_line: int | None  # where the training data holds the first
    train_users: int
    train_users_found: int | None  # None without a user column

    def saw_nothing_of_train(self) -> bool:
        """Neither a text only train holds nor a train user is in the training data: it is
        not the generator's, or it holds the records in another form (a prompt template),
        and the check compared nothing the generator saw."""
        return self.train_texts_found == 0 and not self.train_users_found

    def summary(self) -> str:
        """One line for the report: what was compared and found."""
        users = (
            "no user column compared"
            if self.user_column is None
            else f"no holdout user ({self.train_users_found} of {self.train_users} train users)"
        )
        short = (
            ""
            if not self.short_holdout_texts_found
            else f" (but {self.short_holdout_texts_found} shorter ones)"
        )
        return (
            f"{self.path}, {self.records} records: none of the {self.holdout_only_texts} "
            f"texts of {DISTINCTIVE_WORDS}+ words that only holdout holds{short}, "
            f"{self.train_texts_found} of the {self.train_texts} that only train holds; {users}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "records": self.records,
            "user_column": self.user_column,
            "users": self.users,
            "train_only_texts": self.train_texts,
            "train_only_texts_found": self.train_texts_found,
            "holdout_only_texts": self.holdout_only_texts,
            "holdout_only_texts_found": 0,
            "distinctive_words": DISTINCTIVE_WORDS,
            "short_holdout_only_texts": self.short_holdout_texts,
            "short_holdout_only_texts_found": self.short_holdout_texts_found,
            "train_users": self.train_users,
            "train_users_found": self.train_users_found,
            "holdout_users_found": None if self.user_column is None else 0,
        }


def check_training_data(
    table: RawTable,
    source: pd.DataFrame,
    sides: Sequence[RawTable],
    *,
    user_column: str,
    text: TextPolicy,
) -> TrainingDataCheck:
    """Check that the generator's training data holds no holdout user.

    Args:
        table: the training data as read (a ``text`` column; ``user_column`` if it has one;
            rows without an id in it are no user's, public text).
        source: the bundle's source records (``user_id``, ``text`` read under ``text``,
            ``split``), row for row the records of ``sides``.
        sides: the source's tables as read (train and holdout, or the one source file).
        user_column: the column that defines the split's users; compared when every one
            of ``sides`` has it (without, users are records or lines, which a training
            file's own ids would meet by chance).
        text: how the bundle read its texts; the training texts are read the same way.

    Returns:
        What the training data holds of the split.

    Raises:
        BundleError: a training record holds a holdout user's id, or a text of at least
            :data:`DISTINCTIVE_WORDS` words that only holdout records hold (the first such
            line is named, never its value), or the training data cannot be read as a
            table of texts.
    """
    is_train = (source["split"] == "train").to_numpy()
    readings = [source["text"]]
    if text.markup == "html":  # a pipeline that extracts the text of HTML trains on it
        raw = pd.concat([require_text(side) for side in sides], ignore_index=True)
        readings.append(normalize_shown_text(raw, text))
    texts = _Matched(
        pa.concat_arrays([_matched_form(reading) for reading in readings]),
        _matched_form(normalize_text(require_text(table), text)),
        np.tile(is_train, len(readings)),
    )
    holdout_only = texts.holdout & ~texts.train  # a text train holds too is no evidence
    holdout_only[texts.code_of("")] = False  # a blank text is nobody's
    long = texts.words >= DISTINCTIVE_WORDS
    seen = (holdout_only & long)[texts.found]
    if seen.any():
        raise BundleError(
            f"{table.path}: line {_first_line(table, seen)} holds the text of a holdout "
            f"record that no train record holds ({np.unique(texts.found[seen]).size} of the "
            f"{(holdout_only & long).sum()} such holdout texts of {DISTINCTIVE_WORDS} words "
            "or more are in this training data): the generator was trained on holdout "
            f"users, whose disclosures then pass for chance; {_REMEDY}"
        )
    short_seen = (holdout_only & ~long)[texts.found]
    train_only = texts.train & ~texts.holdout
    train_only[texts.code_of("")] = False
    compared = all(user_column in side.frame.columns for side in sides) and (
        user_column in table.frame.columns
    )
    ids = given_ids(table, user_column) if compared else pd.Series([], dtype="string")
    users = _Matched(_arrow(source["user_id"]), _arrow(ids), is_train)
    seen = users.holdout[users.found]
    if seen.any():
        line = int(table.frame.loc[ids.index[np.argmax(seen)], "__line__"])
        raise BundleError(
            f"{table.path}: line {line}: the {user_column!r} is a holdout user's "
            f"({np.unique(users.found[seen]).size} of the {users.holdout.sum()} holdout "
            "users are in this training data): the generator was trained on holdout users, "
            f"whose disclosures then pass for chance; {_REMEDY}"
        )
    return TrainingDataCheck(
        path=table.path,
        sha256=table.sha256,
        records=len(texts.found),
        user_column=user_column if compared else None,
        users=users.distinct_found() if compared else None,
        train_texts=int(train_only.sum()),
        train_texts_found=texts.distinct_found_of(train_only),
        holdout_only_texts=int((holdout_only & long).sum()),
        short_holdout_texts=int((holdout_only & ~long).sum()),
        short_holdout_texts_found=texts.distinct_found_of(holdout_only & ~long),
        short_holdout_first_line=_first_line(table, short_seen) if short_seen.any() else None,
        train_users=int(users.train.sum()),
        train_users_found=users.distinct_found_of(users.train) if compared else None,
    )


class _Matched:
    """Values of the source and of the training data coded alike: which codes train and
    holdout hold, and each training row's code (``-1``: a value the source lacks, which
    indexes the extra last cell of :attr:`train` and :attr:`holdout`, always False)."""

    def __init__(self, source: pa.Array, found: pa.Array, is_train: np.ndarray) -> None:
        encoded = pc.dictionary_encode(source)
        self.dictionary = encoded.dictionary
        source_codes = encoded.indices.to_numpy(zero_copy_only=False)
        in_source = pc.index_in(found.cast(self.dictionary.type), value_set=self.dictionary)
        self.found = in_source.fill_null(-1).to_numpy(zero_copy_only=False)
        self._found_values = found
        size = len(self.dictionary) + 1
        self.train = np.bincount(source_codes[is_train], minlength=size) > 0
        self.holdout = np.bincount(source_codes[~is_train], minlength=size) > 0

    @property
    def words(self) -> np.ndarray:
        """Words of each code's value (its spaces + 1; the values are in matched form)."""
        spaces = pc.count_substring(self.dictionary, " ").to_numpy(zero_copy_only=False)
        return np.append(spaces + 1, 0)

    def code_of(self, value: str) -> np.ndarray:
        """The code of ``value`` (none, an empty array, if the source lacks it)."""
        at = pc.index(self.dictionary, value).as_py()
        return np.array([], dtype=np.int64) if at < 0 else np.array([at])

    def distinct_found_of(self, codes: np.ndarray) -> int:
        """Distinct values among ``codes`` (a mask over codes) that the training data holds."""
        return int(np.unique(self.found[codes[self.found]]).size)

    def distinct_found(self) -> int:
        """Distinct values of the training data."""
        return int(pc.count_distinct(self._found_values).as_py())


def _arrow(values: pd.Series) -> pa.Array:
    """A column of strings as one Arrow array."""
    array = pa.array(values.astype("string[pyarrow]").array)
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _matched_form(texts: pd.Series) -> pa.Array:
    """Texts as compared: every run of white space (Python's ``str.isspace``) read as one
    space, none at either end (a training pipeline that strips or re-wraps its records
    still trained on them). Only the texts that need it are rewritten: a regex replacement
    of every space had taken 1.1 s per 100k texts of 100 words."""
    array = _arrow(texts)
    rewrite = pc.match_substring_regex(array, _UNMATCHED_SPACE)
    if not pc.any(rewrite).as_py():
        return array
    spaced = pc.replace_substring_regex(array.filter(rewrite), pattern=_SPACES, replacement=" ")
    rewritten = pc.utf8_trim(spaced, characters=" ")
    return pc.replace_with_mask(array, rewrite, rewritten)


def _first_line(table: RawTable, rows: np.ndarray) -> int:
    """The ``__line__`` of the first row of ``table`` where ``rows`` holds."""
    return int(table.frame["__line__"].to_numpy()[np.argmax(rows)])
