"""Command line: parse, call one library function, print, exit code.

Exit codes (DESIGN.md): 0 pass, 1 the release fails the policy, 2 bad usage or bad input,
3 an audit could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gate._version import __version__
from gate.errors import GateError, InputError

EXIT_INPUT = 2
EXIT_ERROR = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gate", description="Pre-release privacy gate for synthetic text releases."
    )
    parser.add_argument("--version", action="version", version=f"gate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="gate a synthetic release against a policy")
    check.add_argument("--policy", required=True, help="policy YAML file")
    check.add_argument("--synthetic", required=True, help="synthetic release (jsonl/csv/parquet)")
    check.add_argument("--train", help="train records")
    check.add_argument("--holdout", help="holdout records")
    check.add_argument("--source", help="source records with a 'split' column")
    check.add_argument("--manifest", help="split-manifest.json written by `gate split`")
    check.add_argument("--out", default="gate-report", help="report directory (gate-report/)")
    check.add_argument("--seed", type=int, help="override the policy's seed")
    check.add_argument("--quiet", action="store_true", help="no progress bars (CI logs)")
    check.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    check.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///mlflow.db)")
    check.add_argument("--data-docs", help="build a Great Expectations Data Docs site here")

    split = sub.add_parser("split", help="reproducible Bernoulli(p) train/holdout split by user")
    split.add_argument("--source", required=True, help="source records (jsonl/csv/parquet)")
    split.add_argument("--p", type=float, default=0.5, help="train probability (0.5)")
    split.add_argument("--seed", type=int, required=True, help="seed of the assignment")
    split.add_argument("--by", default="user_id", help="column that defines users (user_id)")
    split.add_argument("--out", required=True, help="output directory")

    policy = sub.add_parser("policy", help="validate, show or describe policies")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    validate = policy_sub.add_parser("validate", help="check a policy file")
    validate.add_argument("path")
    show = policy_sub.add_parser("show", help="print the effective policy (after defaults)")
    show.add_argument("path")
    policy_sub.add_parser("schema", help="print the policy JSON Schema")

    sub.add_parser("audits", help="list the audits this installation can run")
    return parser


def _check(args: argparse.Namespace) -> int:
    from rich.console import Console

    from gate.api import check_release
    from gate.evidence.summary import print_summary
    from gate.progress import NullProgress, RichProgress

    progress = RichProgress() if not args.quiet and sys.stderr.isatty() else NullProgress()
    outcome = check_release(
        policy=args.policy,
        synthetic=args.synthetic,
        train=args.train,
        holdout=args.holdout,
        source=args.source,
        manifest=args.manifest,
        out_dir=args.out,
        seed=args.seed,
        progress=progress,
        mlflow=not args.no_mlflow,
        tracking_uri=args.tracking_uri,
        data_docs=args.data_docs,
    )
    console = Console() if sys.stdout.isatty() else Console(width=120, soft_wrap=True)
    print_summary(outcome.result, console, report_path=str(outcome.report_path))
    if outcome.mlflow_run_id:
        console.print(f"mlflow run: {outcome.mlflow_run_id}")
    return outcome.result.exit_code


def _split(args: argparse.Namespace) -> int:
    from gate.data.split import split_source

    outcome = split_source(args.source, p=args.p, seed=args.seed, by=args.by, out_dir=args.out)
    m = outcome.manifest
    print(
        f"split {m.source.records} records of {m.source.users} users with p = {m.p:g}, "
        f"seed = {m.seed}: train {m.train.records} records / {m.train.users} users, "
        f"holdout {m.holdout.records} records / {m.holdout.users} users"
    )
    print(f"manifest: {outcome.manifest_path}")
    return 0


def _policy(args: argparse.Namespace) -> int:
    from gate.policy.loader import effective_policy_yaml, load_policy, policy_json_schema

    if args.policy_command == "schema":
        print(json.dumps(policy_json_schema(), indent=2))
        return 0
    loaded = load_policy(args.path)
    if args.policy_command == "validate":
        from gate.audits.registry import policy_checks
        from gate.registry import PluginUnavailableError

        audits = loaded.policy.audits.enabled()
        try:
            checks: str = f"{len(policy_checks(loaded.policy))} threshold checks"
        except PluginUnavailableError as exc:
            checks = f"threshold checks not counted: {exc}"
        print(
            f"{args.path}: valid policy {loaded.policy.name!r} (version "
            f"{loaded.policy.version}): {len(audits)} audits, {checks}; sha256 {loaded.sha256}"
        )
    else:
        print(effective_policy_yaml(loaded.policy), end="")
    return 0


def _audits(args: argparse.Namespace) -> int:
    from gate.audits.registry import available_audits

    for name in available_audits():
        print(name)
    return 0


COMMANDS = {"check": _check, "split": _split, "policy": _policy, "audits": _audits}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
