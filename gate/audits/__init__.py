"""Audits: one module per audit, found through :data:`gate.plugins.AUDITS`."""

from gate.audits.base import Audit, AuditContext
from gate.audits.registry import create_audit, policy_checks

__all__ = ["Audit", "AuditContext", "create_audit", "policy_checks"]
