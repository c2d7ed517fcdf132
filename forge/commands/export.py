"""``forge export sft`` and ``forge export verify`` (see :mod:`forge.export.sft`), and
``forge export agno`` (see :mod:`forge.export.agno`).

``verify`` exits 0 when the JSONL matches its sidecar, 1 when it does not (the
lines that differ are named), 2 on bad input (no JSONL, no or damaged sidecar).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forge.bench.loader import load_bench
from forge.commands import export_ag2
from forge.export.sft import export_sft, task_inputs, verify_export
from forge.results.model import load_result

__all__ = ["register"]

#: Problems listed by ``verify`` before "and N more"; a rewritten file differs everywhere.
_PROBLEM_CAP = 20

export_app = typer.Typer(no_args_is_help=True,
                         help="Export attempts as training data, as an Agno or an AG2 run, "
                              "and verify exports.")


@export_app.command("sft")
def sft_command(
    result_path: Annotated[Path, typer.Argument(metavar="RESULT.json",
                                                help="a saved result (forge eval --save)")],
    out: Annotated[Path, typer.Argument(metavar="OUT.jsonl", help="the JSONL to write")],
    # Required: a saved result keeps outputs, not inputs, so without the bench a line
    # would have an answer and no question.
    bench_path: Annotated[Path, typer.Option(
        "--bench", metavar="BENCH",
        help="the bench the result was evaluated on (gives the task inputs)")],
    system: Annotated[str | None, typer.Option(
        "--system", metavar="TEXT", help="a system message to put first on every line")] = None,
    keep_duplicates: Annotated[bool, typer.Option(
        "--keep-duplicates",
        help="keep lines identical to one already written (dropped by default)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON summary")] = False,
) -> None:
    """Write learning-zone passing text outputs as chat-format JSONL (tool calls as
    OpenAI tool_calls / tool messages), plus OUT.jsonl.meta.json (fingerprints,
    per-line task/attempt/score/sha256, file sha256, counts)."""
    result = load_result(result_path)
    inputs = task_inputs(load_bench(bench_path), result, source=result_path)
    summary = export_sft(result, out, inputs=inputs, source=result_path, system=system,
                         keep_duplicates=keep_duplicates)
    if as_json:
        _print_json({"out": str(summary.out), "sidecar": str(summary.sidecar),
                     "line_count": summary.line_count, "sha256": summary.jsonl_sha256,
                     "selection": summary.selection})
        return
    sel = summary.selection
    sys.stdout.write(
        f"wrote {summary.out}: {summary.line_count} lines ({sel['with_tool_calls']} with tool "
        f"calls) from {sel['learning_zone_tasks']} learning-zone tasks of {sel['tasks']}; "
        f"of {sel['passing_attempts']} passing attempts, {sel['skipped_not_text']} without "
        f"text output and {sel['skipped_duplicate']} exact duplicates left out; "
        f"sidecar {summary.sidecar}\n")
    if summary.line_count == 0:
        typer.echo("forge: warning: nothing exported: no learning-zone task has a passing "
                   "text output", err=True)


@export_app.command("verify")
def verify_command(
    out: Annotated[Path, typer.Argument(metavar="OUT.jsonl", help="a JSONL from export sft")],
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check OUT.jsonl against OUT.jsonl.meta.json: exit 0 untouched, 1 changed, 2 bad input."""
    report = verify_export(out)
    if as_json:
        _print_json(report.as_json())
    elif report.ok:
        sys.stdout.write(f"ok {out}: {report.actual_lines} lines, sha256 "
                         f"{report.actual_sha256[:16]} matches {report.sidecar}\n")
    else:
        lines = [f"CHANGED {out}: does not match {report.sidecar} "
                 f"(sha256 {report.actual_sha256[:16]}, expected "
                 f"{report.expected_sha256[:16]}; {report.actual_lines} lines, expected "
                 f"{report.expected_lines})"]
        lines += [f"  - {p}" for p in report.problems[:_PROBLEM_CAP]]
        if len(report.problems) > _PROBLEM_CAP:
            lines.append(f"  - … and {len(report.problems) - _PROBLEM_CAP} more")
        sys.stdout.write("\n".join(lines) + "\n")
    if not report.ok:
        raise typer.Exit(1)


@export_app.command("agno")
def agno_command(
    result_path: Annotated[Path, typer.Argument(metavar="RESULT.json",
                                                help="a saved result (forge eval --save)")],
    out: Annotated[Path, typer.Argument(metavar="OUT.json",
                                        help="the Agno EnvironmentRunResult file to write")],
    bench_path: Annotated[Path, typer.Option(
        "--bench", metavar="BENCH",
        help="the bench the result was evaluated on (an agno harness, task source and scorer)")],
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON summary")] = False,
) -> None:
    """Write a result's attempts as Agno's EnvironmentRunResult file, with Agno's env and
    policy fingerprints: EnvironmentRunResult.load reads it, and .diff compares it with
    a baseline Agno's run_rollouts made for the same environment."""
    from forge.export.agno import export_agno

    summary = export_agno(load_result(result_path), load_bench(bench_path), out,
                          source=result_path)
    if as_json:
        _print_json(summary.as_json())
        return
    sys.stdout.write(
        f"wrote {summary.out}: Agno EnvironmentRunResult of environment "
        f"{summary.env_name!r} (split {summary.split}, k {summary.k}): {summary.n_tasks} "
        f"tasks, {summary.n_attempts} attempts, {summary.n_scored} scored; "
        f"env_fingerprint {summary.env_fingerprint}, policy_fingerprint "
        f"{summary.policy_fingerprint[:16]}\n")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def register(app: typer.Typer) -> None:
    """Add ``forge export sft``, ``forge export verify`` and ``forge export agno`` to the
    app, and the exports for other agent frameworks, each from a module of its own."""
    export_ag2.register(export_app)
    app.add_typer(export_app, name="export")
