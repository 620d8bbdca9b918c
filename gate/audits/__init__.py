"""Audits: one module per audit, found through the registry."""

from gate.audits.base import Audit, AuditContext, AuditResult, Witness
from gate.audits.registry import available_audits, create_audit, register_audit

__all__ = [
    "Audit",
    "AuditContext",
    "AuditResult",
    "Witness",
    "available_audits",
    "create_audit",
    "register_audit",
]
