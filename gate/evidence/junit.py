"""JUnit XML: one test case per threshold check, so CI systems show which check failed."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from gate.evidence.escape import xml_text

if TYPE_CHECKING:
    from gate.results import GateResult


def junit_xml(result: GateResult) -> str:
    suites = ET.Element("testsuites", name=f"gate {result.policy.name}")
    for name, outcome in result.audits.items():
        suite = ET.SubElement(suites, "testsuite", name=f"gate.{name}")
        cases = failures = errors = 0
        if outcome.error is not None:
            case = ET.SubElement(
                suite, "testcase", classname=f"gate.{name}", name="audit completes"
            )
            error = xml_text(outcome.error)
            ET.SubElement(case, "error", message=error, type="AuditError").text = error
            cases, errors = 1, 1
        for check in outcome.checks:
            cases += 1
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"gate.{name}",
                name=f"{check.spec.metric} {check.spec.bound}",
            )
            if not check.measured:
                errors += 1
                reason = "not measured: the audit did not complete"
                ET.SubElement(case, "error", message=reason, type="NotMeasured").text = reason
            elif not check.passed:
                failures += 1
                spec = check.spec
                level = "" if spec.spec.is_point_estimate else f", alpha = {result.policy.alpha:g}"
                message = (
                    f"{spec.metric} = {check.value:.15g}, must be {spec.bound} "
                    f"({spec.spec.confidence}{level})"
                )
                ET.SubElement(
                    case, "failure", message=xml_text(message), type="ThresholdExceeded"
                ).text = xml_text(check.spec.description)
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
    if result.evidence_error is not None:
        suite = ET.SubElement(
            suites, "testsuite", name="gate.evidence", tests="1", failures="0", errors="1"
        )
        case = ET.SubElement(suite, "testcase", classname="gate.evidence", name="evidence recorded")
        error = xml_text(result.evidence_error)
        ET.SubElement(case, "error", message=error, type="EvidenceError").text = error
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
