"""``forge diff A.json B.json``: two saved results compared task by task, paired by seed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.commands.common import out, print_json
from forge.report import diff_table
from forge.results.compare import diff_results, require_paired
from forge.results.model import load_result

__all__ = ["diff_command", "register"]


def diff_command(
    a: Annotated[Path, typer.Argument(metavar="A.json",
                                      help="the reference result (forge eval --save)")],
    b: Annotated[Path, typer.Argument(metavar="B.json", help="the result compared with A")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="print only the comparison as a JSON object")] = False,
) -> None:
    """Compare two saved results task by task (B against A), paired by seed.

    Exit 2 when they cannot be compared: other environments, or no seed scored in both.
    """
    ra, rb = load_result(a), load_result(b)
    names = (str(a), str(b))
    diff = diff_results(ra, rb, names=names)
    require_paired(diff, ra, rb, names=names)
    if as_json:
        print_json({
            "mean_delta": diff.mean_delta,
            "tasks": [{"id": t.task_id, "pairs": t.n_pairs, "score_a": t.score_a,
                       "score_b": t.score_b, "delta": t.delta, "pass_a": t.pass_a,
                       "pass_b": t.pass_b} for t in diff.tasks],
            "only_in_a": diff.only_in_a, "only_in_b": diff.only_in_b,
        })
        return
    out.print(diff_table(diff, names))
    mean = "—" if diff.mean_delta is None else f"{diff.mean_delta:+.4f}"
    out.print(f"mean Δ score over {len(diff.paired)} paired tasks: {mean}; "
              f"{len(diff.improved)} improved, {len(diff.regressed)} regressed")
    if diff.only_in_a or diff.only_in_b:
        out.print(f"unmatched tasks: only in {a}: {', '.join(diff.only_in_a) or 'none'}; "
                  f"only in {b}: {', '.join(diff.only_in_b) or 'none'}")


def register(app: typer.Typer) -> None:
    """Add ``forge diff`` to the app."""
    app.command("diff")(diff_command)
