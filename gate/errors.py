"""Exceptions that map to the gate's exit codes (2 bad input, 3 an audit could not run)."""

from __future__ import annotations


class GateError(Exception):
    """Base class of the gate's own errors."""

    exit_code = 3


class InputError(GateError):
    """Bad usage or bad input: a policy, bundle file or manifest the gate cannot accept (exit 2).

    The message names the file and, where it applies, the row or YAML path.
    """

    exit_code = 2


class PolicyError(InputError):
    """The policy file is not valid YAML or does not match the policy schema."""


class BundleError(InputError):
    """A release bundle file is missing, unreadable or inconsistent."""


class AuditError(GateError):
    """An audit could not run to completion (exit 3); never a pass."""

    exit_code = 3
