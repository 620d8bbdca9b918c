"""Regurgitation features: token n-grams, hashed with vectorised polynomial arithmetic.

For token ids ``x_j`` and an odd base ``B``, ``P[i] = Σ_{j<i} x_j B^{-j} (mod 2^64)`` is one
cumulative sum; the hash of the window ``[i, i+n)`` is ``B^{i+n-1} (P[i+n] - P[i])``, the
polynomial ``Σ x_j B^{i+n-1-j}``. The prefix sums are computed once per corpus and every n
costs three array operations. Each n after the first hashes only the positions whose
shorter n-gram left the question open (an n-gram that occurs once extends to (n+1)-grams
that occur once; one absent from the other corpus extends to absent ones). Set operations
use sorting (numpy's sort of 64-bit keys is far faster than hash tables or random
``searchsorted`` here) and a bit-table pre-filter, so only n-grams that might occur in the
release reach the expensive steps. No Python loop runs over tokens. The polynomial runs
over the tokens' hashes under a key drawn for each call, so a release cannot craft
n-grams that collide with a copy's; hash matches are confirmed on the token ids before
they count, so a 64-bit collision never becomes a disclosure.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from gate.features.tokenize import TokenizedCorpus

_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2^64
_BASE_INV = np.uint64(pow(int(_BASE), -1, 1 << 64))
SHARD_POSITIONS = 8_000_000  # source positions per shard of ``ngram_disclosures``
FEW_KEYS = 4096  # sorted keys that :func:`members` searches without sorting the queries


def _powers(base: np.uint64, count: int) -> np.ndarray:
    out = np.empty(count, dtype=np.uint64)
    if count:
        out[0] = 1
        out[1:] = base
        with np.errstate(over="ignore"):
            np.cumprod(out, out=out)
    return out


def hash_powers(count: int, *, base: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``B^-i`` and ``B^i`` for ``i < count`` (default base: the module's), to share
    between hashers of corpora of at most ``count`` tokens."""
    forward = _BASE if base is None else np.uint64(base)
    inverse = _BASE_INV if base is None else np.uint64(pow(base, -1, 1 << 64))
    return _powers(inverse, count), _powers(forward, count)


def hash_key() -> str:
    """A secret key for :func:`token_hashes`, new for every run: with a known key, two
    tokens whose hashes agree in their low bits can be found, and a Thue–Morse sequence of
    them collides with its complement under the n-gram hash (a crafted release could hide
    a copy that way)."""
    return secrets.token_hex(8)


def token_hashes(tokens: Any, *, key: str) -> np.ndarray:
    """64-bit hashes (never 0) of token strings: SipHash (pandas) under ``key``, a string
    of 16 characters (:func:`hash_key`)."""
    values = np.asarray(tokens.to_numpy(zero_copy_only=False), dtype=object)
    hashed = pd.util.hash_array(values, hash_key=key, categorize=False)
    hashed[hashed == 0] = 1
    return hashed


class NgramHasher:
    """Prefix sums of one corpus (flat token ids and document starts), shared by every n."""

    def __init__(
        self,
        ids: np.ndarray,
        starts: np.ndarray,
        *,
        base: int | None = None,
        powers: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.ids = ids
        self.starts = starts
        total = ids.size
        inverse, forward = hash_powers(total, base=base) if powers is None else powers
        with np.errstate(over="ignore"):
            self.prefix = np.zeros(total + 1, dtype=np.uint64)
            np.cumsum(ids.astype(np.uint64) * inverse[:total], out=self.prefix[1:])
        self.powers = forward[:total]
        self.doc = np.repeat(np.arange(starts.size - 1, dtype=np.int64), np.diff(starts))

    @classmethod
    def of(cls, corpus: TokenizedCorpus) -> NgramHasher:
        return cls(corpus.ids, corpus.starts)

    def doc_of(self, positions: np.ndarray) -> np.ndarray:
        """Document of each position."""
        return self.doc[positions]

    def doc_end(self, positions: np.ndarray) -> np.ndarray:
        """End (exclusive) of the document of each position."""
        return self.starts[self.doc[positions] + 1]

    def positions(self, n: int) -> np.ndarray:
        """Start positions of the n-grams that lie inside one document."""
        total = self.ids.size
        if total < n:
            return np.empty(0, dtype=np.int64)
        return self.fitting(np.arange(total - n + 1, dtype=np.int64), n)

    def fitting(self, positions: np.ndarray, n: int) -> np.ndarray:
        """Those of ``positions`` at which an n-gram lies inside one document."""
        return positions[positions + n <= self.doc_end(positions)]

    def hashes(self, positions: np.ndarray, n: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return self.powers[positions + n - 1] * (
                self.prefix[positions + n] - self.prefix[positions]
            )

    def shard(
        self, n: int, shard: int, shards: int, *, block: int = 1 << 22
    ) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the n-grams in shard ``shard`` of ``shards`` (by the hash's top
        bits, so equal n-grams share a shard) and their hashes, in blocks of positions."""
        total = self.ids.size - n + 1
        found_pos, found_hash = [], []
        for start in range(0, max(total, 0), block):
            pos = self.fitting(np.arange(start, min(start + block, total), dtype=np.int64), n)
            hashes = self.hashes(pos, n)
            if shards > 1:
                keep = partition_of(hashes, shards) == shard
                pos, hashes = pos[keep], hashes[keep]
            found_pos.append(pos)
            found_hash.append(hashes)
        if not found_pos:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
        return np.concatenate(found_pos), np.concatenate(found_hash)


def partition_of(hashes: np.ndarray, partitions: int) -> np.ndarray:
    """Hash partition (0..partitions-1) of each n-gram hash: equal n-grams share one."""
    return ((hashes >> np.uint64(40)) % np.uint64(partitions)).astype(np.int64)


@dataclass(frozen=True)
class NgramIndex:
    """Hashes of every n-gram of a corpus that lies inside one document."""

    hashes: np.ndarray  # uint64
    positions: np.ndarray  # start position in corpus.ids
    docs: np.ndarray  # document index


def ngram_index(corpus: TokenizedCorpus, n: int) -> NgramIndex:
    """All n-grams of ``corpus`` that do not cross a document boundary."""
    if n < 1:
        raise ValueError(f"n must be >= 1; found {n}")
    hasher = NgramHasher.of(corpus)
    positions = hasher.positions(n)
    return NgramIndex(hasher.hashes(positions, n), positions, hasher.doc[positions])


def same_tokens(
    a: TokenizedCorpus, a_pos: np.ndarray, b: TokenizedCorpus, b_pos: np.ndarray, n: int
) -> np.ndarray:
    """Row-wise: do the n tokens at ``a_pos`` in ``a`` equal those at ``b_pos`` in ``b``?"""
    offsets = np.arange(n, dtype=np.int64)
    return (a.ids[a_pos[:, None] + offsets] == b.ids[b_pos[:, None] + offsets]).all(axis=1)


def _bit_filter(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Indices of ``queries`` that may be in ``keys`` (a one-hash Bloom filter, no false
    negatives, about 1/8 false positives)."""
    bits = int(min(30, max(10, np.ceil(np.log2(max(keys.size, 1) * 8)))))
    mask = np.uint64((1 << bits) - 1)
    table = np.zeros(1 << bits, dtype=bool)
    table[(keys & mask).astype(np.int64)] = True
    return np.nonzero(table[(queries & mask).astype(np.int64)])[0]


def members(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Boolean: is each query in ``sorted_keys``? (queries sorted first for locality,
    unless the keys are few enough to stay in cache)."""
    if sorted_keys.size == 0 or queries.size == 0:
        return np.zeros(queries.size, dtype=bool)
    if sorted_keys.size <= FEW_KEYS:
        where = np.minimum(np.searchsorted(sorted_keys, queries), sorted_keys.size - 1)
        return sorted_keys[where] == queries
    order = np.argsort(queries)
    where = np.searchsorted(sorted_keys, queries[order])
    hit = sorted_keys[np.minimum(where, sorted_keys.size - 1)] == queries[order]
    out = np.empty(queries.size, dtype=bool)
    out[order] = hit
    return out


def sorted_runs(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs."""
    if ordered.size == 0:
        return ordered, np.empty(0, dtype=np.int64)
    starts = np.nonzero(np.r_[True, ordered[1:] != ordered[:-1]])[0]
    return ordered[starts], np.diff(np.r_[starts, ordered.size])


def distinct_per_group(groups: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(group, member)`` pairs: the groups (sorted) and members of each pair."""
    order = np.lexsort((members, groups))
    g, m = groups[order], members[order]
    first = np.ones(g.size, dtype=bool)
    first[1:] = (g[1:] != g[:-1]) | (m[1:] != m[:-1])
    return g[first], m[first]


def _count_rare(
    hashes: np.ndarray, users: np.ndarray, max_users: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """Distinct hashes held by at most ``max_users`` users, which entries of ``hashes``
    occur more than once, and which entries are of a hash so held."""
    distinct, sizes = sorted_runs(np.sort(hashes))
    singles = int((sizes == 1).sum())
    repeated = distinct[sizes > 1]  # sorted, unique
    is_repeated = np.zeros(hashes.size, dtype=bool)
    if repeated.size == 0:
        return singles, is_repeated, ~is_repeated
    idx = _bit_filter(repeated, hashes)
    idx = idx[members(repeated, hashes[idx])]
    is_repeated[idx] = True
    pair_hashes, _ = distinct_per_group(hashes[idx], users[idx])
    held, users_per_hash = sorted_runs(pair_hashes)
    rare_repeated = held[users_per_hash <= max_users]
    is_rare = ~is_repeated
    is_rare[idx[members(rare_repeated, hashes[idx])]] = True
    return singles + int(rare_repeated.size), is_repeated, is_rare


@dataclass(frozen=True)
class NgramDisclosures:
    """Rare n-grams of the source corpus and those the release discloses.

    ``record_counts[i]``: distinct rare disclosed n-grams (over every n) of source record
    ``i``; ``user_counts[u]``: the same per user, the unit of membership (a feature in
    two records of one user counts once), i.e. the ``c_u`` of the feature-match test.
    ``witness_*`` hold, for each source record with ``c_i > 0``, its longest disclosed
    n-gram (the first in the record among equally long ones): its token offset in the
    record, its length, and the release record of its first occurrence in the release.
    ``rare_records[i]``: record ``i`` holds a rare n-gram (a release copying it would
    disclose one).
    """

    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray
    user_counts: np.ndarray
    witness_record: np.ndarray
    witness_offset: np.ndarray
    witness_length: np.ndarray
    witness_synthetic: np.ndarray
    rare_records: np.ndarray


class Documents(Protocol):
    """Where the documents of a flat token sequence begin and end."""

    def doc_of(self, positions: np.ndarray) -> np.ndarray: ...

    def doc_end(self, positions: np.ndarray) -> np.ndarray: ...


Confirm = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


class NgramTally:
    """Counts of :func:`ngram_disclosures` accumulated over lengths and hash partitions
    (every sum is over distinct n-grams, and equal n-grams always meet in one partition,
    so partitions add up)."""

    def __init__(self, *, n_records: int, n_users: int, n_max: int) -> None:
        self.n_max = n_max
        self.rare = 0
        self.disclosed = 0
        self.record_counts = np.zeros(n_records, dtype=np.int64)
        self.user_counts = np.zeros(n_users, dtype=np.int64)
        self.best_len = np.zeros(n_records, dtype=np.int64)
        self.best_pos = np.full(n_records, -1, dtype=np.int64)
        self.best_syn = np.full(n_records, -1, dtype=np.int64)
        self.rare_records = np.zeros(n_records, dtype=bool)
        # unique_room[r]: n-grams that occur once in the source with r tokens to go in
        # their document; each extends to one unique (hence rare) n-gram of every length
        # up to r, so they are counted without being hashed again
        self.unique_room = np.zeros(n_max + 2, dtype=np.int64)

    def start_length(self, n: int) -> None:
        """Count the rare n-grams that extend unique shorter ones."""
        self.rare += int(self.unique_room[n:].sum())

    def match_length(
        self,
        n: int,
        *,
        repeated_pos: np.ndarray,
        repeated_hash: np.ndarray,
        src_pos: np.ndarray,
        src_hash: np.ndarray,
        syn_pos: np.ndarray,
        syn_hash: np.ndarray,
        source: Documents,
        synthetic: Documents,
        users: np.ndarray,
        max_users: int,
        confirm: Confirm,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Count the rare and the disclosed n-grams of one length in one partition.

        ``repeated_*``: source occurrences whose (n-1)-gram occurred more than once
        (every occurrence at ``n == n_min``); ``src_*``/``syn_*``: source and release
        occurrences whose (n-1)-gram occurred in both. Positions must be ascending.

        Returns the source positions whose n-gram is repeated, and the source and the
        release positions whose n-gram occurs in both: what length n + 1 must hash
        (prefix pruning: the (n+1)-gram at a position extends the n-gram there, so it is
        unique if the n-gram is and occurs in the other corpus only if the n-gram does).
        """
        empty = np.empty(0, dtype=np.int64)
        docs = source.doc_of(repeated_pos)
        rare, repeated, is_rare = _count_rare(repeated_hash, users[docs], max_users)
        self.rare += rare
        self.rare_records[docs[is_rare]] = True
        unique = repeated_pos[~repeated]
        room = np.minimum(source.doc_end(unique) - unique, self.n_max + 1)
        self.unique_room += np.bincount(room, minlength=self.n_max + 2)
        still_repeated = repeated_pos[repeated]
        if src_pos.size == 0 or syn_pos.size == 0:
            return still_repeated, empty, empty
        # Source occurrences whose hash occurs in the release (all occurrences of such a
        # hash survive the filter, so rarity can be computed on them alone).
        cand = _bit_filter(syn_hash, src_hash)
        cand = cand[members(np.sort(syn_hash), src_hash[cand])]
        if cand.size == 0:
            return still_repeated, empty, empty
        # release occurrences of the source's n-grams: their hashes are those of ``cand``
        src_shared_hash = np.sort(src_hash[cand])
        syn_shared = _bit_filter(src_shared_hash, syn_hash)
        syn_shared = syn_shared[members(src_shared_hash, syn_hash[syn_shared])]
        shared = still_repeated, src_pos[cand], syn_pos[syn_shared]
        src_user = users[source.doc_of(src_pos[cand])]
        pair_hash, _ = distinct_per_group(src_hash[cand], src_user)
        distinct, holders = sorted_runs(pair_hash)
        rare_shared = distinct[holders <= max_users]
        cand = cand[members(rare_shared, src_hash[cand])]
        if cand.size == 0:
            return shared
        # The first release occurrence of each disclosed hash, to confirm on tokens and cite.
        syn_idx = syn_shared[members(rare_shared, syn_hash[syn_shared])]
        syn_order = syn_idx[np.argsort(syn_hash[syn_idx], kind="stable")]
        syn_sorted = syn_hash[syn_order]
        syn_occ = syn_order[np.searchsorted(syn_sorted, src_hash[cand])]
        confirmed = confirm(src_pos[cand], syn_pos[syn_occ], n)
        cand, syn_occ = cand[confirmed], syn_occ[confirmed]
        if cand.size == 0:
            return shared
        hashes = src_hash[cand]
        self.disclosed += sorted_runs(np.sort(hashes))[0].size
        docs = source.doc_of(src_pos[cand])
        user_of_pair, _ = distinct_per_group(users[docs], hashes)
        self.user_counts += np.bincount(user_of_pair, minlength=self.user_counts.size)
        self.add_records(
            n,
            docs=docs,
            hashes=hashes,
            pos=src_pos[cand],
            syn_docs=synthetic.doc_of(syn_pos[syn_occ]),
        )
        return shared

    def add_records(
        self,
        n: int,
        *,
        docs: np.ndarray,
        hashes: np.ndarray,
        pos: np.ndarray,
        syn_docs: np.ndarray,
    ) -> None:
        """Confirmed disclosures of length ``n`` in source records ``docs`` (one entry
        per occurrence, at source position ``pos``, first found in release record
        ``syn_docs``): each distinct (record, n-gram) pair adds one to its record's count,
        and the occurrences compete for the record's witness. The pairs must be new to
        the tally; the n-grams and their users are counted by :meth:`match_length`."""
        if docs.size == 0:
            return
        record_of_pair, _ = distinct_per_group(docs, hashes)
        self.record_counts += np.bincount(record_of_pair, minlength=self.record_counts.size)
        self._witness(n, docs, pos, syn_docs)

    def _witness(self, n: int, docs: np.ndarray, pos: np.ndarray, syn_docs: np.ndarray) -> None:
        """Keep, per record, the longest disclosed n-gram, the first in the record among
        equally long ones (the same witness whatever the partitions)."""
        order = np.lexsort((pos, docs))
        docs, pos, syn_docs = docs[order], pos[order], syn_docs[order]
        first = np.r_[True, docs[1:] != docs[:-1]]
        docs, pos, syn_docs = docs[first], pos[first], syn_docs[first]
        better = (n > self.best_len[docs]) | (
            (n == self.best_len[docs]) & (pos < self.best_pos[docs])
        )
        docs = docs[better]
        self.best_len[docs] = n
        self.best_pos[docs] = pos[better]
        self.best_syn[docs] = syn_docs[better]

    def result(self, source_starts: np.ndarray) -> NgramDisclosures:
        has = np.nonzero(self.record_counts > 0)[0]
        return NgramDisclosures(
            rare_features=self.rare,
            disclosed_features=self.disclosed,
            record_counts=self.record_counts,
            user_counts=self.user_counts,
            witness_record=has,
            witness_offset=self.best_pos[has] - source_starts[has],
            witness_length=self.best_len[has],
            witness_synthetic=self.best_syn[has],
            rare_records=self.rare_records,
        )


def check_ngram_arguments(
    *, n_records: int, users: np.ndarray, n_min: int, n_max: int, max_users: int
) -> np.ndarray:
    """Validate the arguments every n-gram engine takes; the users as int64."""
    if not 1 <= n_min <= n_max:
        raise ValueError(f"need 1 <= n_min <= n_max; found n_min={n_min}, n_max={n_max}")
    if max_users < 1:
        raise ValueError(f"max_users must be >= 1; found {max_users}")
    users = np.asarray(users, dtype=np.int64)
    if users.shape != (n_records,):
        raise ValueError(f"users must have one entry per source document ({n_records})")
    if users.size and users.min() < 0:
        raise ValueError(f"users must be integer codes >= 0; found {users.min()}")
    return users


def keyed_hashers(source: TokenizedCorpus, synthetic: TokenizedCorpus) -> tuple[NgramHasher, ...]:
    """Hashers of two corpora of one vocabulary over their tokens' hashes under a key drawn
    for this call (:func:`hash_key`). Over the public token ids, a release could place,
    before a verbatim copy, n-grams whose hash equals the copy's but whose tokens do not
    (lattice reduction finds them in seconds): the copy's confirmation, which reads the
    first release occurrence of each hash, failed and the copy went uncounted."""
    values = token_hashes(source.vocab, key=hash_key())
    return tuple(
        NgramHasher(values[corpus.ids - 1] if corpus.ids.size else corpus.ids, corpus.starts)
        for corpus in (source, synthetic)
    )


def ngram_disclosures(
    source: TokenizedCorpus,
    synthetic: TokenizedCorpus,
    *,
    users: np.ndarray,
    n_min: int,
    n_max: int,
    max_users: int,
    shards: int | None = None,
    progress: Any = None,
) -> NgramDisclosures:
    """Rare (held by at most ``max_users`` users) n-grams, ``n_min <= n <= n_max``, of the
    source documents and their disclosure in the synthetic documents, in memory.

    ``source`` and ``synthetic`` must share one vocabulary (tokenise them together).
    ``users[d]`` is the integer user (0..U-1) of source document ``d``. The work runs in
    ``shards`` hash partitions of the n_min-grams (default: one per
    :data:`SHARD_POSITIONS` source tokens), so that the working arrays of the n-gram steps
    hold one shard at a time; the counts do not depend on the number of shards. (For
    corpora beyond memory, :func:`gate.features.ngram_spill.spilled_ngram_disclosures`.)
    """
    users = check_ngram_arguments(
        n_records=source.n_docs, users=users, n_min=n_min, n_max=n_max, max_users=max_users
    )
    if shards is None:
        shards = max(1, -(-source.ids.size // SHARD_POSITIONS))
    if shards < 1:
        raise ValueError(f"shards must be >= 1; found {shards}")
    tally = NgramTally(
        n_records=source.n_docs,
        n_users=int(users.max()) + 1 if users.size else 0,
        n_max=n_max,
    )
    src_hasher, syn_hasher = keyed_hashers(source, synthetic)
    lengths = range(n_min, n_max + 1)
    if progress is None:
        steps: Any = [(s, n) for s in range(shards) for n in lengths]
    else:
        steps = progress.track(
            ((s, n) for s in range(shards) for n in lengths),
            total=shards * len(lengths),
            description="n-grams" if shards == 1 else f"n-grams ({shards} shards)",
        )

    def confirm(src_pos: np.ndarray, syn_pos: np.ndarray, n: int) -> np.ndarray:
        return same_tokens(source, src_pos, synthetic, syn_pos, n)

    # Each shard holds the n_min-grams whose hash falls in it and every longer n-gram that
    # extends them, so equal n-grams always meet in one shard and the shards add up.
    empty = np.empty(0, dtype=np.int64)
    shared_src = shared_syn = repeated_pos = empty  # carried from n to n + 1
    for shard, n in steps:
        if n == n_min:
            src_pos, src_hash = src_hasher.shard(n_min, shard, shards)
            syn_pos, syn_hash = syn_hasher.shard(n_min, shard, shards)
            repeated_pos, repeated_hash = src_pos, src_hash
            tally.unique_room[:] = 0  # the room of this shard's unique n-grams
        else:
            repeated_pos = src_hasher.fitting(repeated_pos, n)
            repeated_hash = src_hasher.hashes(repeated_pos, n)
            src_pos = src_hasher.fitting(shared_src, n)
            syn_pos = syn_hasher.fitting(shared_syn, n)
            src_hash = src_hasher.hashes(src_pos, n)
            syn_hash = syn_hasher.hashes(syn_pos, n)
        tally.start_length(n)
        repeated_pos, shared_src, shared_syn = tally.match_length(
            n,
            repeated_pos=repeated_pos,
            repeated_hash=repeated_hash,
            src_pos=src_pos,
            src_hash=src_hash,
            syn_pos=syn_pos,
            syn_hash=syn_hash,
            source=src_hasher,
            synthetic=syn_hasher,
            users=users,
            max_users=max_users,
            confirm=confirm,
        )
    return tally.result(source.starts[:-1])
