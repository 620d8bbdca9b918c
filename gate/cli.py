"""Command line: parse, call one library function, print, exit code.

Exit codes: 0 pass, 1 the release fails the policy, 2 bad usage or bad input,
3 an audit could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gate._version import __version__
from gate.errors import GateError
from gate.evidence.escape import one_line
from gate.interrupts import (
    Terminated,
    forget_earlier_run,
    interrupt,
    raise_if_interrupted,
    raise_interruption_behind,
    signals_held,
    terminate,
    verdict_in_place,
)
from gate.quiet import quiet_libraries

if TYPE_CHECKING:
    from gate.api import CheckOutcome


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; found {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; found {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds; found {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be in (0, 3600] seconds; found {value:g}")
    return value


def _not_blank(what: str, otherwise: str) -> Callable[[str], str]:
    """An option's type that refuses an empty or blank value (an unset variable in a CI
    script), saying what it must name and what a blank one would have done."""

    def named(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(
                f"must name {what}; found {text!r} (an unset variable?){otherwise}"
            )
        return text

    return named


_tracking_uri = _not_blank(
    "a tracking store",
    "; leave the option out for $MLFLOW_TRACKING_URI, the policy's or ./mlflow.db",
)
_directory = _not_blank("a directory", ", which would write into the current directory")


class _Once(argparse.Action):
    """An option's value, given once: a second ``--synthetic`` had silently replaced the
    first (a review: a CI wrapper that appends options gated the last file given)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given = namespace.__dict__.setdefault("_given_options", set())
        if self.dest in given:
            parser.error(f"argument {option_string}: given twice; give it once")
        given.add(self.dest)
        setattr(namespace, self.dest, values)


class _CheckOnly(argparse.Action):
    """An option of `gate check` that `gate remediate` does not take, refused with what to
    give instead (argparse's message named only the missing --manifest)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string} is `gate check`'s; gate remediate retrains on the train users of "
            "a split manifest and audits against its holdout: give --manifest (written by "
            "`gate split`)"
        )


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (its usage block had filled a CI log's
    error view), and options that take a value taking it once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: `--ou` would be --out to the command and not to the withdrawal
        # after a usage error, and a new option could change what an abbreviation means
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message: str) -> NoReturn:
        # an option after a command that it does not take is reported by the top parser
        hint = (
            "`gate --help` lists the commands, `gate <command> --help` their options"
            if self.prog == "gate"
            else f"`{self.prog} --help` lists the options"
        )
        print(f"{self.prog}: error: {one_line(message)} ({hint})", file=sys.stderr)
        raise SystemExit(2)


def _command(commands: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A command of ``commands`` (a subparsers action) that also takes ``--verbose``."""
    command: argparse.ArgumentParser = commands.add_parser(name, **kwargs)
    command.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="as gate --verbose: other libraries' warnings and an unexpected error's traceback",
    )
    return command


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gate", description="Pre-release privacy gate for synthetic text releases."
    )
    parser.add_argument("--version", action="version", version=f"gate {__version__}")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show other libraries' warnings and the traceback of an unexpected error",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    check = _command(sub, "check", help="gate a synthetic release against a policy")
    check.add_argument("--policy", required=True, help="policy YAML file")
    check.add_argument("--synthetic", required=True, help="synthetic release (jsonl/csv/parquet)")
    _add_bundle_and_run_options(check, out="gate-report")
    check.add_argument(
        "--model",
        help="released model directory (transformers causal LM and tokenizer, or a gate "
        "generator checkpoint) for the profile audit's surprisal attack",
    )
    check.add_argument(
        "--training-data",
        help="the records the release's generator was trained on (jsonl/csv/parquet: each "
        "record's text as the split holds it, in a text column, in the columns beside it or "
        "in a chat format, and the split's user column if known); exit 2 if it holds a "
        "holdout user's id or distinctive text",
    )
    check.add_argument("--data-docs", help="build a Great Expectations Data Docs site here")
    check.add_argument(
        "--engine",
        help="where the heavy steps run: local, spark or an installed engine plug-in "
        "(default: the policy's)",
    )
    check.add_argument(
        "--spark-master",
        help="spark engine: local[N], spark://host:port or sc://host:port (default: local[2])",
    )

    canary = _command(
        sub,
        "canary",
        help="plant canaries, train the generator, and test membership from its release alone",
    )
    canary.add_argument("--policy", required=True, help="policy YAML file with audits.canary")
    _add_bundle_and_run_options(canary, out="gate-canary")

    remediate = _command(
        sub,
        "remediate",
        help="retrain the generator privately (DP-SGD or RIP noise) until a release passes",
    )
    remediate.add_argument("--policy", required=True, help="policy YAML file")
    remediate.add_argument(
        "--manifest", required=True, help="split-manifest.json of the private records"
    )
    for option in ("--train", "--holdout"):
        remediate.add_argument(option, action=_CheckOnly, nargs="?", help=argparse.SUPPRESS)
    remediate.add_argument(
        "--generator", help="generator: a registered name or module:Class (policy's by default)"
    )
    remediate.add_argument(
        "--method", choices=["dpsgd", "rip"], help="remediation method (policy's by default)"
    )
    remediate.add_argument(
        "--canary-source",
        help="canary-source records when the policy has audits.canary (default: the manifest's)",
    )
    remediate.add_argument(
        "--out",
        type=_directory,
        default="gate-remediation",
        help="output directory (gate-remediation/)",
    )
    remediate.add_argument("--seed", type=_seed, help="override the policy's seed (>= 0)")
    remediate.add_argument("--quiet", action="store_true", help="no progress bars (CI logs)")
    remediate.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    remediate.add_argument(
        "--tracking-uri",
        type=_tracking_uri,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the policy's "
        "evidence.mlflow.tracking_uri, else sqlite:///./mlflow.db)",
    )
    remediate.add_argument(
        "--mlflow-timeout",
        type=_seconds,
        default=30.0,
        help="seconds each gate run's MLflow logging may take, in (0, 3600] (30)",
    )

    split = _command(sub, "split", help="reproducible Bernoulli(p) train/holdout split by user")
    split.add_argument("--source", required=True, help="source records (jsonl/csv/parquet)")
    split.add_argument("--p", type=float, default=0.5, help="train probability (0.5)")
    split.add_argument("--seed", type=_seed, required=True, help="seed of the assignment")
    split.add_argument("--by", default="user_id", help="column that defines users (user_id)")
    split.add_argument("--out", type=_directory, required=True, help="output directory")
    split.add_argument(
        "--canary-fraction",
        type=float,
        default=0.0,
        help="share of users set aside (neither train nor holdout) as the canary audit's "
        "canary source (0)",
    )

    policy = _command(sub, "policy", help="validate, show or describe policies")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    validate = _command(policy_sub, "validate", help="check a policy file")
    validate.add_argument("path")
    validate.add_argument(
        "--engine",
        help="validate as if run with this engine (a policy naming a cluster's engine, "
        "checked where that engine is not installed)",
    )
    show = _command(policy_sub, "show", help="print the effective policy (after defaults)")
    show.add_argument("path")
    _command(policy_sub, "schema", help="print the policy JSON Schema")

    _command(
        sub,
        "audits",
        help="list the installed audits, disclosure classes, scorers, rewrite attacks, "
        "generators and engines",
    )
    return parser


def _add_bundle_and_run_options(command: argparse.ArgumentParser, *, out: str) -> None:
    """The source records, evidence and MLflow options ``check`` and ``canary`` share."""
    command.add_argument("--train", help="train records")
    command.add_argument("--holdout", help="holdout records")
    command.add_argument("--source", help="source records with a 'split' column")
    command.add_argument("--manifest", help="split-manifest.json written by `gate split`")
    command.add_argument(
        "--canary-source",
        help="records for canary prefixes and the canary audit's base LM, in neither train "
        "nor holdout (default: the manifest's canary split)",
    )
    command.add_argument("--out", type=_directory, default=out, help=f"report directory ({out}/)")
    command.add_argument("--seed", type=_seed, help="override the policy's seed (>= 0)")
    command.add_argument("--quiet", action="store_true", help="no progress bars (CI logs)")
    command.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    command.add_argument(
        "--tracking-uri",
        type=_tracking_uri,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the policy's "
        "evidence.mlflow.tracking_uri, else sqlite:///./mlflow.db)",
    )
    command.add_argument(
        "--mlflow-timeout",
        type=_seconds,
        default=30.0,
        help="seconds MLflow logging may take before the run is an error, in (0, 3600] (30)",
    )


_OUTPUT_COMMANDS = ("check", "canary", "remediate")


def _withdraw_earlier_output(command: str, out: str) -> None:
    """Remove an earlier verdict from ``out`` before the command's imports (a second or
    so, in which a Ctrl-C had left an earlier PASS in place; a review), with SIGINT and
    SIGTERM held until it is gone (one in its first 0.1 s had left it too)."""
    with signals_held():
        if command == "remediate":
            from gate.remediation.outputs import withdraw_earlier_remediation

            withdraw_earlier_remediation(Path(out))
        else:
            from gate.evidence.writer import withdraw_earlier_output

            withdraw_earlier_output(Path(out))


class _OutOnly(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _withdraw_after_usage_error(argv: Sequence[str]) -> None:
    """A ``check``, ``canary`` or ``remediate`` refused for its usage leaves no earlier
    verdict in its ``--out`` either (a review: a mistyped option, exit 2, had left an
    earlier PASS beside it); an earlier remediation keeps its rounds. Only an ``--out``
    given as such is withdrawn (not the default, nor after ``--ou``: the directory meant is
    not known), and nothing more is said: the usage error was."""
    commands = [i for i, token in enumerate(argv) if not token.startswith("-")]
    if not commands or argv[commands[0]] not in _OUTPUT_COMMANDS:
        return
    command, rest = argv[commands[0]], argv[commands[0] + 1 :]
    if any(t.startswith("--o") and t.split("=")[0] != "--out" for t in rest):
        return  # `--ou mine`: which directory was meant is not known
    outs = _OutOnly(add_help=False, allow_abbrev=False)
    outs.add_argument("--out", action="append", default=[])
    try:
        given = outs.parse_known_args(rest)[0].out  # named: the default is not withdrawn
    except ValueError:  # --out without a value
        return
    for out in given:
        if not out.strip() or not (Path(out).exists() or Path(out).is_symlink()):
            continue  # nothing to withdraw, and no folder to make for it
        with contextlib.suppress(GateError, OSError):  # refused: its verdict withdrawn
            if command == "remediate":
                from gate.remediation.outputs import withdraw_remediation_verdict

                withdraw_remediation_verdict(Path(out))
            else:
                _withdraw_earlier_output(command, out)


def _check(args: argparse.Namespace) -> int:
    """``gate check`` and ``gate canary`` (the canary audit alone, no release)."""
    _withdraw_earlier_output(args.command, args.out)
    from gate.api import audit_canaries, check_release
    from gate.progress import NullProgress, RichProgress

    progress = RichProgress() if not args.quiet and sys.stderr.isatty() else NullProgress()
    common: dict[str, Any] = {
        "policy": args.policy,
        "train": args.train,
        "holdout": args.holdout,
        "source": args.source,
        "manifest": args.manifest,
        "canary_source": args.canary_source,
        "out_dir": args.out,
        "seed": args.seed,
        "progress": progress,
        "mlflow": not args.no_mlflow,
        "tracking_uri": args.tracking_uri,
        "mlflow_timeout": args.mlflow_timeout,
    }
    if args.command == "canary":
        outcome = audit_canaries(**common)
    else:
        outcome = check_release(
            **common,
            synthetic=args.synthetic,
            model=args.model,
            training_data=args.training_data,
            data_docs=args.data_docs,
            engine=args.engine,
            spark_master=args.spark_master,
        )
    return _print_outcome(outcome)


def _print_outcome(outcome: CheckOutcome) -> int:
    from rich.console import Console

    from gate.evidence.summary import print_summary

    code = outcome.result.exit_code  # the verdict, whatever happens to stdout
    report = outcome.report_path
    shown = report.relative_to(Path.cwd()) if report.is_relative_to(Path.cwd()) else report
    console = Console() if sys.stdout.isatty() else Console(width=120, soft_wrap=True)
    try:
        print_summary(
            outcome.result,
            console,
            report_path=str(shown),
            mlflow_run_id=outcome.mlflow_run_id,
            data_docs=outcome.files.get("data_docs"),
        )
    except (BrokenPipeError, SystemExit):  # rich turns a closed stdout into SystemExit(1)
        _discard_stdout()
    return code


def _remediate(args: argparse.Namespace) -> int:
    _withdraw_earlier_output(args.command, args.out)
    from rich.console import Console

    from gate.api import remediate_release
    from gate.progress import NullProgress, RichProgress
    from gate.remediation.summary import print_remediation

    progress = RichProgress() if not args.quiet and sys.stderr.isatty() else NullProgress()
    result = remediate_release(
        policy=args.policy,
        manifest=args.manifest,
        out_dir=args.out,
        generator=args.generator,
        method=args.method,
        canary_source=args.canary_source,
        seed=args.seed,
        progress=progress,
        mlflow=not args.no_mlflow,
        tracking_uri=args.tracking_uri,
        mlflow_timeout=args.mlflow_timeout,
    )
    console = Console() if sys.stdout.isatty() else Console(width=120, soft_wrap=True)
    try:
        print_remediation(result, console, out_dir=Path(args.out))
    except (BrokenPipeError, SystemExit):  # rich turns a closed stdout into SystemExit(1)
        _discard_stdout()
    return result.exit_code


def _discard_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _emit(text: str, end: str = "\n") -> None:
    """Print to stdout; a reader that went away (`gate policy schema | head`) is no error.
    Only here is a BrokenPipeError the closed stdout: elsewhere it is a failed step."""
    try:
        print(text, end=end, flush=True)
    except BrokenPipeError:
        _discard_stdout()


def _split(args: argparse.Namespace) -> int:
    from gate.data.split import split_source

    outcome = split_source(
        args.source,
        p=args.p,
        seed=args.seed,
        by=args.by,
        out_dir=args.out,
        canary_fraction=args.canary_fraction,
    )
    m = outcome.manifest
    _emit(
        f"split {m.source.records} records of {m.source.users} users with p = {m.p:g}, "
        f"seed = {m.seed}: train {m.train.records} records / {m.train.users} users, "
        f"holdout {m.holdout.records} records / {m.holdout.users} users"
    )
    if m.canary_source is not None:
        _emit(
            f"canary source: {m.canary_source.records} records / {m.canary_source.users} "
            "users (in neither train nor holdout)"
        )
    _emit(one_line(f"manifest: {outcome.manifest_path}"))
    return 0


def _policy(args: argparse.Namespace) -> int:
    from gate.policy.loader import effective_policy_yaml, load_policy

    if args.policy_command == "schema":
        from gate.api import policy_schema

        _emit(json.dumps(policy_schema(), indent=2))
        return 0
    if args.policy_command == "validate":
        from gate.api import validate_policy

        found = validate_policy(args.path, engine=args.engine)
        _emit(
            one_line(
                f"{args.path}: valid policy {found.name!r} (version {found.version}): "
                f"{found.audits} audits, {found.checks} threshold checks; sha256 {found.sha256}"
            )
        )
        for note in found.notes:
            _emit(one_line(f"note: {note}"))
    else:
        _emit(effective_policy_yaml(load_policy(args.path).policy), end="")
    return 0


def _audits(args: argparse.Namespace) -> int:
    from gate.plugins import (
        AUDITS,
        DISCLOSURE_CLASSES,
        ENGINES,
        GENERATORS,
        MEMBERSHIP_SCORERS,
        REWRITE_ATTACKS,
    )

    for title, registry in (
        ("audits", AUDITS),
        ("disclosure classes", DISCLOSURE_CLASSES),
        ("membership scorers", MEMBERSHIP_SCORERS),
        ("rewrite attacks", REWRITE_ATTACKS),
        ("generators", GENERATORS),
        ("engines", ENGINES),
    ):
        _emit(f"{title}: {' '.join(registry.names())}")
    return 0


COMMANDS = {
    "check": _check,
    "canary": _check,
    "remediate": _remediate,
    "split": _split,
    "policy": _policy,
    "audits": _audits,
}


def _handle_signals() -> dict[int, Any]:
    """Install the gate's SIGTERM handler, and its SIGINT handler where Python's own is
    installed (a SIGINT a shell ignores for a job in the background stays ignored, and an
    embedding program's handler stays its own); returns the handlers replaced."""
    previous: dict[int, Any] = {}
    if signal.getsignal(signal.SIGTERM) is not None:  # None: set outside Python, kept
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    return previous


def _not_completed(command: str) -> str:
    """What an interrupted or failed command left: its verdict, complete, if it was put in
    place before; else nothing (``gate remediate``: the rounds it completed)."""
    placed = verdict_in_place()
    if placed is not None:
        return f" after the verdict was written, complete, to {placed}"
    if command == "remediate":
        return "; no remediation verdict was written (the rounds completed stay in --out)"
    if command == "split":
        return "; no split was written"
    return "; no verdict was written"


def entry() -> NoReturn:
    """The ``gate`` command and ``python -m gate``: :func:`main` as the process, whose
    end a late signal may not turn into exit 130 without a word."""
    raise SystemExit(main(process=True))


def main(argv: Sequence[str] | None = None, *, process: bool = False) -> int:
    """Run one command; every outcome is an exit code (0 pass, 1 fail, 2 bad input, 3 could
    not complete) and at most one line on stderr, never a traceback unless --verbose.

    As the process (``process``, from :func:`entry`), a signal after the command has
    ended reports what it left and exits 3 at once (Python's own handlers, put back, had
    ended such a run with 130 and no word); a program that calls :func:`main` gets its
    handlers back."""
    tokens = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(tokens)
    except SystemExit as exc:
        if exc.code not in (0, None):  # --help and --version are no usage error
            _withdraw_after_usage_error(tokens)
        raise
    quiet_libraries(verbose=args.verbose)
    in_main_thread = threading.current_thread() is threading.main_thread()
    # the signals are the main thread's: a command in another thread leaves them alone
    forget_earlier_run(signals=in_main_thread)
    previous: dict[int, Any] = _handle_signals() if in_main_thread else {}
    try:
        try:
            code = COMMANDS[args.command](args)
            raise_if_interrupted()  # a signal whose exception was dropped or replaced
            return code
        except Exception as exc:
            raise_interruption_behind(exc)  # replaced by an error of a failing cleanup
            raise
    except GateError as exc:  # InputError: 2; the others: 3
        for problem in exc.problems():  # a policy's several problems: a line each
            print(f"gate: error: {one_line(problem)}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"gate: error: {one_line(str(exc))}", file=sys.stderr)
        return GateError.exit_code
    except (KeyboardInterrupt, Terminated) as exc:
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else one_line(str(exc))
        print(f"gate: error: {what}{_not_completed(args.command)}", file=sys.stderr)
        return GateError.exit_code
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        from gate.audits.base import describe_exception

        what = describe_exception(
            exc,
            show_message=args.verbose,
            hint="run with --verbose to see it and the traceback",
        )
        print(
            f"gate: error: unexpected {one_line(what)}{_not_completed(args.command)}",
            file=sys.stderr,
        )
        return GateError.exit_code
    finally:
        late = _late_signal(args.command) if process else None
        for signum, handler in previous.items():
            signal.signal(signum, late or handler)
        forget_earlier_run(signals=in_main_thread)  # a later command or call starts afresh


def _late_signal(command: str) -> Any:
    """The handler of a signal that arrives after the command ended, as the process
    exits: the message an interruption gets, then exit 3 without waiting for more."""
    message = f"gate: error: interrupted{_not_completed(command)}"

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            print(message, file=sys.stderr, flush=True)
        os._exit(GateError.exit_code)

    return handler


if __name__ == "__main__":  # python -m gate.cli (as python -m gate): never a silent exit 0
    entry()
