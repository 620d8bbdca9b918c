"""The generator's training data checked against the split.

Every statement of the gate compares train users with holdout users, who stand in for
users the generator never saw (phantoms). A split drawn after the generator was trained
(or a holdout that reached training) puts users the generator saw into holdout: their
disclosures then look like chance, and the comparison cannot see what the release holds
of them. The split's records alone cannot show this; the file the generator was trained
on can. A holdout record's text that no train record holds, or a holdout user's id,
found in that file means the generator saw a holdout user, and the bundle is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.io import RawTable, id_column, require_text
from gate.data.normalize import WHITE_SPACE, normalize_text
from gate.errors import BundleError
from gate.policy.models import TextPolicy

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
    """What the generator's training data holds of the split: texts are compared as the
    bundle reads them (the policy's ``text`` reading), users by the split's user column
    when the training data has it. Counts of distinct texts and users."""

    path: str
    sha256: str
    records: int
    user_column: str | None  # None: the training data has no such column
    users: int | None  # distinct users of the training data, None without a user column
    train_texts: int
    train_texts_found: int
    holdout_only_texts: int  # holdout texts that no train record holds: what is compared
    train_users: int
    train_users_found: int | None  # None without a user column

    def saw_nothing_of_train(self) -> bool:
        """Neither a train text nor a train user is in the training data: either it is not
        the generator's, or it holds the records in another form (a prompt template), and
        the check compared nothing the generator saw."""
        return self.train_texts_found == 0 and not self.train_users_found

    def summary(self) -> str:
        """One line for the report: what was compared and found."""
        users = (
            "no user column"
            if self.user_column is None
            else f"no holdout user ({self.train_users_found} of {self.train_users} train users)"
        )
        return (
            f"{self.path}, {self.records} records: none of the {self.holdout_only_texts} "
            f"holdout texts that train lacks, {self.train_texts_found} of {self.train_texts} "
            f"train texts; {users}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "records": self.records,
            "user_column": self.user_column,
            "users": self.users,
            "train_texts": self.train_texts,
            "train_texts_found": self.train_texts_found,
            "holdout_only_texts": self.holdout_only_texts,
            "holdout_only_texts_found": 0,
            "train_users": self.train_users,
            "train_users_found": self.train_users_found,
            "holdout_users_found": None if self.user_column is None else 0,
        }


def check_training_data(
    table: RawTable, source: pd.DataFrame, *, user_column: str, text: TextPolicy
) -> TrainingDataCheck:
    """Check that the generator's training data holds no holdout user.

    Args:
        table: the training data as read (a ``text`` column; ``user_column`` if it has one).
        source: the bundle's source records (``user_id``, ``text`` read under ``text``,
            ``split``).
        user_column: the column that defines the split's users.
        text: how the bundle read its texts; the training texts are read the same way.

    Returns:
        What the training data holds of train.

    Raises:
        BundleError: a training record holds a text only holdout records hold, or a holdout
            user's id (the first such line is named, never its value), or the training
            data cannot be read as a table of texts.
    """
    is_train = (source["split"] == "train").to_numpy()
    texts = _Matched(
        _matched_form(source["text"]),
        _matched_form(normalize_text(require_text(table), text)),
        is_train,
    )
    holdout_only = texts.holdout & ~texts.train  # a text train holds too is no evidence
    holdout_only[texts.code_of("")] = False  # a blank text is nobody's
    seen = holdout_only[texts.found]
    if seen.any():
        raise BundleError(
            f"{table.path}: line {_first_line(table, seen)} holds the text of a holdout "
            f"record that no train record holds ({np.unique(texts.found[seen]).size} of the "
            f"{holdout_only.sum()} such holdout texts are in this training data): the "
            f"generator was trained on holdout users, whose disclosures then pass for "
            f"chance; {_REMEDY}"
        )
    has_users = user_column in table.frame.columns
    users = _Matched(
        _arrow(source["user_id"]),
        _arrow(id_column(table, user_column, pd.Series(dtype="string")))
        if has_users
        else pa.array([], pa.large_string()),
        is_train,
    )
    seen = users.holdout[users.found]
    if seen.any():
        raise BundleError(
            f"{table.path}: line {_first_line(table, seen)}: the {user_column!r} is a "
            f"holdout user's ({np.unique(users.found[seen]).size} of the "
            f"{users.holdout.sum()} holdout users are in this training data): the generator "
            f"was trained on holdout users, whose disclosures then pass for chance; {_REMEDY}"
        )
    return TrainingDataCheck(
        path=table.path,
        sha256=table.sha256,
        records=len(texts.found),
        user_column=user_column if has_users else None,
        users=users.distinct_found() if has_users else None,
        train_texts=int(texts.train.sum()),
        train_texts_found=texts.train_found(),
        holdout_only_texts=int(holdout_only.sum()),
        train_users=int(users.train.sum()),
        train_users_found=users.train_found() if has_users else None,
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

    def code_of(self, value: str) -> np.ndarray:
        """The code of ``value`` (none, an empty array, if the source lacks it)."""
        at = pc.index(self.dictionary, value).as_py()
        return np.array([], dtype=np.int64) if at < 0 else np.array([at])

    def train_found(self) -> int:
        """Distinct values of train that the training data holds."""
        return int(np.unique(self.found[self.train[self.found]]).size)

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
