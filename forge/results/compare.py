"""Comparing two results: only on shared (task, seed) keys, only in the same environment."""

from __future__ import annotations

from dataclasses import dataclass, field

from forge.errors import IncomparableError
from forge.results.model import AttemptResult, EvalResult, paired_attempts

__all__ = ["ResultDiff", "TaskDiff", "check_comparable", "diff_results", "require_paired",
           "why_unpaired"]


def check_comparable(a: EvalResult, b: EvalResult, *, names: tuple[str, str] = ("A", "B")
                     ) -> None:
    """Refuse results from different environments; a missing fingerprint never matches."""
    if a.env_fingerprint is None or b.env_fingerprint is None:
        which = names[0] if a.env_fingerprint is None else names[1]
        raise IncomparableError(f"{which} has no env fingerprint, so it matches nothing")
    if a.env_fingerprint == b.env_fingerprint:
        return
    differing = sorted(k for k in set(a.env) | set(b.env) if a.env.get(k) != b.env.get(k))
    detail = ", ".join(f"{k} ({a.env.get(k)!r} vs {b.env.get(k)!r})" if k in {"k", "timeout_s",
                       "split", "bench"} else k for k in differing) or "fingerprint"
    raise IncomparableError(f"{names[0]} and {names[1]} come from different environments: "
                            f"{detail} differ")


@dataclass(frozen=True)
class TaskDiff:
    """One task present in both results, compared on attempts scored in both (same seed)."""

    task_id: str
    n_pairs: int
    score_a: float | None
    score_b: float | None
    pass_a: float | None
    pass_b: float | None

    @property
    def delta(self) -> float | None:
        if self.score_a is None or self.score_b is None:
            return None
        return self.score_b - self.score_a

    @property
    def pass_delta(self) -> float | None:
        if self.pass_a is None or self.pass_b is None:
            return None
        return self.pass_b - self.pass_a


@dataclass(frozen=True)
class ResultDiff:
    tasks: list[TaskDiff]
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    @property
    def paired(self) -> list[TaskDiff]:
        return [t for t in self.tasks if t.n_pairs > 0]

    @property
    def mean_delta(self) -> float | None:
        deltas = [t.delta for t in self.paired if t.delta is not None]
        return sum(deltas) / len(deltas) if deltas else None

    @property
    def improved(self) -> list[TaskDiff]:
        return [t for t in self.paired if (t.delta or 0) > 0]

    @property
    def regressed(self) -> list[TaskDiff]:
        return [t for t in self.paired if (t.delta or 0) < 0]


def diff_results(a: EvalResult, b: EvalResult, *, names: tuple[str, str] = ("A", "B")
                 ) -> ResultDiff:
    """Per-task comparison of ``b`` against ``a``. Tasks in one result only are listed,
    not dropped; attempts are paired by seed and kept only where both were scored."""
    check_comparable(a, b, names=names)
    ids_a = {t.task_id for t in a.tasks}
    ids_b = {t.task_id for t in b.tasks}
    diffs = [_task_diff(task_id, pairs)
             for task_id, pairs in paired_attempts(a.by_task, b.by_task).items()]
    return ResultDiff(tasks=diffs,
                      only_in_a=[t.task_id for t in a.tasks if t.task_id not in ids_b],
                      only_in_b=[t.task_id for t in b.tasks if t.task_id not in ids_a])


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _task_diff(task_id: str, pairs: list[tuple[AttemptResult, AttemptResult]]) -> TaskDiff:
    """One task's means on each side over its paired attempts."""
    n = len(pairs)
    return TaskDiff(
        task_id=task_id, n_pairs=n,
        score_a=_mean([x.score.value for x, _ in pairs if x.score]),
        score_b=_mean([y.score.value for _, y in pairs if y.score]),
        pass_a=_mean([float(x.passed) for x, _ in pairs]) if n else None,
        pass_b=_mean([float(y.passed) for _, y in pairs]) if n else None,
    )


def why_unpaired(a: EvalResult, b: EvalResult, names: tuple[str, str] = ("A", "B")) -> str:
    """The likely reason two comparable results pair no attempt, for a message."""
    if a.seed != b.seed:
        return f"{names[0]} was run with seed {a.seed}, {names[1]} with seed {b.seed}"
    return "the attempts scored in one were not scored in the other"


def require_paired(diff: ResultDiff, a: EvalResult, b: EvalResult, *,
                   names: tuple[str, str] = ("A", "B")) -> None:
    """Refuse a diff that paired nothing: a table of dashes and "0 paired tasks" would
    read as "no change" (:class:`IncomparableError`, exit 2)."""
    if not diff.paired:
        raise IncomparableError(
            f"{names[0]} and {names[1]} share no seed scored in both, so nothing was "
            f"compared ({why_unpaired(a, b, names)}); run both with the same --seed, or "
            f"use forge gate --baseline, which compares them unpaired")
