"""What a bench can detect, told before its results are read (:mod:`forge.stats.power`).

``forge search`` prints it under its first line, ``forge eval`` under its table: the
smallest gain on the mean score the bench proves nine times in ten, and a warning
when that is more than :data:`~forge.stats.power.USEFUL_EFFECT`, with what would
bring it there.
"""

from __future__ import annotations

from rich.text import Text

from forge.stats.power import USEFUL_EFFECT, Power

__all__ = ["power_lines"]


def power_lines(power: Power, *, tasks: str, source: str) -> list[Text]:
    """One line, and a warning when the smallest detectable gain is large. ``tasks``
    names the tasks counted (``"dev+val tasks"``), ``source`` those the spread was read
    from (``"the start's first 9 dev tasks"``)."""
    if power.mde is None:
        why = ("they all scored the same: no spread to estimate it from" if power.sd == 0
               else "fewer than two of them were scored")
        return [Text(f"power: not estimated from {source}: {why}", style="dim")]
    line = Text(f"power: detects a gain of {power.mde:.3f} or more on the mean score "
                f"{power.power:.0%} of the time (one-sided α {power.alpha:g}, {power.n_tasks:,} "
                f"{tasks} at K {power.k}; spread from {source})")
    if not power.large:
        return [line]
    more = ("more than ten million tasks" if power.tasks_needed is None
            else f"about {power.tasks_needed:,} {tasks}")
    larger_k = ("a larger K, if attempts of one task disagree" if power.mde_double_k is None
                else f"a larger K as far as attempts of one task disagree "
                     f"(K {2 * power.k}: {power.mde_double_k:.3f})")
    warning = Text(f"warning: this bench will likely miss gains under {power.mde:.3f} "
                   f"({power.mde * 100:.0f} points): {more} would bring that to "
                   f"{USEFUL_EFFECT:.2f}, or {larger_k}", style="bold yellow")
    return [line, warning]
