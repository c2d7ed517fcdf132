"""The ``smac`` rival of the search-quality contest (benchmarks/quality.py): SMAC3's
algorithm-configuration facade on a bench's dev tasks, at forge's rollout budget.

    python benchmarks/quality.py --bench closedform --methods smac --seeds 2 --budgets 2000
    python benchmarks/quality_smac.py closedform 2000,5000 1   # one search, its time and choice

SMAC3 (``pip install -r benchmarks/requirements.txt``; forge never imports it, this
module imports it inside :func:`run_smac` only) with
``AlgorithmConfigurationFacade``, ask/tell, and everything at the facade's defaults
(random forest, EI, the default config as the whole initial design, the intensifier
with ``max_config_calls`` 2000, a random config every other challenger):

- the space: the bench's registry as a ConfigSpace: a linear int with step 1 an
  ``Integer``, a log-scale int an ``Integer(log=True)``, a number on a step grid (floats,
  ints with a step) an ``OrdinalHyperparameter`` over its grid (ConfigSpace 1.x has no
  quantised numbers), a float without a grid a ``Float``, enums and bools
  ``Categorical``; the default is the bench's start config.
- instances: the dev tasks in groups of ``TASKS_PER_INSTANCE`` (10; the last group may
  be smaller), in the split's order, without instance features; ``deterministic=False``,
  so the intensifier pairs each instance with seeds of its own.
- a trial: one config on one instance with the bench's K attempts per task,
  ``evaluate(bench, cfg, split="dev", k=K, seed=<the trial's seed>, task_ids=<group>)``,
  costing K x 10 rollouts (50 on closedform); trials while the next one fits in the
  budget. cost = 1 - the group's mean score (1.0 when no attempt is scored).
- the tolerances: SMAC3 has no constraints. After each trial, the config's dev
  auxiliary-metric means over every trial it has run are compared with the start
  config's (same rule as ``quality_truth.constraints``: regression beyond the allowance, a
  relative allowance a fraction of the start's mean); if one breaks its tolerance,
  the trial is told the worst cost, 1.0. Earlier trials keep the costs they were told
  (SMAC's run history cannot be rewritten).
- the choice: the intensifier's incumbent once the budget is spent, checked the same
  way (its dev metric means over its trials against the start's); an infeasible
  incumbent, or none, gives the start config (the row's ``fallback`` says so).

The facade does not know the budget (the default initial design is one config
whatever ``n_trials`` is), so a smaller budget's result is the incumbent at the
moment its trials were spent, as with TPE in quality.py.

Why an instance is 10 tasks: with one task per instance (5 rollouts a trial), one
search at 2,000 rollouts (400 trials) took 130 s on closedform, of which the rollouts
took under 2 s: SMAC's ask() (the intensifier's bookkeeping of instance-seed pairs,
the forest's refit and EI maximisation for each challenger), which grows with the
history, so 20,000 rollouts (4,000 trials) would take far more than 3 minutes a
search. With 10 tasks per instance a search takes about 12 s at 2,000 rollouts
(40 trials), 28 s at 5,000 and 2 minutes at 20,000 (400 trials) on closedform, on 2
shared cores. SMAC's own batching (several workers through dask) runs trials in
parallel; it does not cut the overhead per trial, so it would not help here.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import quality_truth as qt  # noqa: E402

# Bumped when run_smac changes what it computes: with the bench digest and the SMAC3
# version, the version of its logged runs.
SMAC_VERSION = 1
# Dev tasks per SMAC instance: one trial = one config on this many tasks, K attempts
# each (the module docstring says why not one task).
TASKS_PER_INSTANCE = 10


def config_space(registry: Any, seed: int) -> tuple[Any, dict[str, list[Any]]]:
    """The registry as a ConfigSpace, and per categorical setting its values (the
    space holds them as strings)."""
    from ConfigSpace import (
        Categorical,
        ConfigurationSpace,
        Float,
        Integer,
        OrdinalHyperparameter,
    )
    space = ConfigurationSpace(seed=seed)
    choices: dict[str, list[Any]] = {}
    for key, s in registry.settings.items():
        if s.type in ("bool", "enum"):
            values = [False, True] if s.type == "bool" else list(s.choices)
            choices[key] = values
            space.add(Categorical(key, [str(v) for v in values], default=str(s.default)))
        elif s.type == "int" and (s.scale == "log" or s.step == 1):
            space.add(Integer(key, (s.min, s.max), default=s.default, log=s.scale == "log"))
        elif s.type == "float" and (s.step is None or s.scale == "log"):
            space.add(Float(key, (s.min, s.max), default=s.default, log=s.scale == "log"))
        else:  # a step grid: ordered, every point reachable
            grid = qt._grid(s)
            space.add(OrdinalHyperparameter(key, grid, default_value=s.snap(s.default)))
    return space, choices


def config_values(smac_cfg: Any, choices: dict[str, list[Any]]) -> dict[str, Any]:
    values = {}
    for key, value in dict(smac_cfg).items():
        if key in choices:
            value = next(v for v in choices[key] if str(v) == value)
        elif hasattr(value, "item"):  # numpy scalars
            value = value.item()
        values[key] = value
    return values


class _Means:
    """Running means of a config's dev auxiliary metrics over its trials."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, float], n: int) -> None:
        for metric, value in metrics.items():
            if math.isfinite(value):
                self.sums[metric] = self.sums.get(metric, 0.0) + value * n
                self.counts[metric] = self.counts.get(metric, 0) + n

    def means(self) -> dict[str, float]:
        return {m: self.sums[m] / self.counts[m] for m in self.sums if self.counts[m]}


def feasible(name: str, start: _Means, cand: _Means) -> bool:
    return all(v <= 0 for v in qt.constraints(name, start.means(), cand.means()).values())


def run_smac(name: str, seed: int, budgets: list[int]) -> list[dict[str, Any]]:
    """One SMAC3 search up to the largest budget; one row per budget."""
    from smac import AlgorithmConfigurationFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    from forge.evaluation.evaluate import evaluate
    t0 = time.perf_counter()
    bench = qt.bench_of(name)
    k = bench.spec.rollouts.k
    ids = [t.id for t in bench.tasks("dev")]
    groups = {f"dev{i // TASKS_PER_INSTANCE:03d}": ids[i:i + TASKS_PER_INSTANCE]
              for i in range(0, len(ids), TASKS_PER_INSTANCE)}
    space, choices = config_space(bench.registry, seed)
    start = bench.defaults
    n_trials = max(budgets) // k + 1  # more than fit: the budget is the stop
    with _scratch() as out:
        scenario = Scenario(space, name=f"forge-{name}-{seed}", output_directory=out,
                            deterministic=False, instances=list(groups), n_trials=n_trials,
                            seed=seed)
        smac = AlgorithmConfigurationFacade(scenario, _never_called, overwrite=True,
                                            logging_level=40)
        means: dict[str, _Means] = {}
        used = trials = 0
        infeasible: set[str] = set()  # configs told the worst cost at least once
        largest = max(len(g) for g in groups.values())
        rows: list[dict[str, Any]] = []
        pending = sorted(budgets)
        while pending:
            # The next trial would not fit this budget (its instance is not known
            # before ask: charged as the largest group).
            if used + k * largest > pending[0]:
                incumbent = smac.intensifier.get_incumbent()
                chosen, fallback, inc_values = start.values, True, None
                if incumbent is not None:
                    inc_values = config_values(incumbent, choices)
                    inc = bench.registry.validate_config(inc_values)
                    if feasible(name, means[start.fingerprint], means[inc.fingerprint]):
                        chosen, fallback = inc.values, False
                rows.append({"method": "smac", "final_config": chosen, "rollouts": used,
                             "trials": trials, "distinct": len(means), "fallback": fallback,
                             "incumbent": inc_values, "told_infeasible": len(infeasible),
                             "budget": pending.pop(0), "wall_s": time.perf_counter() - t0})
                continue
            info = smac.ask()
            values = config_values(info.config, choices)
            cfg = bench.registry.validate_config(values)
            res = evaluate(bench, cfg, split="dev", k=k, seed=info.seed,
                           task_ids=groups[info.instance])
            used += res.n_attempts
            trials += 1
            mine = means.setdefault(cfg.fingerprint, _Means())
            mine.add(dict(res.metrics), res.n_attempts)
            if start.fingerprint not in means:
                raise RuntimeError(f"SMAC's first trial was not the start config: {values}")
            score = res.mean_score
            cost = 1.0 if score is None or not math.isfinite(score) else 1.0 - score
            if not feasible(name, means[start.fingerprint], mine):
                cost = 1.0
                infeasible.add(cfg.fingerprint)
            smac.tell(info, TrialValue(cost=cost), save=False)
    return rows


def _never_called(config: Any, instance: str, seed: int = 0) -> float:
    raise AssertionError("the contest drives SMAC by ask/tell")


class _scratch:
    """A temporary output directory for SMAC's run files (not kept)."""

    def __enter__(self) -> Path:
        import tempfile
        self._tmp = tempfile.TemporaryDirectory(prefix="forge-smac-")
        return Path(self._tmp.name)

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()


if __name__ == "__main__":
    import json
    import logging
    logging.disable(logging.WARNING)
    bench_name, tops, s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for row in run_smac(bench_name, s, [int(b) for b in tops.split(",")]):
        print(json.dumps(row, default=str))
