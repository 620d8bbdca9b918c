"""N-gram disclosures of corpora larger than memory: the same counts as
:func:`gate.features.ngram.ngram_disclosures`, with peak memory set by the chunk size.

1. Each corpus is tokenised in chunks of records (Arrow kernels, as in memory), a record
   longer than a chunk in pieces of about a chunk, and each token is replaced by a 64-bit
   hash of its text, so no vocabulary spans chunks; the token hashes go to one file per
   corpus on disk.
2. For each n from ``n_min`` to ``n_max``, every chunk (or piece) hashes the n-grams at
   its open positions and appends ``(hash, position)`` records to hash partitions on disk
   (equal n-grams land in one partition); each partition is then reduced alone by the
   kernel of the in-memory path (:class:`gate.features.ngram.NgramTally`), which also says
   which positions stay open for n + 1 (prefix pruning).

Resident besides the texts (which the caller holds): one chunk, one partition, the token
flags (one byte per token), the record starts and the per-record and per-user counts.
Disclosures are confirmed on the token hashes of both occurrences (read from the files),
so a collision of n-gram hashes never counts as a disclosure; the token hashes are keyed
by a secret drawn for each run, so collisions cannot be crafted either. Sizes of text are
counted in characters.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gate.features.ngram import (
    NgramDisclosures,
    NgramHasher,
    NgramTally,
    check_ngram_arguments,
    distinct_per_group,
    hash_key,
    hash_powers,
    members,
    partition_of,
    sorted_runs,
    token_hashes,
)
from gate.features.tokenize import Texts, arrow_texts, tokenize

CHUNK_CHARS = 8 * 2**20  # characters of text per chunk of the spilled path
PARTITION_RECORDS = 1_000_000  # n_min-grams of the larger corpus per partition (17 MB)
# a partition holding more than SKEW_BLOCKS blocks of BLOCK_RECORDS (one n-gram in every
# record of a large corpus: a footer, a disclaimer, a generator repeating itself) is read
# in blocks, its common n-grams settled and its release occurrences deduplicated first
BLOCK_RECORDS = 1_000_000
SKEW_BLOCKS = 2
CONFIRM_BATCH = 16_384  # disclosures confirmed per mapping of the token files
_REPEATED, _SHARED = np.uint8(1), np.uint8(2)
_SOURCE_RECORD = np.dtype([("hash", "<u8"), ("pos", "<i8"), ("flags", "u1")])
_RELEASE_RECORD = np.dtype([("hash", "<u8"), ("pos", "<i8")])
_ASCII_BLANK = np.zeros(256, dtype=bool)
_ASCII_BLANK[[0x09, 0x0A, 0x0D, 0x20]] = True


@dataclass(frozen=True)
class SpilledCorpus:
    """A corpus tokenised to disk: token hashes in ``path``, ``starts[d]`` the first token
    of record ``d``, ``windows[w]`` the first token of window ``w`` of the n-gram pass
    (plus the end): whole records of about a chunk, or a piece of a larger record."""

    path: Path
    starts: np.ndarray
    windows: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    def doc_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, positions, side="right") - 1

    def doc_end(self, positions: np.ndarray) -> np.ndarray:
        return self.starts[self.doc_of(positions) + 1]

    def read(self, first: int, stop: int) -> np.ndarray:
        """Token hashes ``first .. stop-1``."""
        return np.fromfile(self.path, dtype=np.uint64, count=stop - first, offset=8 * first)

    def memmap(self) -> np.ndarray:
        if self.tokens == 0:
            return np.zeros(0, dtype=np.uint64)
        return np.memmap(self.path, dtype=np.uint64, mode="r", shape=(self.tokens,))


def text_sizes(texts: Texts) -> np.ndarray:
    """Characters of each text, plus one for the separator."""
    lengths = pc.utf8_length(arrow_texts(texts)).fill_null(0)
    return lengths.to_numpy().astype(np.int64) + 1


def chunk_bounds(sizes: np.ndarray, chunk_chars: int) -> np.ndarray:
    """First record of each chunk of about ``chunk_chars`` characters (and the end), given
    the :func:`text_sizes` of the records; a record of more than ``chunk_chars`` is a chunk
    of its own."""
    ends = np.cumsum(sizes)
    cuts = np.searchsorted(ends, np.arange(chunk_chars, ends[-1] if ends.size else 0, chunk_chars))
    large = np.flatnonzero(sizes > chunk_chars)
    return np.unique(np.r_[0, cuts, large, large + 1, sizes.size]).astype(np.int64)


def text_pieces(text: pa.LargeStringArray, *, piece_bytes: int) -> pa.LargeStringArray:
    """The one text of ``text`` cut into pieces of about ``piece_bytes`` bytes of UTF-8
    (at most twice that, unless a run without white space is longer), each cut just after
    an ASCII space, tab, line feed or carriage return: white space to both tokenizers and
    never part of another character, so the tokens of the pieces, in order, are those of
    the text. The pieces share the text's buffer."""
    _, offsets, data = text.buffers()
    first, stop = np.frombuffer(offsets, dtype=np.int64)[text.offset : text.offset + 2]
    utf8 = np.frombuffer(data, dtype=np.uint8)
    cuts = [int(first)]
    for block in range(int(first), int(stop) - piece_bytes, piece_bytes):  # not the last
        blank = _ASCII_BLANK[utf8[block : block + piece_bytes]]
        if blank.any():  # cut after the block's last white space
            cuts.append(block + piece_bytes - int(np.argmax(blank[::-1])))
    bounds = np.asarray([*cuts, int(stop)], dtype=np.int64)
    return pa.LargeStringArray.from_buffers(bounds.size - 1, pa.py_buffer(bounds), data)


def spill_tokens(
    texts: Texts,
    path: Path,
    *,
    chunk_chars: int,
    tokenizer: Literal["whitespace", "word"],
    lowercase: bool,
    strip_punctuation: bool,
    key: str,
    progress: Any = None,
    description: str = "tokenise",
) -> SpilledCorpus:
    """Tokenise ``texts`` chunk by chunk into token hashes (under ``key``) written to
    ``path``; a record of more than ``chunk_chars`` piece by piece
    (:func:`text_pieces`)."""
    texts = arrow_texts(texts)
    sizes = text_sizes(texts)
    chunks = chunk_bounds(sizes, chunk_chars)
    lengths = np.zeros(len(texts), dtype=np.int64)
    windows = [0]
    steps: Any = range(chunks.size - 1)
    if progress is not None:
        steps = progress.track(steps, total=chunks.size - 1, description=description)
    with open(path, "wb") as out:
        for c in steps:
            first, stop = int(chunks[c]), int(chunks[c + 1])
            records = texts[first:stop]
            chunk = records.chunk(0) if records.num_chunks == 1 else records.combine_chunks()
            parts = [chunk]
            if stop - first == 1 and sizes[first] > chunk_chars:
                pieces = text_pieces(chunk, piece_bytes=chunk_chars)
                parts = [pieces.slice(i, 1) for i in range(len(pieces))]
            for part in parts:  # a part is the chunk, or a piece of its one record
                corpus = tokenize(
                    part,
                    tokenizer=tokenizer,
                    lowercase=lowercase,
                    strip_punctuation=strip_punctuation,
                )
                token_hash = token_hashes(corpus.vocab, key=key)
                out.write(token_hash[corpus.ids - 1].tobytes())
                lengths[first:stop] += corpus.lengths
                windows.append(windows[-1] + corpus.ids.size)
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return SpilledCorpus(path=path, starts=starts, windows=np.unique(windows).astype(np.int64))


def window_powers(corpus: SpilledCorpus, n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """The hash powers every window of ``corpus`` needs with the ``n_max - 1`` tokens read
    beyond it."""
    return hash_powers(int(np.diff(corpus.windows).max(initial=0)) + n_max - 1)


class _Partitions:
    """Append-only record files, one per hash partition."""

    def __init__(self, directory: Path, name: str, count: int, dtype: np.dtype) -> None:
        self.paths = [directory / f"{name}-{p}.bin" for p in range(count)]
        self.dtype = dtype
        for path in self.paths:
            path.write_bytes(b"")

    def append(self, records: np.ndarray, partition: np.ndarray) -> None:
        # a stable sort of small integers is a radix sort in numpy
        small = np.uint16 if len(self.paths) <= 1 << 16 else np.int64
        order = np.argsort(partition.astype(small), kind="stable")
        bounds = np.searchsorted(partition[order], np.arange(len(self.paths) + 1))
        records = records[order]
        for p, path in enumerate(self.paths):
            if bounds[p + 1] > bounds[p]:
                with open(path, "ab") as out:
                    out.write(records[bounds[p] : bounds[p + 1]].tobytes())

    def take(self, p: int) -> np.ndarray:
        """Partition ``p``'s records (positions ascending), and delete its file."""
        records = np.fromfile(self.paths[p], dtype=self.dtype)
        self.paths[p].unlink()
        return records

    def delete(self, p: int) -> None:
        """Delete partition ``p``'s file."""
        self.paths[p].unlink()

    def records(self, p: int) -> int:
        """How many records partition ``p`` holds."""
        return self.paths[p].stat().st_size // self.dtype.itemsize

    def blocks(self, p: int, size: int) -> Iterator[np.ndarray]:
        """Partition ``p``'s records in blocks of ``size`` (positions ascending)."""
        for first in range(0, self.records(p), size):
            offset = first * self.dtype.itemsize
            yield np.fromfile(self.paths[p], dtype=self.dtype, count=size, offset=offset)


def _open_ngrams(
    corpus: SpilledCorpus,
    open_flags: np.ndarray,
    n: int,
    powers: tuple[np.ndarray, np.ndarray],
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per window: the open positions whose n-gram fits in its record, and the n-gram
    hashes (``powers``: :func:`window_powers` of the corpus). A window's n-grams are read
    with the ``n - 1`` tokens after it: a window can end inside a record."""
    for w in range(corpus.windows.size - 1):
        first, stop = int(corpus.windows[w]), int(corpus.windows[w + 1])
        local = np.nonzero(open_flags[first:stop])[0]
        if local.size == 0:
            continue
        end = min(stop + n - 1, corpus.tokens)
        docs = corpus.doc_of(np.array([first, end - 1]))
        starts = np.clip(corpus.starts[docs[0] : docs[1] + 2] - first, 0, end - first)
        hasher = NgramHasher(corpus.read(first, end), starts, powers=powers)
        local = hasher.fitting(local, n)
        yield local + first, hasher.hashes(local, n)


def spilled_ngram_disclosures(
    source_texts: Texts,
    synthetic_texts: Texts,
    *,
    users: np.ndarray,
    n_min: int,
    n_max: int,
    max_users: int,
    tokenizer: Literal["whitespace", "word"] = "whitespace",
    lowercase: bool = False,
    strip_punctuation: bool = False,
    chunk_chars: int = CHUNK_CHARS,
    partitions: int | None = None,
    block_records: int = BLOCK_RECORDS,
    workdir: str | os.PathLike[str] | None = None,
    progress: Any = None,
) -> NgramDisclosures:
    """:func:`gate.features.ngram.ngram_disclosures` of texts, tokenised and counted in
    chunks of ``chunk_chars`` of text through hash partitions on disk (in a temporary
    directory under ``workdir``, removed afterwards).

    ``partitions`` defaults to one per :data:`PARTITION_RECORDS` tokens of the larger
    corpus. A partition of more than :data:`SKEW_BLOCKS` blocks of ``block_records`` is
    reduced as :func:`_reduce_skewed` says. The counts do not depend on the chunks, the
    partitions or the blocks.
    """
    users = check_ngram_arguments(
        n_records=len(source_texts), users=users, n_min=n_min, n_max=n_max, max_users=max_users
    )
    if chunk_chars < 1:
        raise ValueError(f"chunk_chars must be >= 1; found {chunk_chars}")
    if block_records < 1:
        raise ValueError(f"block_records must be >= 1; found {block_records}")
    options = {
        "tokenizer": tokenizer,
        "lowercase": lowercase,
        "strip_punctuation": strip_punctuation,
        "key": hash_key(),  # one key for both corpora
    }  # the keyword arguments of spill_tokens
    source_texts, synthetic_texts = arrow_texts(source_texts), arrow_texts(synthetic_texts)
    with tempfile.TemporaryDirectory(prefix="gate-ngrams-", dir=workdir) as tmp:
        directory = Path(tmp)
        source = spill_tokens(
            source_texts,
            directory / "source.bin",
            chunk_chars=chunk_chars,
            progress=progress,
            description="tokenise source",
            **options,  # type: ignore[arg-type]
        )
        synthetic = spill_tokens(
            synthetic_texts,
            directory / "release.bin",
            chunk_chars=chunk_chars,
            progress=progress,
            description="tokenise release",
            **options,  # type: ignore[arg-type]
        )
        if partitions is None:
            # every release position is a record at n_min: a release far larger than the
            # source must not make one partition larger than memory
            largest = max(source.tokens, synthetic.tokens)
            partitions = max(1, -(-largest // PARTITION_RECORDS))
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1; found {partitions}")
        return _count(
            source,
            synthetic,
            directory,
            users=users,
            n_min=n_min,
            n_max=n_max,
            max_users=max_users,
            partitions=partitions,
            block_records=block_records,
            progress=progress,
        )


def _holders(
    records: np.ndarray, *, source: SpilledCorpus, users: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct hashes of ``records`` (sorted) and how many users hold each."""
    pair_hash, _ = distinct_per_group(records["hash"], users[source.doc_of(records["pos"])])
    return sorted_runs(pair_hash)


def _reduce_skewed(
    src_parts: _Partitions,
    syn_parts: _Partitions,
    p: int,
    *,
    src_flags: np.ndarray,
    source: SpilledCorpus,
    users: np.ndarray,
    max_users: int,
    block_records: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Partition ``p`` read in blocks, for when a few n-grams fill it. The common ones,
    held by more than ``max_users`` users within one block among the repeated occurrences
    and among the shared ones (or never shared), so rare in no count, are settled here:
    their source positions get the flags the kernel would give them for n + 1 (repeated;
    shared if the release has the n-gram), and their records are left out. Of the other
    source records, the first two of each hash in each user's records with the same
    flags are kept (:func:`_first_two_per_user`). Of the release's records, the first
    occurrence of each other hash is kept (all the kernel needs to find, confirm and cite
    a disclosure). Resident: one block, the source records left, the release's distinct
    hashes, the common hashes. The source partition stays on disk for
    :func:`_settle_dropped`.

    Returns:
        The source records left and the release records kept (positions ascending), the
        common hashes the release shares (sorted): the caller flags every release
        occurrence of those and of the hashes the kernel finds shared, and the hashes of
        which source records were dropped as repeats within their user's records
        (sorted).
    """
    empty = np.empty(0, dtype=np.uint64)
    held_widely: dict[np.uint8, list[np.ndarray]] = {_REPEATED: [empty], _SHARED: [empty]}
    shared_hashes = [empty]
    for block in src_parts.blocks(p, block_records):
        for flag, found in held_widely.items():
            held = block[(block["flags"] & flag) > 0]
            if held.size:
                distinct, holders = _holders(held, source=source, users=users)
                found.append(distinct[holders > max_users])
        shared_hashes.append(np.unique(block["hash"][(block["flags"] & _SHARED) > 0]))
    # common: rare neither among the repeated occurrences nor among the shared ones (with
    # a collision of hashes the two may differ: a review), or never shared
    repeated_widely, shared_widely = (np.unique(np.concatenate(f)) for f in held_widely.values())
    never_shared = np.setdiff1d(repeated_widely, np.concatenate(shared_hashes))
    common = np.union1d(np.intersect1d(repeated_widely, shared_widely), never_shared)
    firsts = [np.empty(0, dtype=_RELEASE_RECORD)]
    for block in syn_parts.blocks(p, block_records):
        firsts.append(block[np.unique(block["hash"], return_index=True)[1]])
    release = np.concatenate(firsts)
    # the earliest block's occurrence of each hash is the first: positions ascend
    release = release[np.sort(np.unique(release["hash"], return_index=True)[1])]
    is_common = np.isin(release["hash"], common)
    released_common, release = release["hash"][is_common], release[~is_common]
    left, shared = [np.empty(0, dtype=_SOURCE_RECORD)], [np.empty(0, dtype=np.uint64)]
    crowded = [np.empty(0, dtype=np.uint64)]
    for block in src_parts.blocks(p, block_records):
        held = np.isin(block["hash"], common)
        records = block[held]
        src_flags[records["pos"][(records["flags"] & _REPEATED) > 0]] |= _REPEATED
        in_release = ((records["flags"] & _SHARED) > 0) & np.isin(records["hash"], released_common)
        src_flags[records["pos"][in_release]] |= _SHARED
        shared.append(records["hash"][in_release])
        firsts_of_block, dropped = _first_two_per_user(block[~held], source=source, users=users)
        left.append(firsts_of_block)
        crowded.append(dropped)
    kept, dropped = _first_two_per_user(np.concatenate(left), source=source, users=users)
    crowded.append(dropped)
    return kept, release, np.unique(np.concatenate(shared)), np.unique(np.concatenate(crowded))


def _first_two_per_user(
    records: np.ndarray, *, source: SpilledCorpus, users: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The first two source records of each hash in each user's documents among those
    with the same flags (positions ascending), and the hashes of which records were
    dropped (sorted). The kernel's counts of n-grams and users read no more: whether a
    hash occurs more than once and which users hold it. What it reads of records (which
    hold a rare n-gram, a disclosure and its witness) is added for the dropped records
    by :func:`_settle_dropped`; a text of one token repeated, or one user's signature in
    millions of records, no longer keeps every occurrence."""
    if records.size < 3:
        return records, np.empty(0, dtype=np.uint64)
    group = users[source.doc_of(records["pos"])] * 4 + records["flags"]
    order = np.lexsort((records["pos"], group, records["hash"]))
    h, g = records["hash"][order], group[order]
    new_group = np.r_[True, (h[1:] != h[:-1]) | (g[1:] != g[:-1])]
    second = np.r_[False, new_group[:-1]] & ~new_group
    keep = new_group | second
    return records[np.sort(order[keep])], np.unique(h[~keep])


class _PairSet:
    """A set of (document, hash) pairs (or (user, hash) pairs), queried many times: each
    pair as one sorted int64 key, the hash's rank among the set's hashes (``hashes``,
    sorted) times the documents plus the document."""

    def __init__(self, docs: np.ndarray, hashes: np.ndarray, *, n_docs: int) -> None:
        self.hashes = np.unique(hashes)
        if self.hashes.size * max(n_docs, 1) >= 2**63:
            raise OverflowError(
                f"{self.hashes.size:,} hashes x {n_docs:,} documents do not fit 64-bit keys"
            )
        self.n_docs = n_docs
        self.keys = np.sort(np.searchsorted(self.hashes, hashes) * n_docs + docs)

    def holds(self, docs: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Which (document, hash) pairs are in the set."""
        if self.hashes.size == 0 or docs.size == 0:
            return np.zeros(docs.size, dtype=bool)
        rank = np.minimum(np.searchsorted(self.hashes, hashes), self.hashes.size - 1)
        found = self.hashes[rank] == hashes
        found[found] = members(self.keys, rank[found] * self.n_docs + docs[found])
        return found


def _settle_dropped(
    src_parts: _Partitions,
    p: int,
    n: int,
    *,
    kept: np.ndarray,
    crowded: np.ndarray,
    release: np.ndarray,
    repeated_hashes: np.ndarray,
    shared_hashes: np.ndarray,
    src_flags: np.ndarray,
    tally: NgramTally,
    source: SpilledCorpus,
    synthetic: SpilledCorpus,
    users: np.ndarray,
    max_users: int,
    confirm: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    block_records: int,
) -> None:
    """What the kernel would have read of the occurrences in partition ``p`` that
    :func:`_first_two_per_user` dropped (``kept``: the source records it counted;
    ``crowded``: the hashes of the dropped ones, sorted; ``release``: the first release
    occurrence of each hash it saw), block by block, among the occurrences of
    ``crowded`` (the kernel saw every occurrence of the other hashes):

    - every occurrence of the hashes the kernel found repeated or shared gets the flag
      for n + 1 (both are properties of the hash, among the occurrences with the flag);
    - the records of the repeated occurrences of a rare hash hold a rare n-gram;
    - the first occurrence in a record of a hash the kernel found disclosed by the
      record's user, in a record whose occurrences the kernel did not see, is confirmed
      on its tokens against the release's first occurrence; confirmed, it adds the
      record's disclosure and competes for its witness.

    The kept records hold every (hash, user, flags) the partition does, so the kernel
    counted every rare and disclosed hash and every user holding one, and only a record
    of a user it counted is added (a review: under a collision of hashes within one
    user's n-grams, a record counted while its user was not). Positions ascend in a
    partition, so a record's pairs straddle at most one edge between blocks.
    """
    kept = kept[members(crowded, kept["hash"])]
    repeated_hashes = repeated_hashes[members(crowded, repeated_hashes)]
    shared_hashes = shared_hashes[members(crowded, shared_hashes)]
    distinct, holders = _holders(kept[(kept["flags"] & _REPEATED) > 0], source=source, users=users)
    rare = distinct[holders <= max_users]
    by_hash = np.argsort(release["hash"])
    release_hashes = release["hash"][by_hash]

    def first_in_release(of: np.ndarray) -> np.ndarray:
        """The release position of the first occurrence of each hash in ``of``."""
        return release["pos"][by_hash[np.searchsorted(release_hashes, of)]]

    offered = ((kept["flags"] & _SHARED) > 0) & members(release_hashes, kept["hash"])
    distinct, holders = _holders(kept[offered], source=source, users=users)
    seen = kept[offered & members(distinct[holders <= max_users], kept["hash"])]
    # what the kernel confirmed: the (user, hash) pairs it counted
    disclosed = seen[confirm(seen["pos"], first_in_release(seen["hash"]), n)]
    disclosed_by = _PairSet(
        users[source.doc_of(disclosed["pos"])], disclosed["hash"], n_docs=tally.user_counts.size
    )
    known = _PairSet(source.doc_of(seen["pos"]), seen["hash"], n_docs=source.starts.size - 1)
    if crowded.size * source.starts.size * 4 >= 2**63:
        raise OverflowError(f"{crowded.size:,} n-grams x {source.starts.size:,} records overflow")
    last_doc, last_hashes = -1, np.empty(0, dtype=np.uint64)  # counted in the last record seen
    for block in src_parts.blocks(p, block_records):
        block = block[members(crowded, block["hash"])]
        if block.size == 0:
            continue
        hashes, flags, pos = block["hash"], block["flags"], block["pos"]
        for flag, found in ((_REPEATED, repeated_hashes), (_SHARED, shared_hashes)):
            has = ((flags & flag) > 0) & members(found, hashes)
            src_flags[pos[has]] |= flag
        docs = source.doc_of(pos)
        # what is read of records, from the first occurrence of each (record, hash) with
        # the same flags: a text of one token repeated leaves one per record
        pair_key = docs * crowded.size + np.searchsorted(crowded, hashes)
        firsts = np.sort(np.unique(pair_key * 4 + flags, return_index=True)[1])
        hashes, flags, pos, docs = hashes[firsts], flags[firsts], pos[firsts], docs[firsts]
        pair_key = pair_key[firsts]
        tally.rare_records[docs[((flags & _REPEATED) > 0) & members(rare, hashes)]] = True
        cand = np.nonzero(((flags & _SHARED) > 0) & members(disclosed_by.hashes, hashes))[0]
        cand = cand[disclosed_by.holds(users[docs[cand]], hashes[cand])]
        # of those with either flag the release may share
        cand = cand[np.sort(np.unique(pair_key[cand], return_index=True)[1])]
        new = ~known.holds(docs[cand], hashes[cand])
        new &= ~((docs[cand] == last_doc) & members(np.sort(last_hashes), hashes[cand]))
        cand = cand[new]
        syn_pos = first_in_release(hashes[cand])
        confirmed = confirm(pos[cand], syn_pos, n)
        cand, syn_pos = cand[confirmed], syn_pos[confirmed]
        tally.add_records(
            n,
            docs=docs[cand],
            hashes=hashes[cand],
            pos=pos[cand],
            syn_docs=synthetic.doc_of(syn_pos),
        )
        # the last record may go on in the next block
        if docs[-1] != last_doc:
            last_doc, last_hashes = int(docs[-1]), last_hashes[:0]
        last_hashes = np.r_[last_hashes, hashes[cand][docs[cand] == last_doc]]


def _count(
    source: SpilledCorpus,
    synthetic: SpilledCorpus,
    directory: Path,
    *,
    users: np.ndarray,
    n_min: int,
    n_max: int,
    max_users: int,
    partitions: int,
    block_records: int,
    progress: Any,
) -> NgramDisclosures:
    tally = NgramTally(
        n_records=source.starts.size - 1,
        n_users=int(users.max()) + 1 if users.size else 0,
        n_max=n_max,
    )
    # open positions: source bit 1 = the n-gram so far is repeated, bit 2 = it occurs in
    # the release; release: it occurs in the source. Every position is open at n_min.
    src_powers, syn_powers = window_powers(source, n_max), window_powers(synthetic, n_max)
    src_flags = np.full(source.tokens, _REPEATED | _SHARED, dtype=np.uint8)
    syn_flags = np.ones(synthetic.tokens, dtype=bool)

    def confirm(src_pos: np.ndarray, syn_pos: np.ndarray, n: int) -> np.ndarray:
        offsets = np.arange(n, dtype=np.int64)
        order = np.argsort(src_pos)  # read the source file in order
        same = np.empty(src_pos.size, dtype=bool)
        for first in range(0, order.size, CONFIRM_BATCH):
            batch = order[first : first + CONFIRM_BATCH]
            # mapped per batch: the pages read leave the resident set with the map
            src_tokens, syn_tokens = source.memmap(), synthetic.memmap()
            same[batch] = (
                src_tokens[src_pos[batch][:, None] + offsets]
                == syn_tokens[syn_pos[batch][:, None] + offsets]
            ).all(axis=1)
            del src_tokens, syn_tokens
        return same

    lengths: Any = range(n_min, n_max + 1)
    if progress is not None:
        lengths = progress.track(
            lengths, total=n_max - n_min + 1, description=f"n-grams ({partitions} partitions)"
        )
    exhausted = False  # no source n-gram is open: nothing longer can be disclosed
    for n in lengths:
        tally.start_length(n)
        if exhausted:
            continue
        src_parts = _Partitions(directory, f"source-{n}", partitions, _SOURCE_RECORD)
        syn_parts = _Partitions(directory, f"release-{n}", partitions, _RELEASE_RECORD)
        for pos, hashes in _open_ngrams(source, src_flags, n, src_powers):
            records = np.empty(pos.size, dtype=_SOURCE_RECORD)
            records["hash"], records["pos"], records["flags"] = hashes, pos, src_flags[pos]
            src_parts.append(records, partition_of(hashes, partitions))
        for pos, hashes in _open_ngrams(synthetic, syn_flags, n, syn_powers):
            records = np.empty(pos.size, dtype=_RELEASE_RECORD)
            records["hash"], records["pos"] = hashes, pos
            syn_parts.append(records, partition_of(hashes, partitions))
        src_flags[:] = 0
        syn_flags[:] = False
        for p in range(partitions):
            skewed = max(src_parts.records(p), syn_parts.records(p)) > SKEW_BLOCKS * block_records
            if skewed:
                src, syn, shared_common, crowded = _reduce_skewed(
                    src_parts,
                    syn_parts,
                    p,
                    src_flags=src_flags,
                    source=source,
                    users=users,
                    max_users=max_users,
                    block_records=block_records,
                )
            else:
                src, syn = src_parts.take(p), syn_parts.take(p)
            repeated = (src["flags"] & _REPEATED) > 0
            shared = (src["flags"] & _SHARED) > 0
            still_repeated, shared_src, shared_syn = tally.match_length(
                n,
                repeated_pos=src["pos"][repeated],
                repeated_hash=src["hash"][repeated],
                src_pos=src["pos"][shared],
                src_hash=src["hash"][shared],
                syn_pos=syn["pos"],
                syn_hash=syn["hash"],
                source=source,
                synthetic=synthetic,
                users=users,
                max_users=max_users,
                confirm=confirm,
            )
            src_flags[still_repeated] |= _REPEATED
            src_flags[shared_src] |= _SHARED
            if skewed:
                if crowded.size:
                    _settle_dropped(
                        src_parts,
                        p,
                        n,
                        kept=src,
                        crowded=crowded,
                        release=syn,
                        repeated_hashes=np.unique(src["hash"][np.isin(src["pos"], still_repeated)]),
                        shared_hashes=np.unique(src["hash"][np.isin(src["pos"], shared_src)]),
                        src_flags=src_flags,
                        tally=tally,
                        source=source,
                        synthetic=synthetic,
                        users=users,
                        max_users=max_users,
                        confirm=confirm,
                        block_records=block_records,
                    )
                src_parts.delete(p)
                # every release occurrence of a shared hash, not only the first
                in_source = np.union1d(shared_common, syn["hash"][np.isin(syn["pos"], shared_syn)])
                for block in syn_parts.blocks(p, block_records):
                    syn_flags[block["pos"][np.isin(block["hash"], in_source)]] = True
                syn_parts.delete(p)
            else:
                syn_flags[shared_syn] = True
        exhausted = not src_flags.any()
    return tally.result(source.starts[:-1])
