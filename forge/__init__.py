"""forge: offline configuration search for agent harnesses.

One setting at a time, scored by repeated rollouts, promoted only through gates.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from forge._version import __version__

#: The public API, the one list of it: each module and the names ``forge`` exports from
#: it. The names are imported on first use, not with the package: a worker process
#: (forge's process executor) imports a few forge modules, and importing every one of
#: them (scipy, optuna's proposers) cost it a second per start.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "forge.bench.loader": ("Bench", "BenchFile", "load_bench"),
    "forge.config.moves": ("Move", "apply_move", "neighbourhood"),
    "forge.config.registry": ("Config", "Registry", "load_config", "load_registry"),
    "forge.core.spec": ("Spec",),
    "forge.core.task": ("ExpectedTool", "Task"),
    "forge.errors": (
        "BenchError", "ClusterUnreachable", "ConfigError", "EvaluationInterrupted",
        "ExecutorLost", "ExportError", "ForgeError", "IncomparableError", "InputFileError",
        "JournalError", "LLMError",
        "MoveError", "OptionError", "PromoteError", "RegistryError", "ResultFileError",
        "RunInterrupted", "RuntimeJournalError", "RuntimeMutatorError", "StaleMoveError",
        "StartFailed", "UserError",
    ),
    "forge.evaluation.evaluate": ("DEFAULT_SEED", "evaluate", "evaluate_async"),
    "forge.evaluation.rollout": ("RolloutEngine", "derive_seed"),
    "forge.gates.checks": ("GateResult",),
    "forge.harness": (
        "AttemptContext", "AttemptTimeout", "CommandHarness", "Harness", "HttpHarness",
        "OpenAIHarness", "RunOutput", "ToolCall", "Usage",
    ),
    "forge.llm": ("ChatClient", "Endpoint"),
    "forge.proposers": ("Proposal", "Proposer"),
    "forge.results.compare": ("ResultDiff", "TaskDiff", "diff_results"),
    "forge.results.model": (
        "AttemptResult", "EvalResult", "TaskResult", "load_result", "save_result",
    ),
    "forge.runtime": ("RuntimeDecision", "RuntimeJournal", "RuntimeMutator", "RuntimeRun"),
    "forge.scaffold": ("Scaffold", "init_bench"),
    "forge.scorers": ("JudgeScorer", "Score", "Scorer"),
    "forge.search": ("Search", "SearchOptions", "SearchOutcome"),
    "forge.search.launch": ("launch_search", "resume_search", "search_options"),
    "forge.stats": ("Interval", "PairedTest", "mean_interval", "paired_test", "spent_alpha"),
}

#: Each exported name -> the module it is loaded from.
_LAZY: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["__version__", *_LAZY]

# For type checkers only, which cannot follow ``__getattr__``: the same names
# (tests/test_forge.py holds the two to each other), re-exported as ``X as X``.
if _typing.TYPE_CHECKING:
    from forge.bench.loader import Bench as Bench
    from forge.bench.loader import BenchFile as BenchFile
    from forge.bench.loader import load_bench as load_bench
    from forge.config.moves import Move as Move
    from forge.config.moves import apply_move as apply_move
    from forge.config.moves import neighbourhood as neighbourhood
    from forge.config.registry import Config as Config
    from forge.config.registry import Registry as Registry
    from forge.config.registry import load_config as load_config
    from forge.config.registry import load_registry as load_registry
    from forge.core.spec import Spec as Spec
    from forge.core.task import ExpectedTool as ExpectedTool
    from forge.core.task import Task as Task
    from forge.errors import BenchError as BenchError
    from forge.errors import ClusterUnreachable as ClusterUnreachable
    from forge.errors import ConfigError as ConfigError
    from forge.errors import EvaluationInterrupted as EvaluationInterrupted
    from forge.errors import ExecutorLost as ExecutorLost
    from forge.errors import ExportError as ExportError
    from forge.errors import ForgeError as ForgeError
    from forge.errors import IncomparableError as IncomparableError
    from forge.errors import InputFileError as InputFileError
    from forge.errors import JournalError as JournalError
    from forge.errors import LLMError as LLMError
    from forge.errors import MoveError as MoveError
    from forge.errors import OptionError as OptionError
    from forge.errors import PromoteError as PromoteError
    from forge.errors import RegistryError as RegistryError
    from forge.errors import ResultFileError as ResultFileError
    from forge.errors import RunInterrupted as RunInterrupted
    from forge.errors import RuntimeJournalError as RuntimeJournalError
    from forge.errors import RuntimeMutatorError as RuntimeMutatorError
    from forge.errors import StaleMoveError as StaleMoveError
    from forge.errors import StartFailed as StartFailed
    from forge.errors import UserError as UserError
    from forge.evaluation.evaluate import DEFAULT_SEED as DEFAULT_SEED
    from forge.evaluation.evaluate import evaluate as evaluate
    from forge.evaluation.evaluate import evaluate_async as evaluate_async
    from forge.evaluation.rollout import RolloutEngine as RolloutEngine
    from forge.evaluation.rollout import derive_seed as derive_seed
    from forge.gates.checks import GateResult as GateResult
    from forge.harness import AttemptContext as AttemptContext
    from forge.harness import AttemptTimeout as AttemptTimeout
    from forge.harness import CommandHarness as CommandHarness
    from forge.harness import Harness as Harness
    from forge.harness import HttpHarness as HttpHarness
    from forge.harness import OpenAIHarness as OpenAIHarness
    from forge.harness import RunOutput as RunOutput
    from forge.harness import ToolCall as ToolCall
    from forge.harness import Usage as Usage
    from forge.llm import ChatClient as ChatClient
    from forge.llm import Endpoint as Endpoint
    from forge.proposers import Proposal as Proposal
    from forge.proposers import Proposer as Proposer
    from forge.results.compare import ResultDiff as ResultDiff
    from forge.results.compare import TaskDiff as TaskDiff
    from forge.results.compare import diff_results as diff_results
    from forge.results.model import AttemptResult as AttemptResult
    from forge.results.model import EvalResult as EvalResult
    from forge.results.model import TaskResult as TaskResult
    from forge.results.model import load_result as load_result
    from forge.results.model import save_result as save_result
    from forge.runtime import RuntimeDecision as RuntimeDecision
    from forge.runtime import RuntimeJournal as RuntimeJournal
    from forge.runtime import RuntimeMutator as RuntimeMutator
    from forge.runtime import RuntimeRun as RuntimeRun
    from forge.scaffold import Scaffold as Scaffold
    from forge.scaffold import init_bench as init_bench
    from forge.scorers import JudgeScorer as JudgeScorer
    from forge.scorers import Score as Score
    from forge.scorers import Scorer as Scorer
    from forge.search import Search as Search
    from forge.search import SearchOptions as SearchOptions
    from forge.search import SearchOutcome as SearchOutcome
    from forge.search.launch import launch_search as launch_search
    from forge.search.launch import resume_search as resume_search
    from forge.search.launch import search_options as search_options
    from forge.stats import Interval as Interval
    from forge.stats import PairedTest as PairedTest
    from forge.stats import mean_interval as mean_interval
    from forge.stats import paired_test as paired_test
    from forge.stats import spent_alpha as spent_alpha


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value
