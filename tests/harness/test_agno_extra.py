"""forge[agno] is optional: forge never imports agno unless a bench uses an agno kind,
and a bench that does, without the extra, is one line naming the install (exit 2).

These run without agno installed: the package is hidden from a subprocess by a
``sitecustomize`` that sets ``sys.modules["agno"] = None``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ARITH, REPO, write_bench

SUPPORT = REPO / "benches" / "agno-support"
INSTALL = "pip install 'forge[agno]'"


def run_python(code: str, *, hide_agno: bool = False, tmp_path: Path | None = None
               ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    path = [str(REPO), env.get("PYTHONPATH", "")]
    if hide_agno:
        assert tmp_path is not None
        shim = tmp_path / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(
            "import sys\nsys.modules['agno'] = None  # as if forge[agno] were not installed\n",
            encoding="utf-8")
        path.insert(0, str(shim))
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, cwd=REPO)


IMPORTED = ("print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'agno', 'openai'})))")


def test_import_forge_and_its_help_import_no_agno() -> None:
    done = run_python(f"""
import json, runpy, sys
import forge
sys.argv = ["forge", "--help"]
try:
    runpy.run_module("forge", run_name="__main__")
except SystemExit:
    pass
{IMPORTED}
""")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_bench_of_another_kind_loads_and_runs_without_importing_agno() -> None:
    done = run_python(f"""
import json, sys
from forge.bench.loader import load_bench
from forge.evaluation.evaluate import evaluate
bench = load_bench({str(ARITH)!r})
assert evaluate(bench, bench.defaults, k=1).n_scored > 0
{IMPORTED}
""")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def forge_cli(tmp_path: Path, *args: object) -> subprocess.CompletedProcess[str]:
    quoted = ", ".join(repr(str(a)) for a in args)
    return run_python(f"""
import sys
from forge.cli import main
sys.argv = ["forge", {quoted}]
sys.exit(main())
""", hide_agno=True, tmp_path=tmp_path)


def test_the_example_bench_without_agno_is_one_line_naming_the_install(tmp_path: Path) -> None:
    done = forge_cli(tmp_path, "eval", SUPPORT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(SUPPORT / "bench.yaml") in lines[0] and "splits.dev.agno" in lines[0]
    assert INSTALL in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["harness", "scorer"])
def test_an_agno_harness_or_scorer_without_agno_names_its_field(tmp_path: Path,
                                                                  where: str) -> None:
    bench = write_bench(tmp_path / "bench", textwrap.dedent("""
        def run(config, task, ctx):
            return {"output": task.expected}
    """), scorer='{agno: "harness:SCORER"}' if where == "scorer" else "exact")
    if where == "harness":
        bench.write_text(bench.read_text().replace('harness: {python: "harness:run"}',
                                                   'harness: {agno: "harness:make_agent"}'))
    done = forge_cli(tmp_path, "eval", bench)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{where}.agno" in lines[0] and INSTALL in lines[0], lines
