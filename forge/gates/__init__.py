"""The gates a confirmation tests a candidate by, one object each.

- :class:`ImprovementGate` (``dev``): better than the incumbent by ``min_effect``;
- :class:`NonInferiorityGate` (``val``): no worse than the incumbent beyond a margin;
- :class:`ToleranceGate` (``aux:<metric>``): each metric's regression against the start
  config within its tolerance, read by a :class:`ToleranceTest` strategy
  (:class:`TTest`, :class:`ExactTest`, :class:`NettedTest`);
- :class:`UnscoredGate` (``unscored``): the candidate's failure share no higher than
  the start config's beyond its allowance (refused where shown higher);
- :class:`FloorGate` (``floor:<tag>``): critical tasks' pass rates.

The first four are group-sequential (:class:`SequentialGate`): each look tests them at
its nominal level and returns a :class:`Verdict` once one decides. Their evidence is
two configs' attempts paired on shared (task, seed) keys
(:class:`PairedScores`, :class:`Regressions`). When to look is the confirmation's
(:mod:`forge.search.confirm`).
"""

from __future__ import annotations

from forge.gates.base import Details, SequentialGate, Verdict
from forge.gates.evidence import PairedScores, Regressions
from forge.gates.floor import FloorGate, SplitPair
from forge.gates.improvement import ImprovementGate
from forge.gates.noninferiority import NonInferiorityGate
from forge.gates.tolerance import (
    BLOCK_CHANCE,
    EXTENSION_SHARE,
    SPARSE_TASKS,
    ExactTest,
    NettedTest,
    ToleranceGate,
    ToleranceLook,
    ToleranceReading,
    ToleranceTest,
    TTest,
    tolerance_test,
)
from forge.gates.unscored import UnscoredGate

__all__ = ["BLOCK_CHANCE", "EXTENSION_SHARE", "SPARSE_TASKS", "Details", "ExactTest",
           "FloorGate", "ImprovementGate", "NettedTest", "NonInferiorityGate",
           "PairedScores", "Regressions", "SequentialGate", "SplitPair", "TTest",
           "ToleranceGate", "ToleranceLook", "ToleranceReading", "ToleranceTest", "UnscoredGate",
           "Verdict",
           "tolerance_test"]
