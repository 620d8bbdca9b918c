"""Rarity and disclosure of integer-coded features (PII strings, any discrete feature).

Features are given as occurrences: ``(document, code)`` pairs for the source and for the
release, codes from one shared dictionary. Everything is sorting and bincounts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CodedDisclosures:
    """``record_counts``/``user_counts``: distinct rare disclosed codes per source record /
    user. ``witness_*``: for each source record with a disclosure, one disclosed code and a
    release document holding it. ``rare_records[i]``: source record ``i`` holds a rare code."""

    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray
    user_counts: np.ndarray
    witness_record: np.ndarray
    witness_code: np.ndarray
    witness_synthetic: np.ndarray
    rare_records: np.ndarray


def _distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])] if a.size else np.zeros(0, bool)
    return a[first], b[first]


def coded_disclosures(
    *,
    source_docs: np.ndarray,
    source_codes: np.ndarray,
    synthetic_docs: np.ndarray,
    synthetic_codes: np.ndarray,
    users: np.ndarray,
    max_users: int,
) -> CodedDisclosures:
    """Rare codes (held by at most ``max_users`` users) of the source and those in the release.

    Args:
        source_docs, source_codes: occurrences in the source (document index, code).
        synthetic_docs, synthetic_codes: occurrences in the release.
        users: integer user (0..U-1) of each source document.
        max_users: rarity threshold k >= 1.
    """
    if max_users < 1:
        raise ValueError(f"max_users must be >= 1; found {max_users}")
    users = np.asarray(users, dtype=np.int64)
    n_records, n_users = users.size, (int(users.max()) + 1 if users.size else 0)
    src_docs = np.asarray(source_docs, dtype=np.int64)
    src_codes = np.asarray(source_codes, dtype=np.int64)
    # Users per code.
    code_of_pair, _ = _distinct_pairs(src_codes, users[src_docs])
    codes, holders = np.unique(code_of_pair, return_counts=True)
    rare_codes = codes[holders <= max_users]
    in_release = np.unique(np.asarray(synthetic_codes, dtype=np.int64))
    disclosed_codes = np.intersect1d(rare_codes, in_release, assume_unique=True)
    hit = np.isin(src_codes, disclosed_codes)
    docs, hit_codes = _distinct_pairs(src_docs[hit], src_codes[hit])
    record_counts = np.bincount(docs, minlength=n_records)
    user_docs, _ = _distinct_pairs(users[docs], hit_codes)
    user_counts = np.bincount(user_docs, minlength=n_users)
    # Witnesses: the first disclosed code of each record and a release document with it.
    first_of_doc = np.r_[True, docs[1:] != docs[:-1]] if docs.size else np.zeros(0, bool)
    w_records, w_codes = docs[first_of_doc], hit_codes[first_of_doc]
    syn_order = np.argsort(synthetic_codes, kind="stable")
    syn_sorted = np.asarray(synthetic_codes)[syn_order]
    w_syn = (
        np.asarray(synthetic_docs)[syn_order[np.searchsorted(syn_sorted, w_codes)]]
        if w_codes.size
        else w_codes
    )
    rare_records = np.zeros(n_records, dtype=bool)
    rare_records[src_docs[np.isin(src_codes, rare_codes)]] = True
    return CodedDisclosures(
        rare_features=int(rare_codes.size),
        disclosed_features=int(disclosed_codes.size),
        record_counts=record_counts,
        user_counts=user_counts,
        witness_record=w_records,
        witness_code=w_codes,
        witness_synthetic=np.asarray(w_syn, dtype=np.int64),
        rare_records=rare_records,
    )
