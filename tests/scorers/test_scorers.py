"""The scorer registry: names, specs as a bench writes them, one-line errors, digests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forge.core.spec import BuildContext, Spec
from forge.errors import BenchError
from forge.scorers import SCORERS, Scorer, build_scorer, parse_scorer

from ._helpers import Build, WriteModule

NAMES = ["ag2", "agno", "all", "any", "code", "contains", "exact", "judge", "numeric", "regex",
         "toolcall", "weighted"]


def test_importing_the_package_registers_every_scorer() -> None:
    assert SCORERS.names() == NAMES
    assert SCORERS.kind == "scorer"


@pytest.mark.parametrize(("value", "spec"), [
    ("exact", Spec(name="exact")),
    ({"exact": None}, Spec(name="exact")),
    ({"exact": {"case_sensitive": False}}, Spec(name="exact", args={"case_sensitive": False})),
    ({"regex": "^a"}, Spec(name="regex", args={"pattern": "^a"})),
    ({"contains": ["a", "b"]}, Spec(name="contains", args={"text": ["a", "b"]})),
    ({"code": "m:f"}, Spec(name="code", args={"target": "m:f"})),
    ({"all": ["exact"]}, Spec(name="all", args={"scorers": ["exact"]})),
    ({"weighted": [{"scorer": "exact"}]},
     Spec(name="weighted", args={"scorers": [{"scorer": "exact"}]})),
])
def test_yaml_forms_parse_to_specs(ctx: BuildContext, value: Any, spec: Spec) -> None:
    assert parse_scorer(value, ctx) == spec


def test_parse_and_build_give_a_scorer(ctx: BuildContext) -> None:
    scorer = build_scorer(parse_scorer({"all": ["exact", "toolcall"]}, ctx), ctx)
    assert isinstance(scorer, Scorer)
    assert len(scorer.digest) == 64 and int(scorer.digest, 16) >= 0


def test_unknown_scorer_is_refused_listing_the_known_ones(build: Build) -> None:
    with pytest.raises(BenchError) as err:
        build({"exactly": {}})
    message = str(err.value)
    assert message.startswith("bench.yaml: scorer: unknown scorer 'exactly'; known: ")
    assert message.endswith(", ".join(NAMES))


@pytest.mark.parametrize(("value", "where"), [
    ({"exact": {"case_sensitive": "maybe"}}, "bench.yaml: scorer.exact.case_sensitive: "),
    ({"exact": {"casesensitive": True}}, "bench.yaml: scorer.exact.casesensitive: "),
    ({"toolcall": {"ordered": [1]}}, "bench.yaml: scorer.toolcall.ordered: "),
    ({"regex": {"mode": "match"}}, "bench.yaml: scorer.regex.mode: "),
    ({"exact": "yes"}, "bench.yaml: scorer: scorer 'exact' takes a mapping of arguments"),
    (["exact", "regex"], "bench.yaml: scorer: expected a scorer"),
])
def test_bad_arguments_are_one_line_naming_file_and_field(build: Build, value: Any,
                                                          where: str) -> None:
    with pytest.raises(BenchError) as err:
        build(value)
    assert str(err.value).startswith(where)
    assert "\n" not in str(err.value)


DIFFERENT_OPTIONS: list[tuple[Any, Any]] = [
    ("exact", {"exact": {"case_sensitive": False}}),
    ("exact", {"exact": {"normalize_whitespace": False}}),
    ("exact", {"exact": {"coerce": False}}),
    ({"contains": "a"}, {"contains": "b"}),
    ({"contains": "a"}, {"contains": {"text": "a", "case_sensitive": True}}),
    ({"regex": "a"}, {"regex": {"pattern": "a", "mode": "fullmatch"}}),
    ({"regex": "a"}, {"regex": {"pattern": "a", "flags": ["IGNORECASE"]}}),
    ("numeric", {"numeric": {"abs_tol": 0.1}}),
    ("numeric", {"numeric": {"rel_tol": 0.1}}),
    ("toolcall", {"toolcall": {"allow_additional": False}}),
    ("toolcall", {"toolcall": {"ordered": True}}),
    ("exact", "numeric"),
    ("contains", "regex"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT_OPTIONS)
def test_digest_differs_when_a_verdict_could(build: Build, a: Any, b: Any) -> None:
    assert build(a).digest != build(b).digest


@pytest.mark.parametrize(("a", "b"), [
    ("exact", {"exact": {"case_sensitive": True, "normalize_whitespace": True, "coerce": True}}),
    ("numeric", {"numeric": {"abs_tol": 1e-9, "rel_tol": 0}}),
    ({"regex": "a"}, {"regex": {"pattern": "a", "mode": "search", "flags": []}}),
    ("toolcall", {"toolcall": {"allow_additional": True, "ordered": False}}),
])
def test_digest_ignores_spelling_out_the_defaults(build: Build, a: Any, b: Any) -> None:
    assert build(a).digest == build(b).digest


def test_digest_is_stable_across_rebuilds_and_processes(build: Build, tmp_path: Path,
                                                        write_module: WriteModule) -> None:
    write_module("grader", "def grade(task, output):\n    return True\n")
    value = {"weighted": {"scorers": [
        {"scorer": {"all": ["exact", {"regex": {"pattern": "x", "flags": ["DOTALL"]}}]}},
        {"scorer": {"code": "grader:grade"}, "weight": 2},
        {"scorer": {"contains": ["a", "b"]}}]}}
    here = build(value).digest
    assert build(value).digest == here
    # A fresh interpreter with another hash seed must agree: digests go into saved results.
    script = ("import json, sys; from pathlib import Path; "
              "from forge.scorers import SCORERS; from forge.core.spec import BuildContext; "
              "ctx = BuildContext(base_dir=Path(sys.argv[1])); "
              "print(SCORERS.build(SCORERS.parse(json.loads(sys.argv[2]), ctx), ctx).digest)")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = subprocess.run([sys.executable, "-c", script, str(tmp_path), json.dumps(value)],
                           capture_output=True, text=True, check=True, env=env).stdout.strip()
    assert there == here
