"""The scorer: forge calls ``score(task, output)`` on every attempt that completed.

bench.yaml names it (``scorer: {code: {target: "scorer:score"}}``). Return a bool, a
number in [0, 1] (passed at 0.5 or above, or at the ``threshold`` bench.yaml gives),
or a ``Score`` with an explanation a person can audit. A wrong answer is a fail: raise
only when the attempt cannot be judged at all; it is then counted apart, never as a
zero. forge's built-in scorers (exact, numeric, regex, contains, toolcall, judge and
their combinations) can replace this file: see ``forge schema bench``.
"""

from __future__ import annotations

from forge import RunOutput, Score, Task


def score(task: Task, output: RunOutput) -> Score:
    """Passed when the answer is the expected whole number."""
    text = str(output.output).strip()
    try:
        answer = int(text)
    except ValueError:
        return Score(value=0.0, passed=False, explanation=f"not a number: {text[:40]!r}")
    if answer == task.expected:
        return Score(value=1.0, passed=True)
    return Score(value=0.0, passed=False,
                 explanation=f"expected {task.expected}, got {answer}")
