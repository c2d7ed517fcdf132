"""A CI gate report for CI: the Markdown step summary and JUnit XML.

:func:`forge.ci.baseline.run_gates` decides; this module only renders its
:class:`~forge.ci.baseline.GateReport`: Markdown for ``$GITHUB_STEP_SUMMARY`` (failing
tasks capped per gate) and JUnit XML with one testcase per gate and per failing
task (all of them), so CI test reporters list the tasks one by one.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from forge._util.files import atomic_write_text
from forge.ci.baseline import CheckOutcome, CiReport, percent

__all__ = [
    "JUNIT_SUITE",
    "MARKDOWN_TASK_CAP",
    "append_step_summary",
    "junit_xml",
    "markdown_summary",
    "write_junit",
]

JUNIT_SUITE = "forge-gate"
#: Failing tasks listed per gate in the Markdown summary; the JSON and JUnit list all.
MARKDOWN_TASK_CAP = 10


def markdown_summary(report: CiReport, *, cap: int = MARKDOWN_TASK_CAP) -> str:
    """A CI step summary: heading, one table row per gate, then each failing gate's
    tasks (at most ``cap`` each, worst first)."""
    mark = "✅ passed" if report.passed else f"❌ failed ({len(report.failed)} of " \
                                            f"{len(report.gates)} gates)"
    lines = [f"## forge gate: {mark}", "", _about(report), "",
             "| gate | result | reason |", "|---|---|---|"]
    for g in report.gates:
        lines.append(f"| {_cell(g.name)} | {'✅ pass' if g.passed else '❌ fail'} | "
                     f"{_cell(g.reason)} |")
    for g in report.gates:
        if g.failing or g.notes:
            lines += _gate_section(g, cap)
    return "\n".join(lines) + "\n"


def _about(report: CiReport) -> str:
    """What was gated: the result's bench, split, size, pass rate and fingerprints."""
    r = report.result
    about = (f"{_code(report.current)}: bench {_code(r.bench)}, split {_code(r.split)}, "
             f"k={r.k}, {len(r.tasks)} tasks, pass rate {percent(r.pass_rate)}, "
             f"config {_code(r.config_fingerprint[:12])}, "
             f"env {_code((r.env_fingerprint or 'none')[:12])}")
    if report.baseline is not None:
        about += f"; baseline {_code(report.baseline)}"
    return about


def _gate_section(g: CheckOutcome, cap: int) -> list[str]:
    """A gate's failing tasks (the first ``cap``) and notes, under its heading."""
    lines = ["", f"### {'✅' if g.passed else '❌'} {g.name}", ""]
    for failure in g.failing[:cap]:
        lines.append(f"- {_code(failure.task_id)}: {_inline(failure.detail)}")
    if len(g.failing) > cap:
        lines.append(f"- … and {len(g.failing) - cap} more failing tasks")
    lines += [f"- {_inline(note)}" for note in g.notes]
    return lines


def junit_xml(report: CiReport) -> str:
    """JUnit XML: one testsuite ``forge-gate``; one testcase per gate and, for a
    failing gate, one more testcase per failing task."""
    cases = [case for g in report.gates for case in _gate_cases(g)]
    n_failures = sum(1 for c in cases if c.find("failure") is not None)
    suite = ET.Element("testsuite", name=JUNIT_SUITE, tests=str(len(cases)),
                       failures=str(n_failures), errors="0", skipped="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("current", report.current), ("baseline", report.baseline or ""),
                        ("bench", report.result.bench), ("split", report.result.split),
                        ("env_fingerprint", report.result.env_fingerprint or ""),
                        ("config_fingerprint", report.result.config_fingerprint)):
        ET.SubElement(props, "property", name=name, value=_xml_text(value))
    suite.extend(cases)
    root = ET.Element("testsuites", name="forge", tests=str(len(cases)),
                      failures=str(n_failures), errors="0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(
        root, encoding="unicode") + "\n"


def _gate_cases(g: CheckOutcome) -> list[ET.Element]:
    """The gate's testcase, then one per failing task."""
    case = ET.Element("testcase", classname=JUNIT_SUITE, name=_xml_text(g.name))
    if g.passed:
        if g.notes:
            ET.SubElement(case, "system-out").text = _xml_text("\n".join(g.notes))
    else:
        failure = ET.SubElement(case, "failure", message=_xml_text(g.reason),
                                type="GateFailure")
        failure.text = _xml_text("\n".join(
            [*(f"{f.task_id}: {f.detail}" for f in g.failing), *g.notes]))
    cases = [case]
    for f in g.failing:
        task_case = ET.Element("testcase", classname=f"{JUNIT_SUITE}.{g.name}",
                               name=_xml_text(f.task_id))
        ET.SubElement(task_case, "failure", message=_xml_text(f.detail), type="TaskFailure")
        cases.append(task_case)
    return cases


def write_junit(report: CiReport, path: str | Path) -> None:
    """Write the JUnit XML atomically: a CI reader never sees half a file."""
    atomic_write_text(path, junit_xml(report))


def append_step_summary(markdown: str, environ: Mapping[str, str] | None = None
                        ) -> Path | None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when it is set; returns the file.

    Appended, not replaced: GitHub gives one file per step and earlier commands of
    the same step may have written to it.
    """
    target = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return path


def _code(text: str) -> str:
    """Inline code in Markdown; a backtick inside would end the span, so it is replaced."""
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def _inline(text: str) -> str:
    return text.replace("\n", " ")


def _cell(text: str) -> str:
    """A Markdown table cell: a pipe would start a new column."""
    return _inline(text).replace("|", "\\|")


# XML 1.0 cannot carry most control characters even escaped, and a lone surrogate cannot
# be encoded at all; a task id holding one would make the whole report unreadable, so
# they become U+FFFD.
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _XML_BAD.sub("\ufffd", text)
