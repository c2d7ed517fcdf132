"""forge: offline configuration search for agent harnesses.

One setting at a time, scored by repeated rollouts, promoted only through gates.
"""

from __future__ import annotations

from forge.bench import Bench, BenchFile, load_bench
from forge.compare import ResultDiff, TaskDiff, diff_results
from forge.errors import (
    BenchError,
    ConfigError,
    EvaluationInterrupted,
    ForgeError,
    IncomparableError,
    InputFileError,
    MoveError,
    RegistryError,
    ResultFileError,
    StaleMoveError,
    UserError,
)
from forge.evaluate import DEFAULT_SEED, evaluate, evaluate_async
from forge.gates import GateResult
from forge.harness import AttemptContext, Harness, RunOutput, ToolCall, Usage
from forge.launch import launch_search, resume_search
from forge.moves import Move, apply_move, neighbourhood
from forge.proposers import Proposal, Proposer
from forge.registry import Config, Registry, load_config, load_registry
from forge.results import AttemptResult, EvalResult, TaskResult, load_result, save_result
from forge.rollout import RolloutEngine, derive_seed
from forge.runtime import RuntimeDecision, RuntimeJournal, RuntimeMutator, RuntimeRun
from forge.scorers import Score, Scorer
from forge.search import Search, SearchOptions, SearchOutcome
from forge.spec import Spec
from forge.stats import Interval, PairedTest, mean_interval, paired_test, spent_alpha
from forge.task import ExpectedTool, Task

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SEED",
    "AttemptContext",
    "AttemptResult",
    "Bench",
    "BenchError",
    "BenchFile",
    "Config",
    "ConfigError",
    "EvalResult",
    "EvaluationInterrupted",
    "ExpectedTool",
    "ForgeError",
    "GateResult",
    "Harness",
    "IncomparableError",
    "InputFileError",
    "Interval",
    "Move",
    "MoveError",
    "PairedTest",
    "Proposal",
    "Proposer",
    "Registry",
    "RegistryError",
    "ResultDiff",
    "ResultFileError",
    "RolloutEngine",
    "RunOutput",
    "RuntimeDecision",
    "RuntimeJournal",
    "RuntimeMutator",
    "RuntimeRun",
    "Score",
    "Scorer",
    "Search",
    "SearchOptions",
    "SearchOutcome",
    "Spec",
    "StaleMoveError",
    "Task",
    "TaskDiff",
    "TaskResult",
    "ToolCall",
    "Usage",
    "UserError",
    "__version__",
    "apply_move",
    "derive_seed",
    "diff_results",
    "evaluate",
    "evaluate_async",
    "launch_search",
    "load_bench",
    "load_config",
    "load_registry",
    "load_result",
    "mean_interval",
    "neighbourhood",
    "paired_test",
    "resume_search",
    "save_result",
    "spent_alpha",
]
