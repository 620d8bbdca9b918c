"""The generator's training data checked against the split.

Every statement of the gate compares train users with holdout users, who stand in for
users the generator never saw (phantoms). A split drawn after the generator was trained
(or a holdout that reached training) puts users the generator saw into holdout: their
disclosures then look like chance, and the comparison cannot see what the release holds
of them. The split's records alone cannot show this; the file the generator was trained
on can. The bundle is refused when that file holds a holdout user's id, or a distinctive
holdout text: one that a single holdout user wrote, no train user, of at least
:data:`DISTINCTIVE_WORDS` words. Other holdout-only texts (short ones, "Thank you.", or
templates several holdout users share) may come from any public corpus: they are counted
and warned of, not refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gate.data.io import RawTable, first_line, given_ids, require_text
from gate.data.normalize import (
    WHITE_SPACE,
    may_hold_markup,
    normalize_shown_text,
    normalize_text,
    re2_characters,
)
from gate.data.record_texts import FIELD_COLUMN, texts_of_records
from gate.errors import BundleError
from gate.features.contained import containing_rows
from gate.policy.models import TextPolicy

DISTINCTIVE_WORDS = 8
"""Words a holdout text needs to be taken as proof that the generator saw its writer: runs
of letters, digits and marks; in a script written without spaces (Han, kana, Thai, Lao,
Khmer, Myanmar) every two letters count as a word."""

CONTAINED_WORDS = 16
"""Words (the ``word`` tokenizer's) a holdout text needs to be taken as proof when a
longer training text holds it (a prompt template around each record, records packed
into one row): a phrase of a few words is found in long public texts by chance."""

TEMPLATE_SAMPLE = 512
"""Rows (that equal no source text) on which a template is found and its ends placed."""

TEMPLATE_CUTS = 64
"""Word boundaries tried as the end of a template's prefix (the last ones of each prefix
that a share of the rows has) and as the start of its suffix (the first ones of each
suffix): the records may share their first or last words too (a greeting, a signature)."""

TEMPLATE_FIELDS = 16
"""Fields of a chat or instruction file (the largest) whose own template is looked for."""

_SHARED_BY = (1 / 2, 3 / 4, 15 / 16, 1 / 4, 1 / 8, 1 / 16)
"""Shares of the rows whose longest common prefix (suffix) is tried as a template's."""

TEMPLATE_ROUNDS = 4
"""Templates read one after the other, each among the rows the ones before left."""

_ENDS_KEPT = 16  # prefixes (suffixes) tried as a template's, in all
_BOUNDS_KEPT = 8  # of those, the boundaries at which source texts start (end) kept
_SCORED_CHARACTERS = 1 << 26  # characters of rows cut, over all cuts, to score them
_CUT_CHARACTERS = 1 << 24  # characters of rows cut at once when cuts are scored

_SPACES = f"[{re2_characters(WHITE_SPACE)}]+"
# a text whose white space is not single spaces between words (RE2's syntax)
_UNMATCHED_SPACE = f"[{re2_characters(WHITE_SPACE.replace(' ', ''))}]|  |^ | $"
_WORD_CHARACTER = r"[\p{L}\p{N}\p{M}]"
_WORD = _WORD_CHARACTER + "+"
_NOT_WORD = r"[^\p{L}\p{N}\p{M}]"
# a text that has its first DISTINCTIVE_WORDS runs of letters, digits and marks
_FIRST_WORDS = f"^{_NOT_WORD}*(?:{_WORD}{_NOT_WORD}+){{{DISTINCTIVE_WORDS - 1}}}{_WORD_CHARACTER}"
_UNSPACED = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]"
_REMEDY = (
    "holdout users must be users the generator never saw: draw the split before training "
    "(`gate split`) and train the generator on train only"
)


@dataclass(frozen=True)
class TrainingDataCheck:
    """What the generator's training data holds of the split, in records of the source
    and distinct users. Texts are compared as the bundle reads them (the policy's ``text``
    reading), and, where a text may hold HTML, also as the gate's HTML reader shows it and
    as written; ids by the split's user column (and ``user_id`` under a split by another
    column) where both the source and the training data have it."""

    path: str
    sha256: str
    records: int
    texts: int  # the strings of the records: a text column's, those beside it, a chat's
    user_column: str | None  # the first id column compared; None: no column compared
    id_columns: tuple[str, ...]  # every id column compared (the split's, then user_id)
    users: int | None  # distinct ids of the first column in the training data
    train_only_records: int  # train records whose text no holdout record holds
    train_only_records_found: int  # as a row's text, or within a longer one
    train_only_records_within: int  # found only within longer texts
    template_rows: int  # rows that equal a source text once a shared template is removed
    distinctive_holdout_records: int  # the records that refuse the file: none found
    weak_holdout_records: int  # holdout-only texts, but short or of several holdout users
    weak_holdout_records_found: int
    weak_holdout_first_line: int | None  # where the training data holds the first
    train_users: int
    train_users_found: int | None  # None without an id column compared

    def saw_nothing_of_train(self) -> bool:
        """Neither a text only train holds nor a train user is in the training data: it is
        not the generator's, or it holds the records in another form (rewritten, or records
        under :data:`CONTAINED_WORDS` words inside templates that differ from row to row),
        and the check compared nothing the generator saw."""
        return self.train_only_records_found == 0 and not self.train_users_found

    def summary(self) -> str:
        """One line for the report: what was compared and found."""
        users = (
            "no id column compared"
            if self.user_column is None
            else f"no holdout user by {', '.join(self.id_columns)} ({self.train_users_found} "
            f"of {self.train_users} train users)"
        )
        weak = (
            ""
            if not self.weak_holdout_records_found
            else f" (but {self.weak_holdout_records_found} of short or shared text)"
        )
        within = "".join(
            f" ({count} {how})"
            for count, how in (
                (self.template_rows, "rows read inside a template"),
                (self.train_only_records_within, "within longer texts"),
            )
            if count
        )
        fields = "" if self.texts == self.records else f" ({self.texts} strings in their fields)"
        return (
            f"{self.path}, {self.records} records{fields}: none of the "
            f"{self.distinctive_holdout_records} holdout records of distinctive text{weak}; "
            f"{self.train_only_records_found} of the {self.train_only_records} train records "
            f"whose text only train holds{within}; {users}"
        )

    def as_dict(self) -> dict[str, object]:
        """The check for report.json (counts, the rule's word count, no value)."""
        return {
            **asdict(self),
            "distinctive_holdout_records_found": 0,
            "distinctive_words": DISTINCTIVE_WORDS,
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
        table: the training data as read (a ``text`` column and the columns beside it,
            or records in a chat or instruction format, read as every string they hold:
            :func:`gate.data.record_texts.texts_of_records`; ``user_column`` if it has
            one; rows without an id in it are no user's, public text).
        source: the bundle's source records (``user_id``, ``text`` read under ``text``,
            ``split``), row for row the records of ``sides``.
        sides: the source's tables as read (train and holdout, or the one source file).
        user_column: the column that defines the split's users; it, and ``user_id`` under a
            split by another column (users nested in its groups), is compared where every
            one of ``sides`` and ``table`` have it (without, users are records or lines,
            which a training file's own ids would meet by chance).
        text: how the bundle read its texts; the training texts are read the same way.

    Returns:
        What the training data holds of the split.

    Raises:
        BundleError: a training record holds a distinctive holdout text or a holdout
            user's id (the first such line is named, never its value), or the training
            data cannot be read as a table of texts.
    """
    is_train = (source["split"] == "train").to_numpy()
    records = table
    table = texts_of_records(records, id_columns=(user_column, "user_id"))
    written = require_text(table)
    source_written = pd.concat([require_text(side) for side in sides], ignore_index=True)
    training = _readings(normalize_text(written, text), written, text)
    texts = _CodedValues(_readings(source["text"], source_written, text), training, is_train)
    fields = table.frame.get(FIELD_COLUMN)
    templated = _add_template_readings(texts, training, fields)
    holdout_only = texts.holdout & ~texts.train  # a text train holds too is no evidence
    holdout_only[texts.code_of("")] = False  # a blank text is nobody's
    source_users = _arrow(source["user_id"])
    users = pc.dictionary_encode(source_users).indices.to_numpy(zero_copy_only=False)
    one_holder = texts.holders(users, ~is_train) == 1
    distinctive = holdout_only & texts.distinctive_length() & one_holder
    _refuse_distinctive_texts(table, texts, distinctive, is_train, templated)
    train_only = texts.train & ~texts.holdout
    train_only[texts.code_of("")] = False
    found_codes, found_rows = _found_within_longer_texts(
        texts, train_only | (holdout_only & one_holder)
    )
    of_holdout = holdout_only[found_codes]
    _refuse_holdout_texts_within(
        table, texts, (found_codes[of_holdout], found_rows[of_holdout]), users, is_train
    )
    within = np.zeros_like(train_only)
    within[found_codes] = True
    ids, id_columns = _refuse_holdout_ids(records, source_users, sides, user_column, is_train)
    weak = holdout_only & ~distinctive
    weak_rows = texts.rows_holding(weak)
    train_only_within = texts.records_holding(train_only & within) & is_train
    return TrainingDataCheck(
        path=table.path,
        sha256=table.sha256,
        records=len(records.frame),
        texts=len(written),
        user_column=id_columns[0] if id_columns else None,
        id_columns=id_columns,
        users=ids.distinct_in_training() if ids is not None else None,
        train_only_records=int((texts.records_holding(train_only) & is_train).sum()),
        train_only_records_found=int(
            (texts.records_holding(train_only & (texts.in_training | within)) & is_train).sum()
        ),
        train_only_records_within=int(train_only_within.sum()),
        template_rows=int(templated.sum()),
        distinctive_holdout_records=int((texts.records_holding(distinctive) & ~is_train).sum()),
        weak_holdout_records=int((texts.records_holding(weak) & ~is_train).sum()),
        weak_holdout_records_found=int(
            (texts.records_holding(weak & texts.in_training) & ~is_train).sum()
        ),
        weak_holdout_first_line=_line(table, weak_rows) if weak_rows.any() else None,
        train_users=(
            int(ids.train.sum()) if ids is not None else int(source["user_id"][is_train].nunique())
        ),
        train_users_found=ids.count_in_training(ids.train) if ids is not None else None,
    )


def _refuse_distinctive_texts(
    table: RawTable,
    texts: _CodedValues,
    distinctive: np.ndarray,
    is_train: np.ndarray,
    templated: np.ndarray,
) -> None:
    rows = texts.rows_holding(distinctive)
    if not rows.any():
        return
    records = texts.records_holding(distinctive) & ~is_train
    found = texts.records_holding(distinctive & texts.in_training) & ~is_train
    first = int(np.argmax(rows))
    inside = " inside the template that its rows share" if templated[first] else ""
    raise BundleError(
        f"{table.path}: line {_line(table, rows)} holds{inside} the text of a holdout record that "
        f"one holdout user wrote and no train user, of {DISTINCTIVE_WORDS} words or more "
        f"(this training data holds {found.sum()} of the {records.sum()} such holdout "
        "records): evidence that the generator was trained on holdout users, whose "
        f"disclosures would pass for chance; {_REMEDY}"
    )


def _add_template_readings(
    texts: _CodedValues, training: Sequence[pa.Array], fields: pd.Series | None
) -> np.ndarray:
    """Add to ``texts`` the readings of the ``training`` rows without their templates
    (:func:`_cut_readings`), up to :data:`TEMPLATE_ROUNDS` templates one after the other,
    each among the rows the ones before left; the rows that only these readings match."""
    templated = np.zeros(len(training[0]), dtype=bool)
    held = texts.dictionary.filter(pa.array(texts.train[:-1]))
    only = texts.dictionary.filter(pa.array((texts.train & ~texts.holdout)[:-1]))
    train = _TrainTexts(only=only.filter(pc.not_equal(only, "")), held=held)
    for _ in range(TEMPLATE_ROUNDS):
        cut = [r for each in training for r in _cut_readings(texts, train, each, fields)]
        before = int(templated.sum())
        for reading in cut:  # all cut before any is added: each sees the same rows unmatched
            templated |= texts.add_training_reading(reading)
        if templated.sum() == before:
            break
    return templated


@dataclass(frozen=True)
class _TrainTexts:
    """The source texts that only train holds (non-blank), and that train holds."""

    only: pa.Array
    held: pa.Array


def _cut_readings(
    texts: _CodedValues, train: _TrainTexts, reading: pa.Array, fields: pd.Series | None
) -> list[pa.Array]:
    """``reading`` without the template its rows share (:func:`_template_reading`), and,
    for a file read by its fields (``fields``: each row's), without the template each of
    its :data:`TEMPLATE_FIELDS` largest fields shares (a user turn ``Message: {text}``
    among the replies and system prompts of a chat file; a ``text`` column first, beside
    any number of metadata keys), where there is one and the file has more than one
    field."""
    everywhere = np.ones(len(reading), dtype=bool)
    readings = [_template_reading(texts, train, reading, everywhere)]
    if fields is not None:
        codes, names = pd.factorize(fields)
        sizes = np.bincount(codes)
        sizes[names == "text"] = len(codes)  # a text column's first, however wide the others
        largest = np.argsort(-sizes, kind="stable")[: TEMPLATE_FIELDS if len(sizes) > 1 else 0]
        of_fields = [_template_reading(texts, train, reading, codes == f) for f in largest]
        found = [cut for cut in of_fields if cut is not None]
        if found:
            readings.append(pc.coalesce(*found))
    return [cut for cut in readings if cut is not None]


def _template_reading(
    texts: _CodedValues, train: _TrainTexts, reading: pa.Array, rows: np.ndarray
) -> pa.Array | None:
    """``reading`` (the training rows in one reading) where the ``rows`` (a mask) that equal
    no source text in any reading are read without a template they share, the others
    null; ``None`` without such a template.

    A template is a prefix and a suffix that a share of the distinct non-blank rows has
    (:data:`_SHARED_BY`: half or more first, in :data:`TEMPLATE_SAMPLE` of them evenly
    spaced; all of them; and down to a sixteenth, for templated records among public rows
    or several templates, which :func:`_add_template_readings` peels one after the other).
    The records may share their first or last words too, which such a prefix or suffix
    then holds: each is also tried at its last (first) :data:`TEMPLATE_CUTS` word
    boundaries where a source text starts (ends). The cut under which the most rows equal
    a text that only train holds is kept, if one does (every distinct row, or at least
    :data:`TEMPLATE_SAMPLE` evenly spaced, as many as :data:`_SCORED_CHARACTERS` allows,
    and then, if none of those does, every row under the template all rows share and the
    longest one; ties keep the earlier cut). A holdout text never places a cut: a frame or
    a signature that a public row shares with it would make it proof. A row that another
    cut that scored makes a text train holds is read as that text (a train record quoting
    a holdout one, inside a frame its rows share, is no proof). Each row that starts and
    ends as the template does is then compared whole, under the rules of a row that
    equals a source text: records of any length are found, where
    :func:`_found_within_longer_texts` needs
    :data:`CONTAINED_WORDS` words."""
    unmatched = (texts.training_codes < 0).all(axis=0) & rows
    distinct = pc.unique(reading.filter(pa.array(unmatched)))
    distinct = distinct.filter(pc.not_equal(distinct, ""))
    if len(distinct) < 2:
        return None
    prefixes = _shared_prefixes(distinct, TEMPLATE_SAMPLE)
    suffixes = [t[::-1] for t in _shared_prefixes(pc.utf8_reverse(distinct), TEMPLATE_SAMPLE)]
    starts = _record_bounds(prefixes, texts.dictionary, at_start=True)
    ends = _record_bounds(suffixes, texts.dictionary, at_start=False)
    cuts = [(start, end) for start in starts for end in ends if start or end]
    if not cuts:
        return None
    characters = max(1, pc.sum(pc.utf8_length(distinct)).as_py())
    scored = _evenly_spaced(
        distinct,
        max(TEMPLATE_SAMPLE, len(distinct) * _SCORED_CHARACTERS // (characters * len(cuts))),
    )
    scores = _cut_scores(scored, cuts, train.only)
    if not max(scores) and len(scored) < len(distinct):  # the few records among many rows
        widest = (prefixes[-1], suffixes[-1])  # what all rows share
        cuts = [cut for cut in dict.fromkeys([widest, cuts[0]]) if cut[0] or cut[1]]
        scores = _cut_scores(distinct, cuts, train.only)
    best = int(np.argmax(scores))
    if not scores[best]:
        return None
    middle = _between(reading, *cuts[best])
    for other in (cut for cut, score in zip(cuts, scores, strict=True) if score):
        read = _between(reading, *other)  # rows the kept cut reads, that this one reads
        train_text = pc.is_in(read, value_set=train.held).fill_null(False)  # as train's
        was_train = pc.is_in(middle, value_set=train.held).fill_null(False)
        instead = pc.and_(pc.and_(train_text, pc.invert(was_train)), pc.is_valid(middle))
        middle = pc.if_else(instead, read, middle)
    kept = pc.and_(pa.array(unmatched), pc.not_equal(middle, "").fill_null(False))
    return pc.if_else(kept, middle, pa.scalar(None, middle.type))


def _evenly_spaced(texts: pa.Array, count: int) -> pa.Array:
    """``count`` of ``texts`` evenly spaced (all of them if fewer)."""
    if count >= len(texts):
        return texts
    return texts.take(pa.array(np.linspace(0, len(texts) - 1, count).astype(np.int64)))


def _cut_scores(rows: pa.Array, cuts: list[tuple[str, str]], wanted: pa.Array) -> list[int]:
    """For each (prefix, suffix) of ``cuts``, how many ``rows`` equal one of ``wanted``
    once cut there (:func:`_between`); several cuts are looked up at once, up to
    :data:`_CUT_CHARACTERS` characters of rows."""
    per_call = max(1, _CUT_CHARACTERS // max(1, pc.sum(pc.utf8_length(rows)).as_py()))
    scores: list[int] = []
    for first in range(0, len(cuts), per_call):
        some = cuts[first : first + per_call]
        middles = pa.concat_arrays([_between(rows, *cut) for cut in some])
        equal = pc.is_in(middles, value_set=wanted).fill_null(False)
        counts = np.add.reduceat(
            equal.to_numpy(zero_copy_only=False).astype(np.int64),
            np.arange(len(some)) * len(rows),
        )
        scores.extend(int(count) for count in counts)
    return scores


def _shared_prefixes(texts: pa.Array, sample: int) -> list[str]:
    """The longest prefix that each share of :data:`_SHARED_BY` of ``sample`` of ``texts``
    evenly spaced (two at least) has, then the one all ``texts`` share: in sorted order,
    the texts that share a prefix are consecutive."""
    ordered = sorted(_evenly_spaced(texts, sample).to_pylist())
    least, most = (value.as_py() for value in pc.min_max(texts).values())
    shared = []
    for fraction in _SHARED_BY:
        span = min(len(ordered), max(2, math.ceil(len(ordered) * fraction)))
        ends = range(span - 1, len(ordered))
        shared.append(
            max((_common_prefix(ordered[i - span + 1], ordered[i]) for i in ends), key=len)
        )
    return [*shared, _common_prefix(least, most)]


def _common_prefix(a: str, b: str) -> str:
    """The longest prefix of ``a`` and ``b`` (a binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return a[:low]


def _record_bounds(shared: list[str], dictionary: pa.Array, *, at_start: bool) -> list[str]:
    """The prefixes (``at_start``) or suffixes that a template may be, from those that
    rows share (``shared``): each whole, then each cut at its last (first)
    :data:`TEMPLATE_CUTS` word boundaries at which a source text starts (ends) with the
    rest of it, at most :data:`_BOUNDS_KEPT` per shared one and :data:`_ENDS_KEPT` in
    all, in that order."""
    found = pc.starts_with if at_start else pc.ends_with
    bounds = list(dict.fromkeys(shared))
    for whole in dict.fromkeys(shared):
        inside = [0, *_boundaries(whole), len(whole)]
        kept = 0
        for bound in (inside[::-1] if at_start else inside)[:TEMPLATE_CUTS]:
            template, rest = (
                (whole[:bound], whole[bound:]) if at_start else (whole[bound:], whole[:bound])
            )
            if not rest or template in bounds:
                continue
            if pc.any(found(dictionary, pattern=rest)).as_py():
                bounds.append(template)
                kept += 1
                if kept == _BOUNDS_KEPT:
                    break
    return bounds[:_ENDS_KEPT]


def _boundaries(text: str) -> list[int]:
    """Positions strictly inside ``text`` between a letter or digit and another character,
    or between two characters of which neither is one, in order."""
    return [i for i in range(1, len(text)) if not (text[i - 1].isalnum() and text[i].isalnum())]


def _between(texts: pa.Array, prefix: str, suffix: str) -> pa.Array:
    """Each of ``texts`` that starts with ``prefix`` and ends with ``suffix`` (apart), without
    them and the spaces this leaves at either end; null for the others."""
    fits = pc.and_(
        pc.and_(pc.starts_with(texts, pattern=prefix), pc.ends_with(texts, pattern=suffix)),
        pc.greater_equal(pc.utf8_length(texts), len(prefix) + len(suffix)),
    )
    stop = -len(suffix) if suffix else None
    sliced = pc.utf8_slice_codeunits(texts, start=len(prefix), stop=stop)
    return pc.if_else(fits, pc.utf8_trim(sliced, characters=" "), pa.scalar(None, sliced.type))


def _found_within_longer_texts(
    texts: _CodedValues, looked_for: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each (code, training row) such that the row equals no source text but holds the
    code's text, one of ``looked_for`` (a mask over codes) of :data:`CONTAINED_WORDS`
    words or more that no row equals, within it (compared as the bundle reads them, not
    in the HTML readings)."""
    unmatched = np.flatnonzero((texts.training_codes < 0).all(axis=0))
    codes = np.flatnonzero(looked_for[:-1] & ~texts.in_training[:-1])
    if not unmatched.size or not codes.size:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    held, rows = containing_rows(
        texts.dictionary.take(pa.array(codes)),
        texts.training_reading().take(pa.array(unmatched)),
        min_words=CONTAINED_WORDS,
    )
    return codes[held], unmatched[rows]


def _refuse_holdout_texts_within(
    table: RawTable,
    texts: _CodedValues,
    found: tuple[np.ndarray, np.ndarray],
    users: np.ndarray,
    is_train: np.ndarray,
) -> None:
    """Refuse training rows that hold, within a longer text, a holdout text that one
    holdout user wrote (``found``: the (code, row) pairs of such texts), unless the row
    holds it as part of another user's record that quotes it (a train record that quotes
    a holdout record, inside a template, is no evidence; a review had let any quote by
    another user, anywhere in the source, excuse every row)."""
    codes, rows = found
    if not codes.size:
        return
    distinct = np.unique(codes)
    source_codes = texts.source_codes[0]
    quoted, records = containing_rows(
        texts.dictionary.take(pa.array(distinct)),
        texts.dictionary.take(pa.array(source_codes)),
        min_words=CONTAINED_WORDS,
    )
    writer = np.full(len(texts.dictionary) + 1, -1, dtype=np.int64)
    holdout_rows = np.flatnonzero(~is_train)
    for reading in texts.source_codes:  # one holdout user holds each of these codes
        writer[reading[holdout_rows]] = users[holdout_rows]
    by_other = users[records] != writer[distinct[quoted]]
    quotes = pd.DataFrame(
        {"code": distinct[quoted[by_other]], "quote": source_codes[records[by_other]]}
    ).drop_duplicates()
    pairs = pd.DataFrame({"code": codes, "row": rows})
    if len(quotes):
        quote_codes = np.unique(quotes["quote"].to_numpy())
        row_numbers = np.unique(rows)
        held, in_rows = containing_rows(
            texts.dictionary.take(pa.array(quote_codes)),
            texts.training_reading().take(pa.array(row_numbers)),
            min_words=CONTAINED_WORDS,
        )
        quoted_in = pd.DataFrame({"quote": quote_codes[held], "row": row_numbers[in_rows]})
        excused = quotes.merge(quoted_in, on="quote")[["code", "row"]].drop_duplicates()
        pairs = pairs.merge(excused, on=["code", "row"], how="left", indicator=True)
        pairs = pairs[pairs["_merge"] == "left_only"]
    if pairs.empty:
        return
    at = np.zeros(len(table.frame), dtype=bool)
    at[pairs["row"].to_numpy()] = True
    proof = np.zeros(len(texts.dictionary) + 1, dtype=bool)
    proof[pairs["code"].to_numpy()] = True
    holding = _many(int((texts.records_holding(proof) & ~is_train).sum()), "such holdout record")
    raise BundleError(
        f"{table.path}: line {_line(table, at)} holds, within a longer text, the text of a "
        f"holdout record that one holdout user wrote, of {CONTAINED_WORDS} words or more, "
        "and not as part of another user's record that quotes it (this training data holds "
        f"{holding} in {_many(int(at.sum()), 'row')}): evidence that the generator was "
        f"trained on holdout users, whose disclosures would pass for chance; {_REMEDY}"
    )


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _refuse_holdout_ids(
    table: RawTable,
    source_users: pa.Array,
    sides: Sequence[RawTable],
    user_column: str,
    is_train: np.ndarray,
) -> tuple[_CodedValues | None, tuple[str, ...]]:
    """Compare the training data's ids with the holdout's in every id column that it and
    the source have (``source_users``: the source's users, by ``user_column``); the ids of
    the first column compared, and the columns compared."""
    first: _CodedValues | None = None
    compared: list[str] = []
    for column in dict.fromkeys((user_column, "user_id")):
        if column not in table.frame.columns or any(
            column not in side.frame.columns for side in sides
        ):
            continue
        if column == user_column:
            source_ids, source_train = source_users, is_train
        else:
            side_ids, source_train = _side_ids(sides, column, is_train)
            source_ids = _arrow(side_ids)
        found = given_ids(table, column)
        ids = _CodedValues([source_ids], [_arrow(found)], source_train)
        ids.match_unknown_numbers()
        rows = ids.rows_holding(ids.holdout)
        if rows.any():
            first_row = int(np.argmax(rows))
            line = int(table.frame.loc[found.index[first_row], "__line__"])
            written = (
                " (written as another form of its integer)" if ids.by_number[first_row] else ""
            )
            raise BundleError(
                f"{table.path}: line {line}: the {column!r}{written} is one of the holdout's (this "
                f"training data holds {ids.count_in_training(ids.holdout)} of the "
                f"{ids.holdout.sum()} holdout {column} values): the generator was trained "
                f"on holdout users, whose disclosures would pass for chance; {_REMEDY} "
                "(rows of public text must carry no id, or none of the split's)"
            )
        compared.append(column)
        if first is None:
            first = ids
    return first, tuple(compared)


class _CodedValues:
    """Values of the source and of the training data coded alike, each in one or more
    readings (row for row): which codes train and holdout hold, which the training data
    holds, and each training reading's code per row (``-1``: a value the source lacks,
    which indexes the extra last cell of every mask over codes, always False)."""

    def __init__(
        self, source: Sequence[pa.Array], training: Sequence[pa.Array], is_train: np.ndarray
    ) -> None:
        encoded = pc.dictionary_encode(pa.concat_arrays(list(source)))
        self.dictionary = encoded.dictionary
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self.source_codes = codes.reshape(len(source), -1)  # one row per reading
        values = pa.concat_arrays([t.cast(self.dictionary.type) for t in training])
        in_source = pc.index_in(values, value_set=self.dictionary).fill_null(-1)
        self.training_codes = in_source.to_numpy(zero_copy_only=False).reshape(len(training), -1)
        self._training_readings = list(training)
        self.by_number = np.zeros(self.training_codes.shape[1], dtype=bool)  # rows matched so
        self._training_values = training[0]
        size = len(self.dictionary) + 1
        self.train = np.bincount(self.source_codes[:, is_train].ravel(), minlength=size) > 0
        self.holdout = np.bincount(self.source_codes[:, ~is_train].ravel(), minlength=size) > 0
        held = self.training_codes[self.training_codes >= 0]
        self.in_training = np.bincount(held, minlength=size) > 0

    def add_training_reading(self, reading: pa.Array) -> np.ndarray:
        """Code another reading of the training rows (row for row, null where a row has
        none); the rows that equal a source text in it and in no reading before."""
        before = (self.training_codes >= 0).any(axis=0)
        in_source = pc.index_in(reading.cast(self.dictionary.type), value_set=self.dictionary)
        codes = in_source.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        self.training_codes = np.vstack([self.training_codes, codes])
        self._training_readings.append(reading)
        held = codes[codes >= 0]
        self.in_training |= np.bincount(held, minlength=len(self.dictionary) + 1) > 0
        return (codes >= 0) & ~before

    def match_unknown_numbers(self) -> None:
        """Give a training value the source lacks the code of a source value that writes
        the same integer (``"11.0"``, ``"011"`` or ``"+11"`` for ``11``: a pipeline that
        read the ids as numbers, or padded them); where several source values write it,
        a holdout one's (the check must not miss a holdout user)."""
        codes = self.training_codes.reshape(-1).copy()  # Arrow's buffers are read-only
        unknown = codes < 0
        if not unknown.any():
            return
        forms = _integer_forms(self.dictionary)
        numeric = np.flatnonzero(pc.is_valid(forms).to_numpy(zero_copy_only=False))
        if not numeric.size:
            return
        holdout_first = numeric[np.argsort(~self.holdout[numeric], kind="stable")]
        known = forms.take(pa.array(holdout_first)).to_numpy(zero_copy_only=False)
        unique, first = np.unique(known, return_index=True)
        every = pa.concat_arrays([t.cast(self.dictionary.type) for t in self._training_readings])
        candidates = _integer_forms(every.filter(pa.array(unknown)))
        at = pc.index_in(candidates, value_set=pa.array(unique, pa.string()))
        found = at.fill_null(-1).to_numpy(zero_copy_only=False)
        codes[unknown] = np.where(found >= 0, holdout_first[first[found]], -1)
        self.by_number = (unknown & (codes >= 0)).reshape(self.training_codes.shape).any(axis=0)
        self.training_codes = codes.reshape(self.training_codes.shape)
        held = self.training_codes[self.training_codes >= 0]
        self.in_training = np.bincount(held, minlength=len(self.dictionary) + 1) > 0

    def distinctive_length(self) -> np.ndarray:
        """Whether each code's value has :data:`DISTINCTIVE_WORDS` words: found by an
        anchored match that stops at the last word it needs; a value holding a script
        written without spaces is counted in full."""
        values = self.dictionary
        long = pc.match_substring_regex(values, _FIRST_WORDS).to_numpy(zero_copy_only=False)
        unspaced = pc.match_substring_regex(values, _UNSPACED)
        if pc.any(unspaced).as_py():
            at = np.flatnonzero(unspaced.to_numpy(zero_copy_only=False))
            some = values.take(pa.array(at))

            def count(texts: pa.Array, pattern: str) -> np.ndarray:
                return pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False)

            others = pc.replace_substring_regex(some, pattern=_UNSPACED + "+", replacement=" ")
            letters = count(some, _UNSPACED) - count(some, r"\p{M}")
            long[at] = count(others, _WORD) + letters // 2 >= DISTINCTIVE_WORDS
        return np.append(long, False)

    def holders(self, users: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Distinct users of the source ``rows`` (``users``: every row's user code) that
        hold each code's value in one of its readings."""
        span = int(users.max()) + 1
        codes = self.source_codes[:, rows].ravel()
        pairs = np.unique(codes * span + np.tile(users[rows], len(self.source_codes)))
        return np.bincount(pairs // span, minlength=len(self.dictionary) + 1)

    def code_of(self, value: str) -> np.ndarray:
        """The code of ``value`` (none, an empty array, if the source lacks it)."""
        at = pc.index(self.dictionary, value).as_py()
        return np.array([], dtype=np.int64) if at < 0 else np.array([at])

    def rows_holding(self, codes: np.ndarray) -> np.ndarray:
        """Training rows that hold one of ``codes`` (a mask over codes) in a reading."""
        return codes[self.training_codes].any(axis=0)

    def records_holding(self, codes: np.ndarray) -> np.ndarray:
        """Source records that hold one of ``codes`` (a mask over codes) in a reading."""
        return codes[self.source_codes].any(axis=0)

    def count_in_training(self, codes: np.ndarray) -> int:
        """Distinct values among ``codes`` (a mask over codes) that the training data holds."""
        return int((codes & self.in_training).sum())

    def training_reading(self) -> pa.Array:
        """The training values in their first reading, row for row."""
        return self._training_values

    def distinct_in_training(self) -> int:
        """Distinct values of the training data (its first reading)."""
        return int(pc.count_distinct(self._training_values).as_py())


_INTEGER = r"^(?:\+|(-))?0*([0-9]+)(?:\.0*)?$"


def _integer_forms(values: pa.Array) -> pa.Array:
    """Each value that writes an integer in decimal digits (a sign, leading zeros, a
    fraction of zeros) as that integer's plain form (``"-0"`` as ``"0"``); null for the
    others."""
    written = pc.match_substring_regex(values, _INTEGER)
    plain = pc.replace_substring_regex(values, pattern=_INTEGER, replacement="\\1\\2")
    plain = pc.if_else(pc.equal(plain, "-0"), "0", plain)
    return pc.if_else(written, plain, pa.nulls(len(values), pa.string()))


def _readings(read: pd.Series, written: pd.Series, text: TextPolicy) -> list[pa.Array]:
    """The texts as compared: ``read`` (as the policy reads ``written``, the texts as
    written), and where a text may hold HTML also as the gate's HTML reader shows it (a
    pipeline that extracts the text of HTML, or a source whose records are escaped HTML,
    under any ``markup``) and, under ``markup: html``, as written (a text that writes
    ``<b>`` literally is no HTML to the pipeline)."""
    first = read.reset_index(drop=True)
    readings = [first]
    marked = may_hold_markup(written)
    if marked.any():
        some = written[marked]
        readings.append(_replaced(first, marked, normalize_shown_text(some, text)))
        if text.markup == "html":
            literal = text.model_copy(update={"markup": "none"})
            readings.append(_replaced(first, marked, normalize_text(some, literal)))
    return [_matched_form(reading) for reading in readings]


def _replaced(texts: pd.Series, rows: np.ndarray, values: pd.Series) -> pd.Series:
    """``texts`` with the ``rows`` (a mask) holding ``values`` instead."""
    replaced = texts.copy()
    replaced[rows] = values.to_numpy()
    return replaced


def _side_ids(
    sides: Sequence[RawTable], column: str, is_train: np.ndarray
) -> tuple[pd.Series, np.ndarray]:
    """The ids of ``column`` in the source's tables (rows without one left out), with
    whether each row is train (``is_train``: the tables' rows in order)."""
    ids, train, start = [], [], 0
    for side in sides:
        given = given_ids(side, column)
        ids.append(given.reset_index(drop=True))
        train.append(is_train[start + side.frame.index.get_indexer(given.index)])
        start += len(side.frame)
    return pd.concat(ids, ignore_index=True), np.concatenate(train)


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


def _line(table: RawTable, rows: np.ndarray) -> int:
    """The ``__line__`` of the first row of ``table`` where ``rows`` holds."""
    return first_line(table.frame, pd.Series(rows, index=table.frame.index))
