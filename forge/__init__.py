"""forge: offline configuration search for agent harnesses.

One setting at a time, scored by repeated rollouts, promoted only through gates.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _typing

if _typing.TYPE_CHECKING:
    from forge.bench import Bench, BenchFile, load_bench
    from forge.compare import ResultDiff, TaskDiff, diff_results
    from forge.errors import (
        BenchError,
        ConfigError,
        EvaluationInterrupted,
        ExecutorLost,
        ExportError,
        ForgeError,
        IncomparableError,
        InputFileError,
        JournalError,
        LLMError,
        MoveError,
        OptionError,
        PromoteError,
        RegistryError,
        ResultFileError,
        RuntimeJournalError,
        RuntimeMutatorError,
        StaleMoveError,
        StartFailed,
        UserError,
    )
    from forge.evaluate import DEFAULT_SEED, evaluate, evaluate_async
    from forge.harness import (
        AttemptContext,
        AttemptTimeout,
        CommandHarness,
        Harness,
        HttpHarness,
        OpenAIHarness,
        RunOutput,
        ToolCall,
        Usage,
    )
    from forge.launch import launch_search, resume_search
    from forge.llm import ChatClient, Endpoint
    from forge.moves import Move, apply_move, neighbourhood
    from forge.proposers import Proposal, Proposer
    from forge.registry import Config, Registry, load_config, load_registry
    from forge.results import AttemptResult, EvalResult, TaskResult, load_result, save_result
    from forge.rollout import RolloutEngine, derive_seed
    from forge.runtime import RuntimeDecision, RuntimeJournal, RuntimeMutator, RuntimeRun
    from forge.scaffold import Scaffold, init_bench
    from forge.scorers import JudgeScorer, Score, Scorer
    from forge.search import Search, SearchOptions, SearchOutcome
    from forge.spec import Spec
    from forge.stats import Interval, PairedTest, mean_interval, paired_test, spent_alpha
    from forge.stats.gates import GateResult
    from forge.task import ExpectedTool, Task

# Imported on first use, not with the package: a worker process (forge's process
# executor) imports a few forge modules, and importing every one of them (scipy,
# optuna's proposers) cost it a second per start.
_LAZY: dict[str, str] = {
    'Bench': 'forge.bench',
    'BenchFile': 'forge.bench',
    'load_bench': 'forge.bench',
    'ResultDiff': 'forge.compare',
    'TaskDiff': 'forge.compare',
    'diff_results': 'forge.compare',
    'BenchError': 'forge.errors',
    'ConfigError': 'forge.errors',
    'EvaluationInterrupted': 'forge.errors',
    'ExecutorLost': 'forge.errors',
    'ExportError': 'forge.errors',
    'ForgeError': 'forge.errors',
    'IncomparableError': 'forge.errors',
    'InputFileError': 'forge.errors',
    'JournalError': 'forge.errors',
    'LLMError': 'forge.errors',
    'MoveError': 'forge.errors',
    'OptionError': 'forge.errors',
    'PromoteError': 'forge.errors',
    'RegistryError': 'forge.errors',
    'ResultFileError': 'forge.errors',
    'RuntimeJournalError': 'forge.errors',
    'RuntimeMutatorError': 'forge.errors',
    'StaleMoveError': 'forge.errors',
    'StartFailed': 'forge.errors',
    'UserError': 'forge.errors',
    'DEFAULT_SEED': 'forge.evaluate',
    'evaluate': 'forge.evaluate',
    'evaluate_async': 'forge.evaluate',
    'GateResult': 'forge.stats.gates',
    'AttemptContext': 'forge.harness',
    'AttemptTimeout': 'forge.harness',
    'CommandHarness': 'forge.harness',
    'HttpHarness': 'forge.harness',
    'OpenAIHarness': 'forge.harness',
    'Harness': 'forge.harness',
    'RunOutput': 'forge.harness',
    'ToolCall': 'forge.harness',
    'Usage': 'forge.harness',
    'launch_search': 'forge.launch',
    'resume_search': 'forge.launch',
    'ChatClient': 'forge.llm',
    'Endpoint': 'forge.llm',
    'Move': 'forge.moves',
    'apply_move': 'forge.moves',
    'neighbourhood': 'forge.moves',
    'Proposal': 'forge.proposers',
    'Proposer': 'forge.proposers',
    'Config': 'forge.registry',
    'Registry': 'forge.registry',
    'load_config': 'forge.registry',
    'load_registry': 'forge.registry',
    'AttemptResult': 'forge.results',
    'EvalResult': 'forge.results',
    'TaskResult': 'forge.results',
    'load_result': 'forge.results',
    'save_result': 'forge.results',
    'RolloutEngine': 'forge.rollout',
    'derive_seed': 'forge.rollout',
    'RuntimeDecision': 'forge.runtime',
    'RuntimeJournal': 'forge.runtime',
    'RuntimeMutator': 'forge.runtime',
    'RuntimeRun': 'forge.runtime',
    'Scaffold': 'forge.scaffold',
    'init_bench': 'forge.scaffold',
    'JudgeScorer': 'forge.scorers',
    'Score': 'forge.scorers',
    'Scorer': 'forge.scorers',
    'Search': 'forge.search',
    'SearchOptions': 'forge.search',
    'SearchOutcome': 'forge.search',
    'Spec': 'forge.spec',
    'Interval': 'forge.stats',
    'PairedTest': 'forge.stats',
    'mean_interval': 'forge.stats',
    'paired_test': 'forge.stats',
    'spent_alpha': 'forge.stats',
    'ExpectedTool': 'forge.task',
    'Task': 'forge.task',
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


class _Package(_types.ModuleType):
    """forge itself, keeping a lazy name bound to its object when the submodule of the
    same name is imported.

    Importing a submodule binds it on its package: once anything had imported
    ``forge.evaluate`` (``forge.launch`` does), ``forge.evaluate`` was that module, over
    the function, and ``from forge import evaluate`` gave a module. (So does
    ``import forge.evaluate as m`` now give the function; ``from forge.evaluate import
    ...`` and ``importlib.import_module`` give the module as always.)
    """

    def __setattr__(self, name: str, value: _typing.Any) -> None:
        if isinstance(value, _types.ModuleType) and _LAZY.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SEED",
    "AttemptContext",
    "AttemptResult",
    "AttemptTimeout",
    "Bench",
    "BenchError",
    "BenchFile",
    "ChatClient",
    "CommandHarness",
    "Config",
    "ConfigError",
    "Endpoint",
    "EvalResult",
    "EvaluationInterrupted",
    "ExecutorLost",
    "ExpectedTool",
    "ExportError",
    "ForgeError",
    "GateResult",
    "Harness",
    "HttpHarness",
    "IncomparableError",
    "InputFileError",
    "Interval",
    "JournalError",
    "JudgeScorer",
    "LLMError",
    "Move",
    "MoveError",
    "OpenAIHarness",
    "OptionError",
    "PairedTest",
    "PromoteError",
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
    "RuntimeJournalError",
    "RuntimeMutator",
    "RuntimeMutatorError",
    "RuntimeRun",
    "Scaffold",
    "Score",
    "Scorer",
    "Search",
    "SearchOptions",
    "SearchOutcome",
    "Spec",
    "StaleMoveError",
    "StartFailed",
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
    "init_bench",
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
