"""Regurgitation features: token n-grams, hashed with vectorised polynomial arithmetic.

For token ids ``x_j`` and an odd base ``B``, ``P[i] = Σ_{j<i} x_j B^{-j} (mod 2^64)`` is one
cumulative sum; the hash of the window ``[i, i+n)`` is ``B^{i+n-1} (P[i+n] - P[i])``, the
polynomial ``Σ x_j B^{i+n-1-j}``. No Python loop runs over tokens. Hash matches are
confirmed on the token ids themselves before they count, so a 64-bit collision never
becomes a disclosure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gate.features.tokenize import TokenizedCorpus

_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2^64


def _inverse_mod_2_64(a: int) -> int:
    return pow(a, -1, 1 << 64)


_BASE_INV = np.uint64(_inverse_mod_2_64(int(_BASE)))


@dataclass(frozen=True)
class NgramIndex:
    """Hashes of every n-gram of a corpus that lies inside one document."""

    hashes: np.ndarray  # uint64
    positions: np.ndarray  # start position in corpus.ids
    docs: np.ndarray  # document index


def _powers(base: np.uint64, count: int) -> np.ndarray:
    out = np.empty(count, dtype=np.uint64)
    out[0] = 1
    if count > 1:
        out[1:] = base
        with np.errstate(over="ignore"):
            np.cumprod(out, out=out)
    return out


def ngram_index(corpus: TokenizedCorpus, n: int) -> NgramIndex:
    """All n-grams of ``corpus`` that do not cross a document boundary."""
    if n < 1:
        raise ValueError(f"n must be >= 1; found {n}")
    total = corpus.ids.size
    if total < n:
        empty = np.empty(0, dtype=np.int64)
        return NgramIndex(np.empty(0, dtype=np.uint64), empty, empty)
    ids = corpus.ids.astype(np.uint64)
    with np.errstate(over="ignore"):
        inv_powers = _powers(_BASE_INV, total)
        prefix = np.zeros(total + 1, dtype=np.uint64)
        np.cumsum(ids * inv_powers, out=prefix[1:])
        starts = np.arange(total - n + 1, dtype=np.int64)
        doc = corpus.doc_of_position()[: total - n + 1]
        valid = starts + n <= corpus.starts[doc + 1]
        starts, doc = starts[valid], doc[valid]
        powers = _powers(_BASE, total)
        hashes = powers[starts + n - 1] * (prefix[starts + n] - prefix[starts])
    return NgramIndex(hashes=hashes, positions=starts, docs=doc)


def same_tokens(
    a: TokenizedCorpus, a_pos: np.ndarray, b: TokenizedCorpus, b_pos: np.ndarray, n: int
) -> np.ndarray:
    """Row-wise: do the n tokens at ``a_pos`` in ``a`` equal those at ``b_pos`` in ``b``?"""
    offsets = np.arange(n, dtype=np.int64)
    return (a.ids[a_pos[:, None] + offsets] == b.ids[b_pos[:, None] + offsets]).all(axis=1)


@dataclass(frozen=True)
class NgramDisclosures:
    """Rare n-grams of the source corpus and those the release discloses.

    ``record_counts[i]``: distinct rare disclosed n-grams (over every n) of source record
    ``i``; ``user_counts[u]``: the same per user, the unit of membership (a feature in
    two records of one user counts once), i.e. the ``c_u`` of the feature-match test.
    ``witness_*`` hold, for each source record with ``c_i > 0``, its
    longest disclosed n-gram: source position, length, and a synthetic document holding it.
    """

    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray
    user_counts: np.ndarray
    witness_record: np.ndarray
    witness_position: np.ndarray
    witness_length: np.ndarray
    witness_synthetic: np.ndarray


def ngram_disclosures(
    source: TokenizedCorpus,
    synthetic: TokenizedCorpus,
    *,
    users: np.ndarray,
    n_min: int,
    n_max: int,
    max_users: int,
    progress=None,
) -> NgramDisclosures:
    """Rare (held by at most ``max_users`` users) n-grams, ``n_min <= n <= n_max``, of the
    source documents and their disclosure in the synthetic documents.

    ``source`` and ``synthetic`` must share one vocabulary (tokenise them together).
    ``users[d]`` is the integer user (0..U-1) of source document ``d``.
    """
    if not 1 <= n_min <= n_max:
        raise ValueError(f"need 1 <= n_min <= n_max; found n_min={n_min}, n_max={n_max}")
    if max_users < 1:
        raise ValueError(f"max_users must be >= 1; found {max_users}")
    users = np.asarray(users, dtype=np.int64)
    if users.shape != (source.n_docs,):
        raise ValueError(f"users must have one entry per source document ({source.n_docs})")
    if users.size and users.min() < 0:
        raise ValueError(f"users must be integer codes >= 0; found {users.min()}")
    n_records = source.n_docs
    n_users = int(users.max()) + 1 if users.size else 0
    counts = np.zeros(n_records, dtype=np.int64)
    per_user = np.zeros(n_users, dtype=np.int64)
    best_len = np.zeros(n_records, dtype=np.int64)
    best_pos = np.full(n_records, -1, dtype=np.int64)
    best_syn = np.full(n_records, -1, dtype=np.int64)
    rare_total = 0
    disclosed_total = 0
    lengths = range(n_min, n_max + 1)
    iterator = (
        progress.track(lengths, total=len(lengths), description="n-grams") if progress else lengths
    )
    for n in iterator:
        src = ngram_index(source, n)
        if src.hashes.size == 0:
            continue
        # Rarity: distinct users per hash.
        user_of = users[src.docs]
        order = np.lexsort((user_of, src.hashes))
        h_sorted, u_sorted = src.hashes[order], user_of[order]
        new_hash = np.r_[True, h_sorted[1:] != h_sorted[:-1]]
        new_pair = new_hash | np.r_[True, u_sorted[1:] != u_sorted[:-1]]
        group = np.cumsum(new_hash) - 1
        users_per_hash = np.bincount(group, weights=new_pair).astype(np.int64)
        rare_hash_mask = users_per_hash <= max_users
        rare_total += int(rare_hash_mask.sum())
        occurrence_rare = rare_hash_mask[group]
        cand = order[occurrence_rare]  # occurrences (indices into src) of rare n-grams
        if cand.size == 0:
            continue
        syn = ngram_index(synthetic, n)
        if syn.hashes.size == 0:
            continue
        syn_order = np.argsort(syn.hashes, kind="stable")
        syn_sorted = syn.hashes[syn_order]
        where = np.searchsorted(syn_sorted, src.hashes[cand])
        where_clipped = np.minimum(where, syn_sorted.size - 1)
        hit = syn_sorted[where_clipped] == src.hashes[cand]
        cand, where_clipped = cand[hit], where_clipped[hit]
        if cand.size == 0:
            continue
        syn_occ = syn_order[where_clipped]
        confirmed = same_tokens(source, src.positions[cand], synthetic, syn.positions[syn_occ], n)
        cand, syn_occ = cand[confirmed], syn_occ[confirmed]
        if cand.size == 0:
            continue
        disclosed_total += int(np.unique(src.hashes[cand]).size)
        # c_i: distinct disclosed n-grams per record (a record repeating one counts it once).
        docs = src.docs[cand]
        pair_order = np.lexsort((src.hashes[cand], docs))
        d_sorted, h_sorted2 = docs[pair_order], src.hashes[cand][pair_order]
        first = np.r_[True, (d_sorted[1:] != d_sorted[:-1]) | (h_sorted2[1:] != h_sorted2[:-1])]
        counts += np.bincount(d_sorted[first], minlength=n_records)
        owners = users[docs]
        user_order = np.lexsort((src.hashes[cand], owners))
        o_sorted, h_by_user = owners[user_order], src.hashes[cand][user_order]
        first_u = np.r_[True, (o_sorted[1:] != o_sorted[:-1]) | (h_by_user[1:] != h_by_user[:-1])]
        per_user += np.bincount(o_sorted[first_u], minlength=n_users)
        # Witness: the longest n per record (later n overwrite earlier ones).
        best_len[docs] = n
        best_pos[docs] = src.positions[cand]
        best_syn[docs] = syn.docs[syn_occ]
    has = counts > 0
    return NgramDisclosures(
        rare_features=rare_total,
        disclosed_features=disclosed_total,
        record_counts=counts,
        user_counts=per_user,
        witness_record=np.nonzero(has)[0],
        witness_position=best_pos[has],
        witness_length=best_len[has],
        witness_synthetic=best_syn[has],
    )
