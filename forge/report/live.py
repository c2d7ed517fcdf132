"""The live view of a search: one line per decision as it is journaled, then a summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from forge.search import SearchOutcome

__all__ = ["SearchView"]

_VERDICT_STYLE = {"promoted": "bold green", "rejected": "red", "skipped": "yellow"}


def _f(x: Any, fmt: str = "+.3f") -> str:
    return "—" if x is None else format(x, fmt)


class SearchView:
    """Renders journal records on a console as the search writes them."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _line(self, text: str) -> None:
        # One decision per line, never folded: people grep these.
        self.console.print(text, highlight=False, soft_wrap=True)

    def on_record(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "start":
            self._line(f"[bold]start[/] dev {_f(record.get('dev_mean'), '.3f')} · "
                               f"val {_f(record.get('val_mean'), '.3f')} · "
                               f"config {record['fingerprint'][:12]}")
        elif kind == "candidate":
            self._candidate(record)
        elif kind == "proposal_invalid":
            self._line(f"step {record.get('step', '?'):>2} " + escape(
                f"[{record.get('proposer')}] no move: {record.get('category')}: "
                f"{record.get('reason')}") + "  [magenta]INVALID[/]")
        elif kind == "stop":
            self._line(f"[bold]stopped[/] after {record['step']} steps: "
                       f"{record['text']} · {record['rollouts_total']} rollouts before "
                       "the test split")
        elif kind == "test":
            self._line(f"[bold]test[/] {_f(record.get('start'), '.3f')} -> "
                               f"{_f(record.get('final'), '.3f')}, Δ {_f(record.get('delta'))} "
                               f"(95% CI {_f(record.get('ci_low'))} .. "
                               f"{_f(record.get('ci_high'))})")
            for gate in record.get("aux") or []:
                mark = "[green]within[/]" if gate.get("passed") else "[red]BEYOND[/]"
                self._line(f"  start -> final on test, {mark} tolerance: "
                           + escape(str(gate.get("reason"))))

    def _candidate(self, r: dict[str, Any]) -> None:
        move = r["move"]
        verdict = r["verdict"]
        style = _VERDICT_STYLE.get(verdict, "")
        what = escape(f"[{r['proposer']}] {move['target']}: {move['before']!r} -> "
                      f"{move['after']!r}")
        head = f"step {r['step']:>2} {what}  [{style}]{verdict.upper()}[/]"
        spent = r.get("rollouts")
        if spent is not None:
            head += f"  ({spent} rollouts, {r.get('saved_by_racing', 0)} saved by racing, " \
                    f"total {r.get('rollouts_total')})"
        self._line(head)
        for gate in r.get("gates", []):
            mark = "[green]✓[/]" if gate["passed"] else "[red]✗[/]"
            self._line(f"        {mark} {escape(gate['name'])}: {escape(gate['reason'])}")
        if r.get("why"):
            self._line(f"        · {escape(r['why'])}")

    def summary(self, outcome: SearchOutcome) -> None:
        table = Table(title=f"search {outcome.run_id} · {outcome.stop_reason} · "
                            f"{outcome.steps} steps · {outcome.rollouts_used} rollouts",
                      title_justify="left")
        for col in ("split", "start", "final", "Δ", "95% CI"):
            table.add_column(col)
        for split, block in (("dev", outcome.dev), ("val", outcome.val), ("test", outcome.test)):
            if not block:
                continue
            table.add_row(split, _f(block.get("start"), ".3f"), _f(block.get("final"), ".3f"),
                          _f(block.get("delta")),
                          f"{_f(block.get('ci_low'))} .. {_f(block.get('ci_high'))}")
        self.console.print(table)
        if outcome.promotions:
            chain = ", ".join(f"{p['target']} {p['before']!r}->{p['after']!r}"
                              for p in outcome.promotions)
            self._line(f"promoted: {chain}")
        else:
            self._line("promoted: nothing (the start config stands)")
        changed = {k: v for k, v in outcome.final_config.items()
                   if outcome.start_config.get(k) != v}
        self._line(f"final config: {changed or 'unchanged'}")
