"""``forge schema``: one JSON Schema per file kind, printed alone, ready for an editor."""

from __future__ import annotations

import pytest
from conftest import ARITH, assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json

from forge.bench.schemas import bench_schema, config_schema, registry_schema
from forge.config.registry import load_registry


def test_schema_prints_the_bench_schema_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    schema = forge_json(capsys, "schema")
    # One schema document, not a bundle: an editor can be pointed at it as it is.
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:forge:schema:bench"
    assert {"harness", "splits", "rollouts", "scorer"} <= set(schema["properties"])
    assert schema == bench_schema()
    assert forge_json(capsys, "schema", "bench") == schema


def test_schema_of_registry_and_config_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert forge_json(capsys, "schema", "registry") == registry_schema()
    registry = ARITH / "registry.yaml"
    config = forge_json(capsys, "schema", "config", "--registry", registry)
    assert config == config_schema(load_registry(registry))
    assert set(config["required"]) == {"effort", "temperature", "width", "mode", "verify"}


def test_schema_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    assert_user_error(*forge(capsys, "schema", "nope"), "unknown kind 'nope'",
                      "bench, registry, config")
    assert_user_error(*forge(capsys, "schema", "config"), "--registry", "give --registry")
    assert_user_error(*forge(capsys, "schema", "bench", "--registry", ARITH / "registry.yaml"),
                      "--registry", "only a config schema")
    assert_user_error(*forge(capsys, "schema", "config", "--registry", ARITH / "missing.yaml"),
                      "missing.yaml", "file not found")
