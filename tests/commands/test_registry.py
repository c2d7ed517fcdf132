"""``forge registry show``: the settings as a table and as JSON; a bad registry is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ARITH, assert_user_error
from conftest import run_forge as forge
from conftest import run_forge_json as forge_json

REGISTRY = str(ARITH / "registry.yaml")
SETTINGS = ("effort", "temperature", "width", "mode", "verify")


def test_registry_show_prints_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = forge(capsys, "registry", "show", REGISTRY)
    assert code == 0, err
    assert "arith" in out
    for name in SETTINGS:
        assert name in out
    assert "[1, 5]" in out
    assert "slip" in out  # the hint


def test_registry_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = forge_json(capsys, "registry", "show", REGISTRY, "--json")
    assert tuple(data["settings"]) == SETTINGS
    assert data["settings"]["effort"]["max"] == 5
    assert len(data["digest"]) == 64


def test_registry_show_refuses_a_bad_registry(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text("name: r\nsettings:\n  x: {type: int, min: 5, max: 1, default: 3}\n",
                   encoding="utf-8")
    assert_user_error(*forge(capsys, "registry", "show", bad), str(bad))
