"""Embedding throughput of the semantic class on e-mails or chats (README numbers).

    .venv/bin/python bench/bench_semantic.py --records 600 [--corpus emails|chats]

Encodes ``records`` e-mails (``gate.demo.corpora.email_threads``: 200–800 words; MiniLM
truncates to 256 word pieces) or support chats (``gate.demo.corpora.support_records``, the
records of ``bench/bench_audits.py`` on which issue 13 measured about 40 records/s; about
60 words) with the bundled all-MiniLM-L6-v2: the former default (float32, batch 64), written here as
the gate used to run it (texts in the order given, 512 to a sentence-transformers call,
which sorts them by length in characters), the same order at batch 16 in float32 and in
bfloat16 autocast, then ``gate.features.embeddings.encode`` (texts sorted by their length
in word pieces; no cache) in float32 and bfloat16 at batch 16. Agreement: per-text cosine
of each embedding with the former default's.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from bench_pii import email_texts

from gate.demo.corpora import make_faker, support_records
from gate.features.embeddings import encode, load_encoder


def chat_texts(records: int, seed: int) -> list[str]:
    """``records`` support chats; prints their length distribution."""
    rng, fake = np.random.default_rng(seed), make_faker(seed)
    texts: list[str] = []
    while len(texts) < records:
        texts += [r["text"] for r in support_records(1000, rng=rng, fake=fake)]
    words = np.array([len(t.split()) for t in texts[:records]])
    print(
        f"{records} chats, words per chat: median {np.median(words):.0f}, "
        f"range {words.min()}-{words.max()}"
    )
    return texts[:records]


def former_encode(texts: list[str], *, batch_size: int, precision: str) -> np.ndarray:
    """The gate's ``encode`` before texts were ordered by word pieces (the reference)."""
    encoder = load_encoder(None)
    chunk = max(batch_size * 8, 256)
    out = []
    for start in range(0, len(texts), chunk):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            out.append(
                encoder.encode(
                    texts[start : start + chunk],
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ).astype(np.float32)
            )
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--corpus", choices=("emails", "chats"), default="emails")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all encoders")
    args = parser.parse_args()
    make = email_texts if args.corpus == "emails" else chat_texts
    texts = make(args.records, seed=1)
    print(
        f"torch threads {torch.get_num_threads()}; "
        f"AVX512-BF16: {torch.cpu._is_avx512_bf16_supported()}"
    )
    load_encoder(None)
    encode(texts[:16])  # warm-up
    reference = None
    runs = [
        ("former default: float32, batch 64, character order", former_encode, "float32", 64),
        ("float32, batch 16, character order", former_encode, "float32", 16),
        ("bfloat16, batch 16, character order", former_encode, "bfloat16", 16),
        ("float32, batch 16, word-piece order (encode)", encode, "float32", 16),
        ("bfloat16, batch 16, word-piece order (encode)", encode, "bfloat16", 16),
    ]
    took: dict[str, list[float]] = {label: [] for label, *_ in runs}
    cosine: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):  # rounds interleave the encoders: the machine's drift hits all
        for label, run, precision, batch in runs:
            t0 = time.perf_counter()
            vectors = run(texts, batch_size=batch, precision=precision)
            took[label].append(time.perf_counter() - t0)
            if reference is None:
                reference = vectors
            cosine[label] = (vectors * reference).sum(axis=1)
    base = float(np.median(took[runs[0][0]]))
    for label, *_ in runs:
        median = float(np.median(took[label]))
        spread = ", ".join(f"{len(texts) / t:.1f}" for t in took[label])
        print(
            f"{label:48s}: {len(texts) / median:5.1f} records/s median ({spread}); "
            f"{base / median:.2f}x; cosine with the former default: "
            f"min {cosine[label].min():.5f}, mean {cosine[label].mean():.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
