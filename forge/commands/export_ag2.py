"""``forge export ag2``: a saved result as an AG2 run (see :mod:`forge.export.ag2`).

Its own module, registered on the ``export`` group by :func:`register`; AG2 is
imported only when the command runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ag2_command", "register"]


def ag2_command(
    result_path: Annotated[Path, typer.Argument(metavar="RESULT.json",
                                                help="a saved result (forge eval --save)")],
    out: Annotated[Path, typer.Argument(metavar="OUT.json",
                                        help="the AG2 run JSON to write")],
    bench_path: Annotated[Path, typer.Option(
        "--bench", metavar="BENCH",
        help="the bench the result was evaluated on (gives the tasks)")],
    label: Annotated[str | None, typer.Option(
        "--label", metavar="TEXT",
        help="the run's label, shared by runs of one eval in AG2")] = None,
    run_id: Annotated[str | None, typer.Option(
        "--run-id", metavar="ID",
        help="the run's id (default: forge-BENCH-SPLIT-CONFIG)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON summary")] = False,
) -> None:
    """Write a result's attempts as an AG2 run (schema 0.2): ag2.eval.load_run reads it,
    RunResult.diff compares it with a run of AG2's own runner. Needs the ag2 extra."""
    from forge.bench.loader import load_bench
    from forge.export.ag2 import export_ag2
    from forge.results.model import load_result

    result = load_result(result_path)
    done = export_ag2(result, load_bench(bench_path), out, source=result_path, label=label,
                      run_id=run_id)
    if as_json:
        sys.stdout.write(json.dumps({
            "out": str(done.out), "run_id": done.run_id, "split": done.split,
            "task_results": done.task_results, "errors": done.errors, "keys": list(done.keys),
            "pass_rate": done.pass_rate, "tokens": done.tokens}, indent=2) + "\n")
        return
    rates = ", ".join(f"{key} {rate:.1%}" for key, rate in sorted(done.pass_rate.items()))
    sys.stdout.write(
        f"wrote {done.out}: AG2 run {done.run_id} of split {done.split}, "
        f"{done.task_results} task results ({done.errors} errors); pass rate "
        f"{rates or 'none'}; read back with ag2.eval.load_run\n")


def register(app: typer.Typer) -> None:
    """Add ``ag2`` to the ``export`` group."""
    app.command("ag2")(ag2_command)
