"""forge: offline configuration search for agent harnesses.

One setting at a time, scored by repeated rollouts, promoted only through gates.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from forge._version import __version__

if _typing.TYPE_CHECKING:
    from forge.bench.loader import Bench, BenchFile, load_bench
    from forge.config.moves import Move, apply_move, neighbourhood
    from forge.config.registry import Config, Registry, load_config, load_registry
    from forge.core.spec import Spec
    from forge.core.task import ExpectedTool, Task
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
    from forge.evaluation.evaluate import DEFAULT_SEED, evaluate, evaluate_async
    from forge.evaluation.rollout import RolloutEngine, derive_seed
    from forge.gates.checks import GateResult
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
    from forge.llm import ChatClient, Endpoint
    from forge.proposers import Proposal, Proposer
    from forge.results.compare import ResultDiff, TaskDiff, diff_results
    from forge.results.model import AttemptResult, EvalResult, TaskResult, load_result, save_result
    from forge.runtime import RuntimeDecision, RuntimeJournal, RuntimeMutator, RuntimeRun
    from forge.scaffold import Scaffold, init_bench
    from forge.scorers import JudgeScorer, Score, Scorer
    from forge.search import Search, SearchOptions, SearchOutcome
    from forge.search.launch import launch_search, resume_search
    from forge.stats import Interval, PairedTest, mean_interval, paired_test, spent_alpha

# Imported on first use, not with the package: a worker process (forge's process
# executor) imports a few forge modules, and importing every one of them (scipy,
# optuna's proposers) cost it a second per start.
_LAZY: dict[str, str] = {
    'Bench': 'forge.bench.loader',
    'BenchFile': 'forge.bench.loader',
    'load_bench': 'forge.bench.loader',
    'ResultDiff': 'forge.results.compare',
    'TaskDiff': 'forge.results.compare',
    'diff_results': 'forge.results.compare',
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
    'DEFAULT_SEED': 'forge.evaluation.evaluate',
    'evaluate': 'forge.evaluation.evaluate',
    'evaluate_async': 'forge.evaluation.evaluate',
    'GateResult': 'forge.gates.checks',
    'AttemptContext': 'forge.harness',
    'AttemptTimeout': 'forge.harness',
    'CommandHarness': 'forge.harness',
    'HttpHarness': 'forge.harness',
    'OpenAIHarness': 'forge.harness',
    'Harness': 'forge.harness',
    'RunOutput': 'forge.harness',
    'ToolCall': 'forge.harness',
    'Usage': 'forge.harness',
    'launch_search': 'forge.search.launch',
    'resume_search': 'forge.search.launch',
    'ChatClient': 'forge.llm',
    'Endpoint': 'forge.llm',
    'Move': 'forge.config.moves',
    'apply_move': 'forge.config.moves',
    'neighbourhood': 'forge.config.moves',
    'Proposal': 'forge.proposers',
    'Proposer': 'forge.proposers',
    'Config': 'forge.config.registry',
    'Registry': 'forge.config.registry',
    'load_config': 'forge.config.registry',
    'load_registry': 'forge.config.registry',
    'AttemptResult': 'forge.results.model',
    'EvalResult': 'forge.results.model',
    'TaskResult': 'forge.results.model',
    'load_result': 'forge.results.model',
    'save_result': 'forge.results.model',
    'RolloutEngine': 'forge.evaluation.rollout',
    'derive_seed': 'forge.evaluation.rollout',
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
    'Spec': 'forge.core.spec',
    'Interval': 'forge.stats',
    'PairedTest': 'forge.stats',
    'mean_interval': 'forge.stats',
    'paired_test': 'forge.stats',
    'spent_alpha': 'forge.stats',
    'ExpectedTool': 'forge.core.task',
    'Task': 'forge.core.task',
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value



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
