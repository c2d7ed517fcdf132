"""The statistics the gates rest on, apart from any search.

:mod:`~forge.stats.paired` holds the paired tests and bounds (a t-test of candidate
minus incumbent, intervals, the netted test of a rare 0/1 change, the spending sequence
across confirmations); :mod:`~forge.stats.sequential` the group-sequential boundaries
each look of a confirmation is tested at (power spending, the exact boundary for rare
events); :mod:`~forge.gates.checks` what the gates read off two configs' attempts (score
deltas, a metric's regressions against the start and their allowance, floors, the end's
tolerance check).
"""

from __future__ import annotations

from forge.stats.paired import (
    IDENTICAL_PAIRS,
    FixedTasksBound,
    Interval,
    PairedTest,
    drop_lower_bound,
    fixed_tasks_bound,
    mean_interval,
    net_regression_p,
    paired_test,
    spent_alpha,
    wilson_interval,
)

__all__ = ["IDENTICAL_PAIRS", "FixedTasksBound", "Interval", "PairedTest", "drop_lower_bound",
           "fixed_tasks_bound", "mean_interval", "net_regression_p", "paired_test",
           "spent_alpha", "wilson_interval"]
