"""``forge schema``: the JSON Schemas of the registry and bench files."""

from __future__ import annotations

import pytest
from conftest import assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json


def test_schema_prints_registry_and_bench_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    schemas = forge_json(capsys, "schema")
    assert set(schemas) == {"registry", "bench"}
    assert "settings" in schemas["registry"]["properties"]
    assert {"harness", "splits", "rollouts", "scorer"} <= set(schemas["bench"]["properties"])
    assert forge_json(capsys, "schema", "bench") == schemas["bench"]
    assert_user_error(*forge(capsys, "schema", "nope"), "nope")
