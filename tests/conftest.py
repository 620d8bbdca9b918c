from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

MINIMAL_POLICY = """\
version: 1
name: test
audits:
  disclosure:
    features:
      - class: ngram
        n_min: 3
        n_max: 4
    thresholds:
      max_epsilon: 0.5
"""


@pytest.fixture(autouse=True)
def _work_in_a_temporary_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test runs in a directory of its own, so that the default MLflow store
    (./mlflow.db, ./mlruns) and gate-report/ never land in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def write_jsonl(path: Path, rows: Iterable[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_policy(path: Path, text: str = MINIMAL_POLICY) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def check_args(files: dict[str, Path], out: Path, *extra: str, **options: str) -> list[str]:
    """``gate check`` arguments for a bundle of files (train, holdout, synthetic, policy);
    ``options`` become ``--key value``."""
    args = [
        "check",
        "--quiet",
        "--policy",
        str(files["policy"]),
        "--train",
        str(files["train"]),
        "--holdout",
        str(files["holdout"]),
        "--synthetic",
        str(files["synthetic"]),
        "--out",
        str(out),
        *extra,
    ]
    for key, value in options.items():
        args += [f"--{key}", value]
    return args


def read_report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def unique_text(i: int, words: int = 12) -> str:
    """A sentence whose tokens are unique to record ``i``: every n-gram is rare."""
    return " ".join(f"w{i}x{j}" for j in range(words))


def write_bundle(
    tmp_path: Path,
    *,
    train: int,
    holdout: int,
    copied: int,
    policy: str = MINIMAL_POLICY,
    holdout_offset: int = 100,
) -> dict[str, Path]:
    """``train`` and ``holdout`` users with one record each (the holdout's texts numbered
    from ``holdout_offset``); a release that copies the first ``copied`` train records."""
    train_file = write_jsonl(
        tmp_path / "train.jsonl",
        [{"record_id": f"t{i}", "user_id": f"ut{i}", "text": unique_text(i)} for i in range(train)],
    )
    holdout_file = write_jsonl(
        tmp_path / "holdout.jsonl",
        [
            {"record_id": f"h{i}", "user_id": f"uh{i}", "text": unique_text(holdout_offset + i)}
            for i in range(holdout)
        ],
    )
    synthetic = write_jsonl(
        tmp_path / "synthetic.jsonl",
        [{"record_id": f"s{i}", "text": unique_text(i)} for i in range(copied)],
    )
    return {
        "train": train_file,
        "holdout": holdout_file,
        "synthetic": synthetic,
        "policy": write_policy(tmp_path / "policy.yaml", policy),
    }


@pytest.fixture
def bundle_files(tmp_path: Path) -> dict[str, Path]:
    """20 train and 20 holdout users with one record each; a release that copies train."""
    return write_bundle(tmp_path, train=20, holdout=20, copied=10)
