"""Reading one table of a bundle: the gate's file reader against the spark engine's
dataset reader (README numbers).

    .venv/bin/python bench/bench_read.py --records 100000 --parts 8

Writes ``records`` records (~100 tokens of text each, as in ``bench_ngram.py``, with a
record and a user id) as one JSON Lines file, one Parquet file, and Parquet and JSON Lines
datasets of ``parts`` part files, then times ``gate.data.io.read_table`` on the files and
the spark engine's ``read_table`` on the datasets (Spark lists the data files and fetches
their bytes to the driver through Arrow; the gate parses each file as it parses a single
file); the session starts, and reads a small dataset of each format, outside the clock.
Every reader must return the same records in the same order.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from bench_ngram import make_corpus

from gate.data.io import read_table, write_table
from gate.engines.base import create_engine
from gate.policy.models import EngineSettings


def write_parts(frame: pd.DataFrame, directory: Path, fmt: str, parts: int) -> Path:
    directory.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), parts)):
        piece = frame.iloc[rows]
        if fmt == "parquet":
            pq.write_table(
                pa.Table.from_pandas(piece, preserve_index=False),
                directory / f"part-{i:05d}.parquet",
            )
        else:
            piece.to_json(
                directory / f"part-{i:05d}.json", orient="records", lines=True, force_ascii=False
            )
    return directory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    texts, _ = make_corpus(args.records // 2 + 1, np.random.default_rng(0))
    frame = pd.DataFrame(
        {
            "record_id": [f"r{i}" for i in range(args.records)],
            "user_id": [f"u{i // 2}" for i in range(args.records)],
            "text": texts[: args.records],
        }
    )
    characters = int(frame["text"].str.len().sum())
    with (
        tempfile.TemporaryDirectory() as tmp,
        create_engine(EngineSettings(name="spark", spark_master=args.master)) as engine,
    ):
        root = Path(tmp)
        write_table(frame, root / "one.jsonl")
        write_table(frame, root / "one.parquet")
        readers = {
            "file jsonl (gate)": (read_table, root / "one.jsonl"),
            "file parquet (gate)": (read_table, root / "one.parquet"),
            f"dataset parquet, {args.parts} parts (spark)": (
                engine.read_table,
                write_parts(frame, root / "parts.parquet", "parquet", args.parts),
            ),
            f"dataset jsonl, {args.parts} parts (spark)": (
                engine.read_table,
                write_parts(frame, root / "parts.jsonl", "jsonl", args.parts),
            ),
        }
        for fmt in ("parquet", "jsonl"):  # start-up and the JVM's warm-up, outside the clock
            engine.read_table(write_parts(frame.head(1000), root / f"warm.{fmt}", fmt, 2))
        results = {}
        for name, (read, path) in readers.items():
            start = time.perf_counter()
            table = read(path)
            took = time.perf_counter() - start
            same = table.frame["text"].tolist() == frame["text"].tolist() and (
                table.frame["record_id"].tolist() == frame["record_id"].tolist()
            )
            if not same:
                raise SystemExit(f"{name}: the records differ from those written")
            results[name] = round(took, 2)
            print(
                f"{name:36s} {took:6.2f} s  {args.records / took:9,.0f} records/s  "
                f"sha256 {table.sha256[:12]}",
                flush=True,
            )
    print(
        json.dumps(
            {
                "records": args.records,
                "characters": characters,
                "parts": args.parts,
                "master": args.master,
                "seconds": results,
            }
        )
    )


if __name__ == "__main__":
    main()
