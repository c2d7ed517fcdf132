"""The ``toolcall`` scorer: did the harness execute the tools the task expects?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from forge.core.task import ExpectedTool, Task
from forge.harness.base import RunOutput, ToolCall
from forge.scorers._values import Options, OptionScorer, quote
from forge.scorers.base import SCORERS, Score

__all__ = ["ToolCallScorer", "args_match"]


class ToolCallOptions(Options):
    allow_additional: bool = True
    ordered: bool = False


@SCORERS.register("toolcall")
class ToolCallScorer(OptionScorer[ToolCallOptions]):
    """Passes when every tool in ``task.expected_tools`` was executed cleanly.

    A call matches an expected tool when the names are equal, the call is clean
    (``ok`` and no ``error``), and the expected args are a subset of the call's
    (:func:`args_match`). Each expected tool needs its own call: two expected
    ``search`` calls need two real ones. With ``ordered`` the matched calls must come
    in the expected order.

    Failed calls never match and never fail an attempt on their own: a retry after an
    error is normal. With ``allow_additional: false`` a clean call that matches *no*
    expected tool fails the attempt; repeating an expected call does not.

    ``value`` is ``matched / (expected + disallowed extras)``: the fraction of expected
    tools found, lowered by each call that was not allowed, so value 1 iff passed.
    A task without ``expected_tools`` raises ``ValueError`` (unscored). To check the
    answer too, combine: ``{all: [toolcall, exact]}``.
    """

    name: ClassVar[str] = "toolcall"
    options_model = ToolCallOptions

    def score(self, task: Task, output: RunOutput) -> Score:
        expected = task.expected_tools
        if expected is None:
            raise ValueError(f"task {task.id!r} has no 'expected_tools' for 'toolcall' to check")
        calls = output.tool_calls
        clean = [i for i, call in enumerate(calls) if _clean(call)]
        fits = _fitting(expected, calls, clean)
        pairs = _ordered_pairs(fits) if self.options.ordered else _max_pairs(fits)
        unexpected = [] if self.options.allow_additional else _unexpected(expected, calls, clean)
        return _tool_score(expected, calls, fits, pairs, unexpected,
                           ordered=self.options.ordered, failed=len(calls) - len(clean))


def _fitting(expected: Sequence[ExpectedTool], calls: Sequence[ToolCall],
             clean: Sequence[int]) -> list[list[int]]:
    """For each expected tool, the clean calls that match it."""
    return [[j for j in clean if _matches(tool, calls[j])] for tool in expected]


def _unexpected(expected: Sequence[ExpectedTool], calls: Sequence[ToolCall],
                clean: Sequence[int]) -> list[int]:
    """The clean calls that match no expected tool."""
    return [j for j in clean if not any(_matches(tool, calls[j]) for tool in expected)]


def _tool_score(expected: Sequence[ExpectedTool], calls: Sequence[ToolCall],
                fits: Sequence[Sequence[int]], pairs: list[tuple[int, int]],
                unexpected: list[int], *, ordered: bool, failed: int) -> Score:
    """The score of (expected tool, call) ``pairs`` matched and ``unexpected`` calls,
    with a reason for each expected tool left unmatched and each unexpected call."""
    matched = dict(pairs)
    missing = [i for i in range(len(expected)) if i not in matched]
    denominator = len(expected) + len(unexpected)
    reasons = [_why_missing(expected[i], calls, fits[i], ordered) for i in missing]
    reasons += [f"unexpected call {_render(calls[j].name, calls[j].args)}" for j in unexpected]
    return Score(
        value=1.0 if denominator == 0 else len(matched) / denominator,
        passed=not missing and not unexpected,
        explanation="; ".join(reasons) or None,
        details={
            "matched": [[i, j] for i, j in sorted(pairs)],
            "missing": [expected[i].name for i in missing],
            "unexpected": [calls[j].name for j in unexpected],
            "failed_calls": failed,
        },
    )


def args_match(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` holds ``expected``: dicts as subsets, recursively.

    Numbers compare numerically (``2`` matches ``2.0``) but a bool is not a number;
    lists must have the same length and match item by item; anything else is ``==``.
    """
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and args_match(value, actual[key]) for key, value in expected.items())
    if isinstance(expected, list | tuple):
        return (isinstance(actual, list | tuple) and len(expected) == len(actual)
                and all(args_match(e, a) for e, a in zip(expected, actual, strict=True)))
    return _scalar_match(expected, actual)


def _scalar_match(expected: Any, actual: Any) -> bool:
    # ``True == 1`` in Python, but an agent that sent ``true`` for a count did not send 1.
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    return bool(expected == actual)


def _matches(tool: ExpectedTool, call: ToolCall) -> bool:
    return tool.name == call.name and args_match(tool.args, call.args)


def _clean(call: ToolCall) -> bool:
    """A call that ran without error: the only kind that can match an expected tool."""
    return call.ok and call.error is None


def _max_pairs(fits: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """A largest set of (expected, call) pairs using each call once.

    Greedy assignment can strand a tool: ``search{}`` taking the only call that fits
    ``search{q: x}``. Augmenting paths (Kuhn's algorithm) find the best assignment;
    lists are short, so its quadratic cost does not matter.
    """
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(fits)):
        assign(i, set())
    return [(i, j) for j, i in owner.items()]


def _ordered_pairs(fits: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """A largest set of pairs whose calls come in the expected tools' order.

    A longest common subsequence under "fits", so partial credit counts the most
    tools that could have been in order rather than whatever a greedy scan finds.
    """
    calls = sorted({j for row in fits for j in row})
    n, m = len(fits), len(calls)
    fit = [set(row) for row in fits]
    best = _common_lengths(fit, calls)
    pairs: list[tuple[int, int]] = []
    i = k = 0
    while i < n and k < m:
        if calls[k] in fit[i] and best[i][k] == best[i + 1][k + 1] + 1:
            pairs.append((i, calls[k]))
            i, k = i + 1, k + 1
        elif best[i][k] == best[i + 1][k]:
            i += 1
        else:
            k += 1
    return pairs


def _common_lengths(fit: Sequence[set[int]], calls: Sequence[int]) -> list[list[int]]:
    """``best[i][k]``: how many of the expected tools from ``i`` on can be paired in
    order with the calls from ``k`` on, the table the longest common subsequence walks."""
    n, m = len(fit), len(calls)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for k in range(m - 1, -1, -1):
            take = best[i + 1][k + 1] + 1 if calls[k] in fit[i] else 0
            best[i][k] = max(best[i + 1][k], best[i][k + 1], take)
    return best


def _why_missing(tool: ExpectedTool, calls: Sequence[ToolCall], fitting: Sequence[int],
                 ordered: bool) -> str:
    """Name the missing tool and what came closest, so a person can see the near miss."""
    text = f"missing {_render(tool.name, tool.args)}"
    if fitting:
        return (f"{text}: called, but not in the expected order" if ordered else
                f"{text}: its matching call is already counted for another expected tool")
    notes = _near_misses(tool, calls)
    return f"{text}: {', '.join(notes)}" if notes else text


def _near_misses(tool: ExpectedTool, calls: Sequence[ToolCall]) -> list[str]:
    """The calls of the same name that did not match: how many failed, how many had
    other args (with the last one's, the likeliest retry)."""
    same_name = [c for c in calls if c.name == tool.name]
    clean = [c for c in same_name if _clean(c)]
    notes = []
    if len(same_name) > len(clean):
        notes.append(f"{len(same_name) - len(clean)} failed call(s)")
    if clean:
        notes.append(f"{len(clean)} call(s) with other args, e.g. {quote(clean[-1].args, 60)}")
    return notes


def _render(name: str, args: dict[str, Any]) -> str:
    return f"{name}({quote(args, 60)})" if args else f"{name}()"
