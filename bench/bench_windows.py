"""The semantic class reading long texts in windows (README numbers).

    .venv/bin/python bench/bench_windows.py --records 200 --strides 0.25 0.125

``3 × records`` real-length e-mails (``gate.demo.corpora.email_threads``, 300–700
words): train, holdout, and the release copies every train e-mail between the first 280
words of an e-mail of the third part (a preamble longer than MiniLM's 256-piece window)
and its next 100 words (so that the copy is aligned with neither end of the release
text).
One ``gate check`` per setting runs a policy with the semantic class alone (threshold
0.9, rare quantile 0.05) under ``windows: first`` and ``windows: all`` at each release
stride; printed: exit code, train and holdout disclosures, ε̂, the class's seconds and the
windows per record. ``--alignment N`` first prints, for N copies, the cosine of the most
similar window pair of each copy and its source at each stride (no gate run).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from bench_audits import run_check, write_jsonl

from gate.demo.corpora import email_threads, make_faker

PREAMBLE_WORDS = 280
TRAILER_WORDS = 100


def hidden_copy(other: str, copy: str) -> str:
    """``copy`` between a preamble and a trailer taken from ``other``."""
    words = other.split()
    trailer = words[PREAMBLE_WORDS : PREAMBLE_WORDS + TRAILER_WORDS]
    return " ".join([*words[:PREAMBLE_WORDS], copy, *trailer])


def alignment(mails: list[str], strides: list[float]) -> None:
    from gate.features.embeddings import encode, model_directory
    from gate.features.text_windows import text_windows, window_tokenizer

    tokenizer, pieces = window_tokenizer(model_directory(None))
    half = len(mails) // 2
    sources, others = mails[:half], mails[half:]
    copies = [hidden_copy(o, t) for o, t in zip(others, sources, strict=True)]
    source_cut = text_windows(sources, tokenizer=tokenizer, pieces=pieces)
    source_vectors = encode(source_cut.texts)
    for fraction in [1.0, 0.5, *strides]:
        stride = max(1, round(pieces * fraction))
        cut = text_windows(copies, tokenizer=tokenizer, pieces=pieces, stride=stride)
        similarity = source_vectors @ encode(cut.texts).T
        best = np.array(
            [similarity[source_cut.owner == i][:, cut.owner == i].max() for i in range(half)]
        )
        print(
            f"stride {fraction:5.3f} ({stride:3d} pieces): cosine of the best window pair "
            f"median {np.median(best):.3f}, lowest {best.min():.3f}, "
            f"share >= 0.9 {np.mean(best >= 0.9):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--strides", type=float, nargs="+", default=[0.25])
    parser.add_argument("--alignment", type=int, default=0, metavar="N")
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    mails = [
        r["text"]
        for r in email_threads(
            3 * args.records, rng=rng, fake=make_faker(3), min_words=300, max_words=700
        )
    ]
    if args.alignment:
        alignment(mails[: 2 * args.alignment], args.strides)
    n = args.records
    train, holdout, other = mails[:n], mails[n : 2 * n], mails[2 * n :]
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        write_jsonl(
            out / "train.jsonl", [{"user_id": f"t{i}", "text": t} for i, t in enumerate(train)]
        )
        write_jsonl(
            out / "holdout.jsonl", [{"user_id": f"h{i}", "text": t} for i, t in enumerate(holdout)]
        )
        release = [hidden_copy(o, t) for o, t in zip(other, train, strict=True)]
        write_jsonl(out / "release.jsonl", [{"text": t} for t in release])
        settings = [("first", 0.25)] + [("all", s) for s in args.strides]
        for mode, stride in settings:
            policy = out / "policy.yaml"
            policy.write_text(
                "version: 1\nname: windows\naudits:\n  disclosure:\n    features:\n"
                f"      - {{class: semantic, windows: {mode}, release_window_stride: {stride}}}\n"
                "    thresholds: {max_epsilon: 0.5}\n"
            )
            report_dir = out / f"report-{mode}-{stride}"
            wall, rss, code = run_check(policy, out, out / "release.jsonl", report_dir)
            report = json.loads((report_dir / "report.json").read_text())["audits"]["disclosure"]
            metrics, details = report["metrics"], report["details"]["semantic"]
            windows = details["windows"]
            print(
                f"windows {mode:5s} stride {stride:5.3f}: exit {code}, train "
                f"{metrics['semantic.train_disclosures']:.0f}, holdout "
                f"{metrics['semantic.holdout_disclosures']:.0f}, eps "
                f"{metrics['semantic.epsilon_lower_exact']:.3f}; class {details['seconds']:.1f} s "
                f"(wall {wall:.1f} s, {rss:.2f} GB); windows per record: source "
                f"{windows['source_windows'] / (2 * n):.1f}, release "
                f"{windows['release_windows'] / n:.1f}"
            )


if __name__ == "__main__":
    main()
