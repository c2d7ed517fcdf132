"""The YAML forge writes (forge.config.yaml_file): a promoted config reads back as the same
values, of the same types, with every YAML reader."""

from __future__ import annotations

import yaml

from forge._util.files import parse_yaml
from forge.config.registry import Registry
from forge.config.yaml_file import render_config


def test_render_config_round_trips_through_every_yaml_reader() -> None:
    registry = Registry.model_validate({"name": "tricky", "settings": {
        "on": {"type": "enum", "choices": ["1e3", "on", "true", "a: b", 'say "hi"', "ünï\n",
                                           "null", ""], "default": "1e3"},
        "rate": {"type": "float", "min": 0.0, "max": 1e30, "default": 1e-05},
        "big": {"type": "float", "min": 0.0, "max": 1e30, "default": 1e20},
        "n": {"type": "int", "min": -5, "max": 5, "default": -3},
        "flag": {"type": "bool", "default": True},
        "2": {"type": "enum", "choices": [1, 1.5, True], "default": 1.5}}})
    choices = registry.settings["on"].choices  # type: ignore[union-attr]
    for choice in choices:
        values = {**registry.defaults().values, "on": choice}
        text = render_config(values, registry, header=["a header\nwith a newline"])
        for loaded in (parse_yaml(text), yaml.safe_load(text)):  # YAML 1.2 and 1.1
            assert loaded == values
            assert [type(v) for v in loaded.values()] == [type(v) for v in values.values()]
        assert registry.validate_config(parse_yaml(text)).values == values
        assert text.startswith("# a header with a newline\n")
