"""The python harness (forge.harness.python): ``module:function`` imported from the bench
folder, sync or async, re-imported when stale, refused in one line, with an identity
that follows the code.

Every module written here lives under the test's ``tmp_path``; the autouse fixture
takes them out of ``sys.modules`` and their folders off ``sys.path`` afterwards, so no
test leaves a ``harness`` module behind for the next bench.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MakeBench, line_of

from forge.bench.loader import Bench, load_bench
from forge.errors import BenchError
from forge.evaluation.evaluate import evaluate
from forge.harness.python import import_target
from forge.results.model import AttemptResult, EvalResult, save_result


@pytest.fixture(autouse=True)
def _forget_imports(tmp_path: Path) -> Iterator[None]:
    yield
    root = tmp_path.resolve()
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if source and Path(source).resolve().is_relative_to(root):
            del sys.modules[name]
    # import_target inserts each folder resolved, so a string prefix finds it
    sys.path[:] = [p for p in sys.path if not p.startswith(str(root))]


def bench_error(path: Path) -> BenchError:
    """The BenchError ``load_bench(path)`` raises."""
    with pytest.raises(BenchError) as info:
        load_bench(path)
    return info.value


def assert_refused_at_the_harness(path: Path, *fragments: str) -> None:
    """``load_bench(path)`` fails with one line naming the bench file, the harness field
    and its line, and saying each of ``fragments``."""
    err = bench_error(path)
    assert "\n" not in str(err)
    assert err.file == str(path.resolve())
    assert err.field is not None and err.field.startswith("harness")
    assert err.line == line_of(path, "harness")
    for fragment in fragments:
        assert fragment in err.message


def outputs(result: EvalResult) -> set[object]:
    return {a.output.output for a in result.attempts if a.output is not None}


def stops(result: EvalResult) -> dict[str, list[str]]:
    return {t.task_id: [a.stop_reason for a in t.attempts] for t in result.tasks}


def by_task(result: EvalResult) -> dict[str, list[AttemptResult]]:
    return {t.task_id: t.attempts for t in result.tasks}


# -- importing the target --------------------------------------------------------------

AGENT = """
class Agent:
    @staticmethod
    def answer(config, task, ctx):
        return {"output": "from the class"}


def run(config, task, ctx):
    return {"output": "from the function"}
"""


def test_the_target_is_imported_from_the_bench_folder_not_the_cwd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "forge_test_agent.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the bench folder is neither the cwd nor on the path
    fn, identity = import_target("forge_test_agent:run", folder)
    assert fn({}, None, None) == {"output": "from the function"}
    assert identity.startswith("python:forge_test_agent:run:")
    method, _ = import_target("forge_test_agent:Agent.answer", folder)
    assert method({}, None, None) == {"output": "from the class"}


@pytest.mark.parametrize("target", ["harness", ":run", "harness:", ""])
def test_a_target_without_module_and_function_is_refused(tmp_path: Path, target: str) -> None:
    with pytest.raises(BenchError, match="expected 'module:function'"):
        import_target(target, tmp_path)


def test_a_bad_harness_spec(make_bench: MakeBench) -> None:
    path = make_bench()
    path.write_text(path.read_text(encoding="utf-8").replace(
        '{python: "harness:run"}', '{python: "harness"}'), encoding="utf-8")
    err = bench_error(path)
    assert "module:function" in err.message
    assert err.line == line_of(path, "harness")


# -- refusals: one line naming the bench file and the harness field --------------------


@pytest.mark.parametrize(("source", "expected"), [
    ("import forge_no_such_module_xyz\n\ndef run(config, task, ctx):\n    return {}\n",
     "ModuleNotFoundError"),
    ("def run(config, task, ctx)\n    return {}\n", "SyntaxError"),
    ("raise RuntimeError('configuration missing')\n", "configuration missing"),
])
def test_a_harness_that_cannot_be_imported(make_bench: MakeBench, source: str,
                                           expected: str) -> None:
    assert_refused_at_the_harness(make_bench(source), "cannot import 'harness'", expected)


@pytest.mark.parametrize(("source", "expected"), [
    ("def other(config, task, ctx):\n    return {}\n", "has no attribute 'run'"),
    ("run = 42\n", "'harness:run' is not callable"),
], ids=["missing", "not-callable"])
def test_a_harness_without_the_named_function(make_bench: MakeBench, source: str,
                                              expected: str) -> None:
    assert_refused_at_the_harness(make_bench(source), expected)


# -- sync and async functions ----------------------------------------------------------

ASYNC_ECHO = """
import asyncio

async def run(config, task, ctx):
    await asyncio.sleep(0)
    return {"output": task.expected}
"""


def test_async_and_sync_harnesses_both_work(make_bench: MakeBench,
                                            arith_bench: Bench) -> None:
    bench = load_bench(make_bench(ASYNC_ECHO, folder="async"))
    result = evaluate(bench, bench.defaults)
    assert result.stop_reasons() == {"completed": 6}
    assert result.pass_rate == 1.0
    sync = evaluate(arith_bench, arith_bench.defaults, k=2)
    assert sync.stop_reasons() == {"completed": 24}
    assert sync.pass_rate is not None and 0 < sync.pass_rate < 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sys_exit_in_a_harness_is_an_error_not_the_end_of_forge(make_bench: MakeBench,
                                                                kind: str) -> None:
    source = f"""
import sys

{"async " if kind == "async" else ""}def run(config, task, ctx):
    if task.id == "dev-1":
        sys.exit(3)
    return {{"output": task.expected}}
"""
    bench = load_bench(make_bench(source))
    result = evaluate(bench, bench.defaults)
    assert stops(result)["dev-1"] == ["error", "error"]
    assert all("SystemExit" in (a.error or "") for a in by_task(result)["dev-1"])
    assert stops(result)["dev-2"] == ["completed", "completed"]


# -- stale modules and the identity ----------------------------------------------------


def test_an_edited_harness_runs_its_new_code_in_the_same_process(make_bench: MakeBench) -> None:
    path = make_bench('def run(config, task, ctx):\n    return {"output": "old"}\n')
    bench = load_bench(path)
    assert outputs(evaluate(bench, bench.defaults, k=1)) == {"old"}
    (path.parent / "harness.py").write_text(
        'def run(config, task, ctx):\n    return {"output": "new code"}\n', encoding="utf-8")
    edited = load_bench(path)
    assert outputs(evaluate(edited, edited.defaults, k=1)) == {"new code"}
    assert edited.harness_identity != bench.harness_identity


def test_two_benches_with_a_harness_module_each_keep_their_own(make_bench: MakeBench) -> None:
    a = make_bench('def run(config, task, ctx):\n    return {"output": "from A"}\n', folder="a")
    b = make_bench('def run(config, task, ctx):\n    return {"output": "from B"}\n', folder="b")

    def run(path: Path) -> set[object]:
        bench = load_bench(path)
        return outputs(evaluate(bench, bench.defaults, k=1))

    assert run(a) == {"from A"}
    assert run(b) == {"from B"}
    assert run(a) == {"from A"}  # back to A after B: not B's module from the cache
    assert load_bench(a).harness_identity != load_bench(b).harness_identity


USES_A_HELPER = """
from forge_test_helper import ANSWER

def run(config, task, ctx):
    return {"output": ANSWER}
"""


def test_the_identity_changes_when_a_helper_of_the_bench_folder_does(
        make_bench: MakeBench) -> None:
    path = make_bench(USES_A_HELPER)
    helper = path.parent / "forge_test_helper.py"
    helper.write_text('ANSWER = "one"\n', encoding="utf-8")
    first = load_bench(path).harness_identity
    assert load_bench(path).harness_identity == first  # nothing changed: the same identity
    (path.parent / "notes.txt").write_text("not code", encoding="utf-8")
    assert load_bench(path).harness_identity == first  # only Python files count
    helper.write_text('ANSWER = "two"\n', encoding="utf-8")
    assert load_bench(path).harness_identity != first


def test_an_edited_helper_of_the_bench_folder_runs_after_the_edit(tmp_path: Path) -> None:
    """The identity changes when a helper changes, and so must the code that runs: a
    helper module cached from the first import would keep the old behaviour."""
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "helper_words.py").write_text("WORD = 'one'\n")
    (folder / "edits_harness.py").write_text(
        "import helper_words\n\ndef run(config, task, ctx):\n"
        "    return {'output': helper_words.WORD}\n")
    fn, first = import_target("edits_harness:run", folder)
    assert fn({}, None, None)["output"] == "one"
    (folder / "helper_words.py").write_text("WORD = 'two'\n")
    fn, second = import_target("edits_harness:run", folder)
    assert second != first
    assert fn({}, None, None)["output"] == "two"


def test_an_output_over_16_mib_is_an_error_and_nothing_of_it_is_saved(
        make_bench: MakeBench, tmp_path: Path) -> None:
    bench = load_bench(make_bench("""
        def run(config, task, ctx):
            big = task.id.endswith("0")
            return {"output": "x" * ((16 << 20) + 1) if big else task.expected}
        """))
    result = evaluate(bench, bench.defaults, k=1)
    stops = {a.task_id: (a.stop_reason, a.error) for a in result.attempts}
    assert stops["dev-0"][0] == "error" and stops["dev-1"] == ("completed", None)
    assert (stops["dev-0"][1] or "").startswith("output too large: more than 16 MiB as JSON")
    save_result(result, tmp_path / "r.json")
    assert (tmp_path / "r.json").stat().st_size < 20_000
