"""`forge promote RUN [--to F]` and `forge rollback F`; the logic is in
:mod:`forge.promotion.promote`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forge.journal.records import SplitDelta
from forge.promotion.promote import PromoteResult, RollbackResult, promote, rollback

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``promote`` and ``rollback`` to the ``forge`` app."""
    app.command("promote")(promote_command)
    app.command("rollback")(rollback_command)


def promote_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="run id (or run folder)")],
    to: Annotated[Path | None, typer.Option(
        "--to", metavar="F", help="write here instead of the bench's defaults file")] = None,
    journals: Annotated[Path, typer.Option("--journals", help="run folders")] = Path("journals"),
    accept_beyond_tolerance: Annotated[bool, typer.Option(
        "--accept-beyond-tolerance",
        help="promote even though the test split puts an auxiliary metric beyond its "
             "tolerance (recorded in the provenance)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Write a finished run's final config as the new default, with its provenance."""
    result = promote(run, journals=journals, to=to,
                     accept_beyond_tolerance=accept_beyond_tolerance)
    if as_json:
        _print_json(result.as_json())
        return
    _print_promotion(result)


def rollback_command(
    target: Annotated[Path, typer.Argument(metavar="F", help="a promoted config file")],
    as_json: Annotated[bool, typer.Option("--json", help="print only the result object")] = False,
) -> None:
    """Restore the default from before the last promotion of F (refuses hand edits)."""
    result = rollback(target)
    if as_json:
        _print_json(result.as_json())
        return
    _print_rollback(result)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _moves(moves: list[tuple[str, Any, Any]], indent: str = "  ") -> list[str]:
    return [f"{indent}{target}: {json.dumps(before)} -> {json.dumps(after)}"
            for target, before, after in moves]


def _test(test: SplitDelta) -> str:
    def num(x: float | None, sign: bool = False) -> str:
        return "—" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")

    text = f"test {num(test.start)} -> {num(test.final)}, Δ {num(test.delta, True)}"
    if test.ci_low is not None and test.ci_high is not None:
        text += f" (95% CI {num(test.ci_low, True)} .. {num(test.ci_high, True)})"
    return text


def _print_promotion(result: PromoteResult) -> None:
    e = result.entry
    lines = [*result.notes,
             f"promoted run {e.run_id} (bench {e.bench}) into {result.target}",
             f"{len(e.moves)} move(s) from the previous default:",
             *_moves([(m.target, m.before, m.after) for m in e.moves]),
             _test(e.test),
             ("unscored on test: " + result.unscored.reason if result.unscored is not None
              else "unscored on test: not compared (the run predates failure-share checks)"),
             *([f"accepted beyond tolerance on test (--accept-beyond-tolerance): "
                f"{', '.join(e.accepted_beyond_tolerance)}"] if e.accepted_beyond_tolerance
               else []),
             f"provenance: {result.sidecar}; undo with `forge rollback {result.target}`"]
    typer.echo("\n".join(lines))


def _print_rollback(result: RollbackResult) -> None:
    for note in result.notes:
        typer.echo(note)
    if result.undone is None:
        dropped = result.dropped.run_id if result.dropped is not None else "?"
        typer.echo(f"nothing to undo in {result.target}: it already holds the content from "
                   f"before run {dropped}'s promotion (an interrupted promote or rollback); "
                   f"dropped that record from {result.sidecar}")
        return
    e = result.undone
    lines = [f"rolled back run {e.run_id} (bench {e.bench}) in {result.target}",
             f"{len(e.inverses)} inverse(s) applied, last move first:",
             *_moves([(m.target, m.before, m.after) for m in reversed(e.inverses)]),
             f"it had been promoted on {_test(e.test)}",
             f"{result.remaining} earlier promotion(s) still recorded in {result.sidecar}"]
    typer.echo("\n".join(lines))
