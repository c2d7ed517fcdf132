"""The JSON Schemas of bench, registry and config files: valid schemas, true to forge's
loader on every shipped file, and as strict as it where a schema can be."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from forge._util.files import load_yaml
from forge.bench.schemas import DIALECT, bench_schema, config_schema, registry_schema
from forge.config.registry import load_registry
from forge.errors import BenchError
from forge.executors import EXECUTORS
from forge.harness import HARNESSES
from forge.scorers import SCORERS

REPO = Path(__file__).resolve().parents[2]
BENCHES = sorted(p for pattern in ("benches/*/bench.yaml", "tests/benches/*/bench.yaml",
                                   "benchmarks/benches/*/bench.yaml",
                                   "tests/data/**/bench.yaml")
                 for p in REPO.glob(pattern))


def _data(path: Path) -> Any:
    # Read as forge reads it (its YAML resolver), which is what the schema describes.
    return load_yaml(path, BenchError).data


def _registries() -> list[Path]:
    found = {p.resolve() for p in REPO.glob("registry/*.yaml")
             if not p.name.endswith(".defaults.yaml")}
    found |= {(b.parent / _data(b)["registry"]).resolve() for b in BENCHES}
    return sorted(found)


def _configs() -> list[tuple[Path, Path]]:
    """(registry, defaults file) of every shipped bench that has a defaults file."""
    pairs = set()
    for b in BENCHES:
        data = _data(b)
        if data.get("defaults"):
            pairs.add(((b.parent / data["registry"]).resolve(),
                       (b.parent / data["defaults"]).resolve()))
    return sorted(pairs)


def _errors(schema: dict[str, Any], instance: Any) -> list[jsonschema.ValidationError]:
    return list(jsonschema.Draft202012Validator(schema).iter_errors(instance))


def _where(errors: list[jsonschema.ValidationError]) -> set[str]:
    """Where the errors are, as a/b/0 paths (a oneOf's errors are where the oneOf is)."""
    return {"/".join(map(str, e.absolute_path)) for e in errors}


def test_there_are_shipped_files_to_check() -> None:
    assert len(BENCHES) >= 6 and len(_registries()) >= 6 and len(_configs()) >= 5


@pytest.mark.parametrize("schema", [bench_schema(), registry_schema(),
                                    config_schema(load_registry(REPO / "registry/triage.yaml"))],
                         ids=["bench", "registry", "config"])
def test_each_schema_is_a_complete_2020_12_document(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DIALECT
    assert schema["$id"].startswith("urn:forge:schema:")
    assert schema["title"] and schema["description"]


@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_bench_file_is_valid(bench: Path) -> None:
    assert _errors(bench_schema(), _data(bench)) == []


@pytest.mark.parametrize("registry", _registries(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_registry_is_valid(registry: Path) -> None:
    assert _errors(registry_schema(), _data(registry)) == []


@pytest.mark.parametrize(("registry", "config"), _configs(),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_defaults_file_is_valid_for_its_registry(registry: Path,
                                                               config: Path) -> None:
    assert _errors(config_schema(load_registry(registry)), _data(config)) == []


def test_harness_scorer_and_executor_kinds_are_the_registered_ones() -> None:
    defs = bench_schema()["$defs"]
    for name, registry in (("Harness", HARNESSES), ("Scorer", SCORERS)):
        keyed = {next(iter(form["properties"])) for form in defs[name]["oneOf"]
                 if form["type"] == "object"}
        assert keyed == set(registry.names())
    executor = bench_schema()["properties"]["executor"]["anyOf"][0]
    assert executor["enum"] == EXECUTORS.names()


ARITH = REPO / "tests/benches/arith/bench.yaml"


def _bench_variants() -> Iterator[tuple[str, dict[str, Any], str]]:
    """(what, a broken arith bench, where the schema must point)."""
    base = _data(ARITH)

    def variant(**changes: Any) -> dict[str, Any]:
        return {**copy.deepcopy(base), **changes}

    yield "unknown harness kind", variant(harness={"pythn": "harness:run"}), "harness"
    yield "unknown harness argument", variant(harness={"python": {"targt": "h:run"}}), "harness"
    yield "harness needing arguments as a bare name", variant(harness="python"), "harness"
    yield "unknown scorer kind", variant(scorer="exakt"), "scorer"
    yield "unknown child scorer", variant(scorer={"all": [{"exakt": None}]}), "scorer"
    yield "unknown scorer argument", variant(scorer={"numeric": {"abs_toll": 1}}), "scorer"
    yield "unknown field", variant(rolouts={"k": 2}), ""
    yield "k below 1", variant(rollouts={"k": 0}), "rollouts/k"
    yield "unknown executor", variant(executor="gpu"), "executor"
    yield "metric direction", variant(metrics={"cost": {"direction": "down"}}), \
        "metrics/cost/direction"
    yield "no dev split", variant(splits={}), "splits"


@pytest.mark.parametrize(("what", "bench", "where"), list(_bench_variants()),
                         ids=[v[0] for v in _bench_variants()])
def test_a_broken_bench_is_refused_where_it_is_broken(what: str, bench: dict[str, Any],
                                                      where: str) -> None:
    errors = _errors(bench_schema(), bench)
    assert errors, what
    assert where in _where(errors)


def test_a_bad_registry_is_refused_where_it_is_broken() -> None:
    good = _data(REPO / "tests/benches/arith/registry.yaml")
    for setting, where in ((dict(good["settings"]["effort"], type="integer"), "settings/effort"),
                           ({**good["settings"]["effort"], "stp": 1}, "settings/effort"),
                           ({"type": "enum", "default": "a"}, "settings/effort")):
        bad = {**good, "settings": {**good["settings"], "effort": setting}}
        errors = _errors(registry_schema(), bad)
        assert errors and where in _where(errors)


def test_a_config_schema_holds_the_registry_bounds_and_descriptions() -> None:
    registry = load_registry(REPO / "tests/benches/arith/registry.yaml")
    schema = config_schema(registry)
    props = schema["properties"]
    assert set(schema["required"]) == set(props) == set(registry.settings)
    assert props["effort"]["minimum"] == 1 and props["effort"]["maximum"] == 5
    assert props["effort"]["description"].startswith(
        "how many times the answer is recomputed and voted on (int [1, 5]")
    assert props["mode"]["enum"] == ["fast", "careful"]
    assert registry.name in schema["$id"] and registry.digest[:16] in schema["$id"]
    good = _data(REPO / "tests/benches/arith/defaults.yaml")
    assert _errors(schema, good) == []
    for change, where in (({"effort": 6}, "effort"), ({"effort": True}, "effort"),
                          ({"verify": 1}, "verify"), ({"mode": "slow"}, "mode"),
                          ({"temperature": 1.5}, "temperature"), ({"effrt": 1}, "")):
        errors = _errors(schema, {**good, **change})
        assert errors and where in _where(errors), change
    missing = {k: v for k, v in good.items() if k != "width"}
    assert _errors(schema, missing)


def _properties(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of every object schema under ``schema``, with where it is."""
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            yield f"{path}.{name}", prop
        for key, value in schema.items():
            yield from _properties(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _properties(value, f"{path}[{i}]")


def test_every_field_of_the_file_formats_is_described() -> None:
    # Plugin arguments are described by their own models, which forge does not write
    # here; every field of the bench and registry formats themselves has a description.
    bench = bench_schema()
    own = {k: v for k, v in bench["$defs"].items()
           if not k.startswith(("harness_", "scorer_")) and k not in {"Harness", "Scorer"}}
    undescribed = [where for doc in ({"properties": bench["properties"]}, own,
                                     registry_schema())
                   for where, prop in _properties(doc) if "description" not in prop]
    assert undescribed == []
