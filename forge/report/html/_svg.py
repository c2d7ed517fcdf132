"""Small SVG building blocks: a linear scale, nice ticks, escaped text and tooltips.

Charts are strings of inline SVG built in Python, so the page needs no JavaScript
library and opens offline. Every piece of text that reaches the page goes through
:func:`esc`; numbers are rounded to two decimals to keep the file small.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable

__all__ = ["COLORS", "Scale", "esc", "fmt", "nice_ticks", "num", "padded", "svg_close",
           "svg_open", "text", "tooltip"]

#: One color per meaning, used by the charts and the legends alike.
COLORS = {
    "dev": "#1f6feb",
    "val": "#e36209",
    "promoted": "#1a7f37",
    "rejected": "#cf222e",
    "skipped": "#8c959f",
    "budget": "#8250df",
    "axis": "#57606a",
    "grid": "#d8dee4",
    "zero": "#24292f",
}


def esc(value: object) -> str:
    """Text (or an attribute value) safe to put in HTML or SVG."""
    return html.escape(str(value), quote=True)


def num(x: float) -> str:
    """A coordinate: two decimals, no trailing zeros."""
    out = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if out in {"-0", ""} else out


def fmt(value: float | None, spec: str = ".3f") -> str:
    """A value for people; ``—`` when unknown."""
    return "—" if value is None else format(value, spec)


class Scale:
    """Maps a data interval linearly onto a pixel interval (either may be reversed)."""

    def __init__(self, lo: float, hi: float, start: float, end: float) -> None:
        if not hi > lo:  # one value: widen so the mapping stays defined and centred
            pad = abs(lo) * 0.1 or 1.0
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.start, self.end = lo, hi, start, end

    def __call__(self, value: float) -> float:
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)

    def clamp(self, value: float) -> float:
        """Pixel of ``value`` limited to the scale's range (an unbounded interval)."""
        return self(min(max(value, self.lo), self.hi))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values within ``[lo, hi]`` (steps of 1, 2 or 5 × 10^n)."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    # The round step nearest to the raw one (in ratio), so the count stays near ``count``.
    step = min((m * power for m in (1, 2, 5, 10)), key=lambda s: abs(math.log(s / raw)))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12) + 0.0)  # + 0.0: no "-0.00" label
        value += step
    return ticks


def padded(values: Iterable[float], pad: float = 0.06) -> tuple[float, float]:
    """The range of ``values`` widened by ``pad`` of its span on both sides."""
    vals = list(values)
    lo, hi = min(vals), max(vals)
    span = hi - lo or abs(hi) or 1.0
    return lo - span * pad, hi + span * pad


def svg_open(chart_id: str, width: int, height: int, label: str) -> str:
    """An SVG that scales with the page; ``class="chart"`` is what the page's self-check
    looks for."""
    return (f'<svg class="chart" id="{esc(chart_id)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{esc(label)}">')


def svg_close() -> str:
    return "</svg>"


def text(x: float, y: float, content: object, *, anchor: str = "start",
         cls: str | None = None, fill: str | None = None, weight: str | None = None) -> str:
    attrs = f' text-anchor="{anchor}"' if anchor != "start" else ""
    attrs += f' class="{cls}"' if cls else ""
    attrs += f' fill="{fill}"' if fill else ""
    attrs += f' font-weight="{weight}"' if weight else ""
    return f'<text x="{num(x)}" y="{num(y)}"{attrs}>{esc(content)}</text>'


def tooltip(lines: Iterable[object]) -> str:
    """A native tooltip (SVG ``<title>``): shown on hover, no script needed."""
    return "<title>" + esc("\n".join(str(line) for line in lines)) + "</title>"
