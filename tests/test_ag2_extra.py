"""AG2 is an optional extra: forge never imports it unless a bench uses an ``ag2`` kind, and
a bench that does, without the package, stops with one line naming the pip install."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ag2_support import require_ag2, tasks, write_ag2_bench
from conftest import REPO, write_bench

from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
from forge.results.model import save_result

INSTALL = "pip install 'forge[ag2]'"


def python(code: str, *, hide_ag2: bool = False, cwd: Path = REPO,
           tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c code`` with this checkout first on the path; with ``hide_ag2``, a
    sitecustomize makes ``import ag2`` fail as it does where the package is missing."""
    paths = [str(REPO)]
    if hide_ag2:
        assert tmp is not None
        shim = tmp / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(
            "import sys\nsys.modules['ag2'] = None\n", encoding="utf-8")
        paths.insert(0, str(shim))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


LOADED_AG2 = "import sys; print(json.dumps(sorted(m for m in sys.modules if m == 'ag2' " \
             "or m.startswith('ag2.'))))"


@pytest.mark.parametrize("code", [
    "import forge",
    "import forge.bench.loader, forge.harness, forge.scorers, forge.sources, forge.export.sft",
    "from forge.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    "from forge.cli import main\ntry:\n    main(['export', 'ag2', '--help'])\n"
    "except SystemExit:\n    pass",
])
def test_forge_and_its_help_import_no_ag2(code: str) -> None:
    done = python(f"import json\n{code}\n{LOADED_AG2}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_bench_of_another_kind_loads_and_runs_without_importing_ag2(tmp_path: Path) -> None:
    bench = write_bench(tmp_path / "plain")
    done = python("import json\nfrom forge.bench.loader import load_bench\n"
                  "from forge.evaluation.evaluate import evaluate\n"
                  f"b = load_bench({str(bench)!r})\n"
                  "assert evaluate(b, b.defaults, split='dev').pass_rate == 1.0\n" + LOADED_AG2)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def _forge(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return python(f"import sys\nfrom forge.cli import main\nsys.exit(main({list(args)!r}))",
                  hide_ag2=True, tmp=tmp)


def _one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and lines[0].startswith("forge: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def test_the_example_bench_without_ag2_is_one_line_naming_the_install(tmp_path: Path) -> None:
    done = _forge("eval", str(REPO / "benches" / "ag2-orders"), tmp=tmp_path)
    line = _one_line(done, INSTALL, "bench.yaml", "splits.dev.ag2")
    assert "the ag2 task source needs the ag2 package, which is not installed" in line


@pytest.mark.parametrize(("harness", "scorer", "field", "what"), [
    (None, "exact", "harness.ag2", "the ag2 harness"),
    ('{python: "harness:run"}', '{ag2: "x:Y"}', "scorer.ag2", "the ag2 scorer"),
])
def test_each_ag2_kind_without_ag2_names_its_field_and_the_install(
        tmp_path: Path, harness: str | None, scorer: str, field: str, what: str) -> None:
    bench = write_ag2_bench(tmp_path / "b", {"dev": tasks("just guess")}, scorer=scorer,
                            harness=harness)
    (bench.parent / "harness.py").write_text("def run(config, task, ctx):\n    return {}\n")
    done = _forge("eval", str(bench), tmp=tmp_path)
    _one_line(done, INSTALL, field, f"{what} needs the ag2 package")


def test_the_export_without_ag2_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bench = write_bench(tmp_path / "plain")
    loaded = load_bench(bench)
    saved = tmp_path / "dev.json"
    save_result(evaluate(loaded, loaded.defaults, split="dev"), saved)
    out = tmp_path / "run.json"
    done = _forge("export", "ag2", str(saved), str(out), "--bench", str(bench), tmp=tmp_path)
    _one_line(done, INSTALL, "forge export ag2 needs the ag2 package")
    assert not out.exists()


def test_the_extra_and_ci_install_ag2() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    [requirement] = pyproject["project"]["optional-dependencies"]["ag2"]
    assert requirement.replace(" ", "") == "ag2[tracing]>=1.2"
    assert "ag2" not in " ".join(pyproject["project"]["dependencies"])
    spec = importlib.util.spec_from_file_location("run_py", REPO / "run.py")
    assert spec is not None and spec.loader is not None
    run_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_py)
    assert "ag2" in run_py.EXTRAS["test"]  # what CI installs, through the README's command


def test_the_installed_ag2_is_the_one_forge_drives() -> None:
    require_ag2()
    from forge.harness import ag2_sdk as _ag2

    assert _ag2._release(_ag2.version()) >= _ag2.MIN_VERSION
