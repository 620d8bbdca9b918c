"""Embedding throughput of the semantic class on real-length e-mails (README numbers).

    .venv/bin/python bench/bench_semantic.py --records 600

Encodes ``records`` e-mails (``gate.demo.corpora.email_threads``: 200–800 words; MiniLM
truncates to 256 word pieces) with the bundled all-MiniLM-L6-v2 through
``gate.features.embeddings.encode`` (no cache): the former default (float32, batch 64), then
float32 and bfloat16 autocast at batch 16. Agreement: per-text cosine of each embedding
with the former default's.
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_pii import email_texts

from gate.features.embeddings import encode, load_encoder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600)
    args = parser.parse_args()
    texts = email_texts(args.records, seed=1)
    print(
        f"torch threads {torch.get_num_threads()}; "
        f"AVX512-BF16: {torch.cpu._is_avx512_bf16_supported()}"
    )
    load_encoder(None)
    encode(texts[:16])  # warm-up
    reference = None
    base = 0.0
    for precision, batch in (("float32", 64), ("float32", 16), ("bfloat16", 16)):
        t0 = time.perf_counter()
        vectors = encode(texts, batch_size=batch, precision=precision)  # type: ignore[arg-type]
        took = time.perf_counter() - t0
        if reference is None:
            reference, base = vectors, took
        cosine = (vectors * reference).sum(axis=1)
        print(
            f"{precision:8s} batch {batch:3d}: {len(texts) / took:5.1f} records/s "
            f"({base / took:.2f}x), cosine with float32/64: min {cosine.min():.5f}, "
            f"mean {cosine.mean():.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
