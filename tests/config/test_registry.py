"""Registry files, configs validated against them, fingerprints and ``--set k=v``."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_user_error, run_forge

from forge._util.bounds import MAX_CHOICES, MAX_SETTINGS
from forge.config.registry import (
    BoolSetting,
    Config,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    load_config,
    load_registry,
    parse_assignment,
)
from forge.errors import ConfigError, InputFileError, RegistryError, UserError

# The example of DESIGN.md, "Registry file", verbatim (comments and layout included).
DESIGN_REGISTRY = """\
name: triage
settings:
  max_iterations:  {type: int,   min: 1, max: 8, step: 1, default: 2,
                    description: "retry cap of the answer loop"}
  temperature:     {type: float, min: 0.0, max: 1.5, step: 0.1, default: 0.7}
  search_width:    {type: int,   min: 1, max: 32, default: 4, scale: log}
  retrieval:       {type: enum,  choices: [bm25, tfidf, hybrid], default: bm25}
  query_expansion: {type: bool,  default: false}
hints:             # optional: failure signal -> direction, read by reflection
  iteration_cap_hit: {max_iterations: up}
runtime:           # optional: what the runtime mutator may touch
  allow: [max_iterations, search_width]
  max_moves_per_run: 2
  rules:
    - {on: iteration_cap_hit, target: max_iterations, direction: up}
"""

# The same registry in block style, keys reordered inside each setting, other comments.
DESIGN_REGISTRY_RELAID = """\
# the triage harness
name: triage
settings:
  max_iterations:
    type: int
    default: 2          # two tries
    min: 1
    max: 8
    step: 1
    description: retry cap of the answer loop
  temperature: {default: 0.7, step: 0.1, max: 1.5, min: 0.0, type: float}
  search_width: {scale: log, type: int, min: 1, max: 32, default: 4}
  retrieval:
    type: enum
    choices:
      - bm25
      - tfidf
      - hybrid
    default: bm25
  query_expansion: {default: false, type: bool}
hints:
  iteration_cap_hit:
    max_iterations: up
runtime:
  max_moves_per_run: 2
  allow:
    - max_iterations
    - search_width
  rules:
    - on: iteration_cap_hit
      direction: up
      target: max_iterations
"""

DEFAULTS = {
    "max_iterations": 2,
    "temperature": 0.7,
    "search_width": 4,
    "retrieval": "bm25",
    "query_expansion": False,
}


def write(tmp_path: Path, text: str, name: str = "registry.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def registry_path(tmp_path: Path) -> Path:
    return write(tmp_path, DESIGN_REGISTRY)


@pytest.fixture
def registry(registry_path: Path) -> Registry:
    return load_registry(registry_path)


# --------------------------------------------------------------------------- loading


def test_design_example_registry_loads_with_types_bounds_and_defaults(registry: Registry) -> None:
    assert registry.name == "triage"
    assert list(registry.settings) == list(DEFAULTS)
    s = registry.settings
    assert isinstance(s["max_iterations"], IntSetting)
    assert (s["max_iterations"].min, s["max_iterations"].max, s["max_iterations"].step) == (1, 8, 1)
    assert s["max_iterations"].description == "retry cap of the answer loop"
    assert isinstance(s["temperature"], FloatSetting)
    assert (s["temperature"].min, s["temperature"].max, s["temperature"].step) == (0.0, 1.5, 0.1)
    assert isinstance(s["search_width"], IntSetting)
    assert s["search_width"].scale == "log"
    assert s["max_iterations"].scale == "linear"
    assert isinstance(s["retrieval"], EnumSetting)
    assert s["retrieval"].choices == ["bm25", "tfidf", "hybrid"]
    assert isinstance(s["query_expansion"], BoolSetting)


def test_design_example_hints_and_runtime_are_read(registry: Registry) -> None:
    assert registry.hints == {"iteration_cap_hit": {"max_iterations": "up"}}
    runtime = registry.runtime
    assert runtime is not None
    assert runtime.allow == ["max_iterations", "search_width"]
    assert runtime.max_moves_per_run == 2
    assert len(runtime.rules) == 1
    # ``on:`` is a YAML 1.1 boolean; the rule must still read it as the signal name.
    rule = runtime.rules[0]
    assert (rule.on, rule.target, rule.direction) == ("iteration_cap_hit", "max_iterations", "up")


def test_defaults_are_a_valid_config_with_exact_types(registry: Registry) -> None:
    config = registry.defaults()
    assert config.values == DEFAULTS
    assert type(config.values["max_iterations"]) is int
    assert type(config.values["temperature"]) is float
    assert config.values["query_expansion"] is False
    assert config.registry_digest == registry.digest


def test_hints_and_runtime_are_optional(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, "name: t\nsettings:\n  a: {type: bool, default: true}\n"))
    assert reg.hints == {}
    assert reg.runtime is None


def test_hints_accept_toggle_for_bool_and_a_choice_for_enum(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, DESIGN_REGISTRY.replace(
        "  iteration_cap_hit: {max_iterations: up}\n",
        "  iteration_cap_hit: {max_iterations: up}\n"
        "  no_results: {query_expansion: toggle, retrieval: hybrid, search_width: down}\n")))
    assert reg.hints["no_results"] == {
        "query_expansion": "toggle", "retrieval": "hybrid", "search_width": "down"}


def test_yaml_1_2_scalars_exponent_float_and_yes_string(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, """\
name: t
settings:
  lr: {type: float, min: 1e-6, max: 1e-2, default: 1e-3, scale: log}
  mode: {type: enum, choices: [yes, no, on, off], default: on}
"""))
    lr = reg.settings["lr"]
    assert isinstance(lr, FloatSetting)
    assert (lr.min, lr.max, lr.default) == (1e-6, 1e-2, 1e-3)
    mode = reg.settings["mode"]
    assert isinstance(mode, EnumSetting)
    assert mode.choices == ["yes", "no", "on", "off"]
    assert mode.default == "on"


# --------------------------------------------------------------------------- registry errors

BROKEN_BASE = """\
name: broken
settings:
  retries: {type: int, min: 1, max: 8, default: 2}
  temperature: {type: float, min: 0.0, max: 1.5, step: 0.1, default: 0.7}
  verbose: {type: bool, default: false}
  retrieval: {type: enum, choices: [bm25, tfidf], default: bm25}
"""


def refused_registry(tmp_path: Path, text: str) -> RegistryError:
    path = write(tmp_path, text)
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    err = info.value
    message = str(err)
    assert isinstance(err, UserError)
    assert "\n" not in message, message
    assert message.startswith(str(path)), message
    return err


REGISTRY_ERRORS = [
    # id, old, new, line, fragments
    ("int-default-above-max", "max: 8, default: 2", "max: 8, default: 9", 3,
     ["settings.retries", "default 9", "[1, 8]"]),
    ("int-default-below-min", "max: 8, default: 2", "max: 8, default: 0", 3,
     ["settings.retries", "default 0", "[1, 8]"]),
    ("float-default-above-max", "default: 0.7", "default: 1.6", 4,
     ["settings.temperature", "default 1.6", "1.5]"]),
    ("float-default-below-min", "default: 0.7", "default: -0.1", 4,
     ["settings.temperature", "default -0.1", "[0.0, 1.5]"]),
    ("empty-enum-choices", "choices: [bm25, tfidf], default: bm25", "choices: [], default: bm25",
     6, ["settings.retrieval.choices", "at least 1"]),
    ("duplicate-enum-choice", "choices: [bm25, tfidf]", "choices: [bm25, tfidf, bm25]", 6,
     ["settings.retrieval", "'bm25'", "twice"]),
    ("enum-default-not-a-choice", "tfidf], default: bm25", "tfidf], default: dense", 6,
     ["settings.retrieval", "'dense'", "not one of the choices", "['bm25', 'tfidf']"]),
    ("int-min-above-max", "min: 1, max: 8", "min: 9, max: 8", 3,
     ["settings.retries", "min (9)", "max (8)"]),
    ("float-min-above-max", "min: 0.0, max: 1.5", "min: 2.0, max: 1.5", 4,
     ["settings.temperature", "min (2.0)", "max (1.5)"]),
    ("int-log-scale-min-zero", "min: 1, max: 8, default: 2}",
     "min: 0, max: 8, default: 2, scale: log}", 3,
     ["settings.retries", "log scale", "min > 0"]),
    ("float-log-scale-min-zero", "step: 0.1, default: 0.7}", "default: 0.7, scale: log}", 4,
     ["settings.temperature", "log scale", "min > 0", "0.0"]),
    ("float-log-scale-negative-min", "min: 0.0, max: 1.5, step: 0.1, default: 0.7}",
     "min: -1.0, max: 1.5, default: 0.7, scale: log}", 4,
     ["settings.temperature", "log scale", "min > 0", "-1.0"]),
    ("float-infinite-max", "max: 1.5", "max: .inf", 4, ["settings.temperature", "finite"]),
    ("unknown-type", "type: bool", "type: str", 5,
     ["settings.verbose", "'str'", "'int'", "'float'", "'bool'", "'enum'"]),
    ("unknown-field", "type: bool,", "type: bool, colour: red,", 5,
     ["settings.verbose.colour", "unknown field"]),
    ("unknown-scale", "default: 2}", "default: 2, scale: exp}", 3,
     ["settings.retries.scale", "'linear'", "'log'"]),
    ("zero-step", "max: 8, default", "max: 8, step: 0, default", 3,
     ["settings.retries.step", "greater than 0"]),
    ("missing-default", "verbose: {type: bool, default: false}", "verbose: {type: bool}", 5,
     ["settings.verbose.default", "required field is missing"]),
    ("unknown-top-level-key", "name: broken\n", "name: broken\ncolour: red\n", 2,
     ["colour", "unknown field"]),
    # A default off its step grid: its moves and every snapped value miss each other.
    ("float-default-off-the-step-grid", "max: 1.5, step: 0.1, default: 0.7",
     "max: 1.0, step: 0.7, default: 0.6", 4,
     ["settings.temperature", "default 0.6 is off the step grid", "min 0", "steps of 0.7",
      "expected 0 or 0.7"]),
    ("int-default-off-the-step-grid", "max: 8, default: 2", "max: 9, step: 3, default: 5", 3,
     ["settings.retries", "default 5 is off the step grid", "min 1", "steps of 3",
      "expected 4 or 7"]),
    ("float-default-past-the-last-step", "max: 1.5, step: 0.1, default: 0.7",
     "max: 1.0, step: 0.3, default: 1.0", 4,
     ["settings.temperature", "default 1 is off the step grid", "expected 0.9 ("]),
    ("one-choice-enum", "choices: [bm25, tfidf]", "choices: [bm25]", 6,
     ["settings.retrieval", "one choice, 'bm25'", "expected two or more"]),
]


@pytest.mark.parametrize(("old", "new", "line", "fragments"),
                         [case[1:] for case in REGISTRY_ERRORS],
                         ids=[case[0] for case in REGISTRY_ERRORS])
def test_bad_setting_declaration_is_refused_with_file_line_key_and_bound(
        tmp_path: Path, old: str, new: str, line: int, fragments: list[str]) -> None:
    assert BROKEN_BASE.count(old) == 1
    err = refused_registry(tmp_path, BROKEN_BASE.replace(old, new))
    message = str(err)
    assert err.line == line, message
    assert message.startswith(f"{tmp_path / 'registry.yaml'}:{line}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


REFERENCE_ERRORS = [
    # id, appended text, line, fragments
    ("hint-unknown-setting", "hints:\n  cap_hit: {retires: up}\n", 8,
     ["hints.cap_hit", "unknown setting", "'retires'"]),
    ("hint-bad-direction", "hints:\n  cap_hit: {retries: sideways}\n", 8,
     ["hints.cap_hit", "'sideways'", "'retries'", "['down', 'up']"]),
    ("hint-bool-needs-toggle", "hints:\n  noisy:\n    verbose: up\n", 9,
     ["hints.noisy", "'up'", "'verbose'", "['toggle']"]),
    ("hint-enum-needs-a-choice", "hints:\n  miss: {retrieval: dense}\n", 8,
     ["hints.miss", "'dense'", "'retrieval'", "['bm25', 'tfidf']"]),
    ("runtime-allow-unknown", "runtime:\n  allow: [retries, tempreature]\n", 8,
     ["runtime.allow", "unknown setting", "'tempreature'"]),
    ("runtime-rule-unknown-target",
     "runtime:\n  allow: [retries]\n  rules:\n"
     "    - {on: cap_hit, target: retries, direction: up}\n"
     "    - {on: cap_hit, target: retry, direction: up}\n", 11,
     ["runtime.rules[1]", "unknown setting", "'retry'"]),
    ("runtime-rule-bad-direction",
     "runtime:\n  rules:\n    - {on: cap_hit, target: retries, direction: left}\n", 9,
     ["runtime.rules[0]", "'left'", "'retries'", "['down', 'up']"]),
    ("runtime-rule-missing-target", "runtime:\n  rules:\n    - {on: cap_hit, direction: up}\n",
     9, ["runtime.rules[0].target", "required field is missing"]),
    ("runtime-negative-max-moves", "runtime:\n  max_moves_per_run: -1\n", 8,
     ["runtime.max_moves_per_run", "greater than or equal to 0"]),
]


@pytest.mark.parametrize(("extra", "line", "fragments"),
                         [case[1:] for case in REFERENCE_ERRORS],
                         ids=[case[0] for case in REFERENCE_ERRORS])
def test_bad_hint_or_runtime_entry_is_refused_on_its_line(
        tmp_path: Path, extra: str, line: int, fragments: list[str]) -> None:
    err = refused_registry(tmp_path, BROKEN_BASE + extra)
    message = str(err)
    assert err.line == line, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_setting_named_like_a_type_keeps_its_name_in_the_error(tmp_path: Path) -> None:
    err = refused_registry(tmp_path, """\
name: t
settings:
  int: {type: int, min: 1, max: 8, default: 2}
  float: {type: enum, choices: [a, b], default: c}
""")
    assert err.field == "settings.float"
    assert err.line == 4
    assert "'c'" in str(err)


def test_malformed_yaml_is_refused_with_its_line(tmp_path: Path) -> None:
    err = refused_registry(tmp_path, """\
name: t
settings:
  a: {type: int, min: 1, max: 8, default: 2}
  b: {type: int, min: 1
  c: {type: bool, default: true}
""")
    assert "malformed YAML" in str(err)
    assert err.line == 5


def test_tab_indentation_is_malformed_yaml_with_its_line(tmp_path: Path) -> None:
    err = refused_registry(tmp_path, "name: t\nsettings:\n\ta: {type: bool, default: true}\n")
    assert "malformed YAML" in str(err)
    assert err.line == 3


def test_missing_registry_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "registry.yaml"
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert str(info.value) == f"{path}: file not found"


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"],
                         ids=["empty", "list", "scalar"])
def test_registry_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str) -> None:
    err = refused_registry(tmp_path, text)
    assert "expected a mapping" in str(err)


def test_registry_without_settings_is_refused(tmp_path: Path) -> None:
    err = refused_registry(tmp_path, "name: t\nsettings: {}\n")
    assert err.field == "settings"
    assert err.line == 2


# --------------------------------------------------------------------------- registry digest


def test_digest_ignores_comments_layout_and_key_order(tmp_path: Path, registry: Registry) -> None:
    relaid = load_registry(write(tmp_path, DESIGN_REGISTRY_RELAID, "relaid.yaml"))
    assert relaid == registry
    assert relaid.digest == registry.digest
    assert len(registry.digest) == 64


@pytest.mark.parametrize(("old", "new"), [
    ("min: 1, max: 8", "min: 1, max: 9"),
    ("step: 0.1", "step: 0.05"),
    ("max: 32, default: 4, scale: log", "max: 32, default: 4"),
    ("[bm25, tfidf, hybrid]", "[bm25, tfidf, hybrid, dense]"),
    ("default: false", "default: true"),
    ("{max_iterations: up}", "{max_iterations: down}"),
    ("max_moves_per_run: 2", "max_moves_per_run: 3"),
], ids=["bound", "step", "scale", "choices", "default", "hint", "runtime"])
def test_digest_changes_when_the_declaration_changes(
        tmp_path: Path, registry: Registry, old: str, new: str) -> None:
    assert DESIGN_REGISTRY.count(old) == 1
    changed = load_registry(write(tmp_path, DESIGN_REGISTRY.replace(old, new), "changed.yaml"))
    assert changed.digest != registry.digest


# --------------------------------------------------------------------------- config validation


def refused_config(registry: Registry, values: dict[str, object]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        registry.validate_config(values, file="config.yaml")
    err = info.value
    assert isinstance(err, InputFileError)
    assert isinstance(err, UserError)
    assert "\n" not in str(err)
    assert str(err).startswith("config.yaml: ")
    return err


def test_unknown_key_is_refused_naming_it_and_the_known_settings(registry: Registry) -> None:
    err = refused_config(registry, {**DEFAULTS, "temprature": 0.5})
    assert err.field == "temprature"
    assert "unknown setting" in str(err)
    assert "temperature" in str(err)


def test_missing_key_is_refused_naming_it_and_its_bound(registry: Registry) -> None:
    values = dict(DEFAULTS)
    del values["max_iterations"]
    err = refused_config(registry, values)
    assert err.field == "max_iterations"
    assert "missing" in str(err)
    assert "[1, 8]" in str(err)


@pytest.mark.parametrize(("key", "value", "bound"), [
    ("max_iterations", 2.5, "[1, 8]"),
    ("max_iterations", True, "[1, 8]"),
    ("max_iterations", "3", "[1, 8]"),
    ("query_expansion", "yes", "true or false"),
    ("query_expansion", 1, "true or false"),
    ("temperature", "x", "[0.0, 1.5]"),
    ("temperature", False, "[0.0, 1.5]"),
    ("retrieval", "dense", "['bm25', 'tfidf', 'hybrid']"),
    ("retrieval", None, "['bm25', 'tfidf', 'hybrid']"),
], ids=["int-given-float", "int-given-bool", "int-given-str", "bool-given-str",
        "bool-given-int", "float-given-str", "float-given-bool", "enum-not-a-choice",
        "enum-given-null"])
def test_wrong_type_is_refused_naming_key_and_expectation(
        registry: Registry, key: str, value: object, bound: str) -> None:
    err = refused_config(registry, {**DEFAULTS, key: value})
    assert err.field == key
    assert bound in str(err)
    assert repr(value) in str(err)


@pytest.mark.parametrize(("key", "value", "bound"), [
    ("max_iterations", 9, "[1, 8]"),
    ("max_iterations", 0, "[1, 8]"),
    ("search_width", 64, "[1, 32]"),
    ("temperature", 1.5000001, "1.5]"),
    ("temperature", -0.1, "[0.0, 1.5]"),
    ("temperature", math.inf, "[0.0, 1.5]"),
    ("temperature", math.nan, "[0.0, 1.5]"),
])
def test_out_of_bounds_value_is_refused_naming_key_and_bound(
        registry: Registry, key: str, value: object, bound: str) -> None:
    err = refused_config(registry, {**DEFAULTS, key: value})
    assert err.field == key
    assert bound in str(err)
    assert "outside" in str(err)


def test_values_on_the_bounds_are_accepted(registry: Registry) -> None:
    for values in ({"max_iterations": 1, "temperature": 0.0, "search_width": 1},
                   {"max_iterations": 8, "temperature": 1.5, "search_width": 32}):
        config = registry.validate_config({**DEFAULTS, **values})
        assert config.values == {**DEFAULTS, **values}


def test_non_mapping_config_is_refused(registry: Registry) -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        registry.validate_config([("max_iterations", 2)], file="config.yaml")  # type: ignore[arg-type]


def test_float_setting_accepts_an_int_and_stores_a_float(registry: Registry) -> None:
    config = registry.validate_config({**DEFAULTS, "temperature": 1})
    assert config.values["temperature"] == 1.0
    assert type(config.values["temperature"]) is float
    same = registry.validate_config({**DEFAULTS, "temperature": 1.0})
    assert config.fingerprint == same.fingerprint


def test_enum_of_numbers_keeps_true_and_one_apart(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, """\
name: t
settings:
  k: {type: enum, choices: [1, 2.5, true, fast], default: 1}
"""))
    assert reg.validate_config({"k": 1.0}).values["k"] == 1
    assert reg.validate_config({"k": True}).values["k"] is True
    assert reg.validate_config({"k": 2.5}).values["k"] == 2.5
    assert reg.validate_config({"k": 1}).fingerprint != reg.validate_config({"k": True}).fingerprint
    with pytest.raises(ConfigError):
        reg.validate_config({"k": False})


def test_as_dict_is_a_copy_a_harness_may_mutate(registry: Registry) -> None:
    config = registry.defaults()
    before = config.fingerprint
    copy = config.as_dict()
    copy["max_iterations"] = 99
    assert config.values["max_iterations"] == 2
    assert registry.validate_config(config.values).fingerprint == before


def test_with_values_validates_the_whole_config(registry: Registry) -> None:
    config = registry.with_values(registry.defaults(), {"max_iterations": 5})
    assert config.values == {**DEFAULTS, "max_iterations": 5}
    with pytest.raises(ConfigError) as info:
        registry.with_values(registry.defaults(), {"max_iterations": 50})
    assert str(info.value).startswith("--set: max_iterations: ")
    assert "[1, 8]" in str(info.value)


# --------------------------------------------------------------------------- load_config

CONFIG_FILE = """\
# tuned by hand
max_iterations: 3
temperature: 0.5
search_width: 16
retrieval: hybrid
query_expansion: true
"""


def test_load_config_reads_a_valid_file(tmp_path: Path, registry: Registry) -> None:
    config = load_config(write(tmp_path, CONFIG_FILE, "config.yaml"), registry)
    assert config.values == {"max_iterations": 3, "temperature": 0.5, "search_width": 16,
                             "retrieval": "hybrid", "query_expansion": True}
    assert config.registry_digest == registry.digest


@pytest.mark.parametrize(("old", "new", "line", "fragments"), [
    ("search_width: 16", "search_width: 64", 4, ["search_width", "[1, 32]"]),
    ("max_iterations: 3", "max_iterations: 2.5", 2, ["max_iterations", "[1, 8]"]),
    ("query_expansion: true", "query_expansion: yes", 6, ["query_expansion", "'yes'"]),
    ("temperature: 0.5", "temprature: 0.5", 3, ["temprature", "unknown setting"]),
    ("retrieval: hybrid", "retrieval: [hybrid]", 5, ["retrieval", "bm25"]),
], ids=["out-of-bounds", "wrong-type", "yes-is-not-a-bool", "unknown-key", "list-value"])
def test_load_config_error_names_file_line_key_and_bound(
        tmp_path: Path, registry: Registry, old: str, new: str, line: int,
        fragments: list[str]) -> None:
    path = write(tmp_path, CONFIG_FILE.replace(old, new), "config.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path, registry)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_load_config_missing_key_names_the_file(tmp_path: Path, registry: Registry) -> None:
    path = write(tmp_path, CONFIG_FILE.replace("retrieval: hybrid\n", ""), "config.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path, registry)
    assert str(info.value).startswith(f"{path}: retrieval: missing")


@pytest.mark.parametrize(("text", "expected"), [
    ("max_iterations: [3\n", "malformed YAML"),
    ("- 3\n", "expected a mapping"),
    ("", "expected a mapping"),
])
def test_load_config_refuses_malformed_or_non_mapping_files(
        tmp_path: Path, registry: Registry, text: str, expected: str) -> None:
    path = write(tmp_path, text, "config.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path, registry)
    assert str(info.value).startswith(str(path))
    assert expected in str(info.value)


def test_load_config_missing_file(tmp_path: Path, registry: Registry) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "absent.yaml", registry)


# --------------------------------------------------------------------------- fingerprints


def test_fingerprint_ignores_key_order(registry: Registry) -> None:
    forward = registry.validate_config(DEFAULTS)
    backward = registry.validate_config(dict(reversed(DEFAULTS.items())))
    assert forward.fingerprint == backward.fingerprint
    raw = Config(values=dict(reversed(DEFAULTS.items())), registry_digest=registry.digest)
    assert raw.fingerprint == forward.fingerprint
    assert len(forward.fingerprint) == 64


@pytest.mark.parametrize(("key", "value"), [
    ("max_iterations", 3), ("temperature", 0.8), ("search_width", 8),
    ("retrieval", "tfidf"), ("query_expansion", True),
])
def test_fingerprint_changes_with_any_value(registry: Registry, key: str, value: object) -> None:
    base = registry.validate_config(DEFAULTS)
    other = registry.validate_config({**DEFAULTS, key: value})
    assert other.fingerprint != base.fingerprint


def test_fingerprint_is_tied_to_the_registry(tmp_path: Path, registry: Registry) -> None:
    wider = load_registry(write(tmp_path, DESIGN_REGISTRY.replace("max: 8", "max: 10"),
                                "wider.yaml"))
    assert wider.digest != registry.digest
    a = registry.validate_config(DEFAULTS)
    b = wider.validate_config(DEFAULTS)
    assert a.values == b.values
    assert a.fingerprint != b.fingerprint


def test_fingerprint_is_stable_across_loads(tmp_path: Path, registry: Registry) -> None:
    again = load_registry(write(tmp_path, DESIGN_REGISTRY, "again.yaml"))
    assert again.defaults().fingerprint == registry.defaults().fingerprint


# --------------------------------------------------------------------------- --set k=v


@pytest.mark.parametrize(("text", "key", "value", "kind"), [
    ("k=3", "k", 3, int),
    ("k=-3", "k", -3, int),
    ("k=true", "k", True, bool),
    ("k=false", "k", False, bool),
    ("k=bm25", "k", "bm25", str),
    ("k=0.5", "k", 0.5, float),
    ("k=1e-3", "k", 0.001, float),
    ("k=yes", "k", "yes", str),
    ("k=on", "k", "on", str),
    ("k='3'", "k", "3", str),
    ("k=a=b", "k", "a=b", str),
    (" k =3", "k", 3, int),
    ("k=", "k", "", str),
])
def test_parse_assignment_reads_the_value_as_a_yaml_scalar(
        text: str, key: str, value: object, kind: type) -> None:
    parsed_key, parsed = parse_assignment(text)
    assert parsed_key == key
    assert parsed == value
    assert type(parsed) is kind


@pytest.mark.parametrize("text", ["noequals", "=3", " =3"])
def test_parse_assignment_refuses_text_without_a_key(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_assignment(text)
    assert isinstance(info.value, UserError)
    assert "key=value" in str(info.value)
    assert repr(text) in str(info.value)


def test_parsed_assignment_feeds_with_values(registry: Registry) -> None:
    updates = dict(parse_assignment(t) for t in ["temperature=1", "retrieval=tfidf",
                                                 "query_expansion=true"])
    config = registry.with_values(registry.defaults(), updates)
    assert config.values == {**DEFAULTS, "temperature": 1.0, "retrieval": "tfidf",
                             "query_expansion": True}


# -- bounds ---------------------------------------------------------------------------------


def test_the_most_enum_choices_validate_in_linear_time() -> None:
    # Each choice was compared with every one before it: 10,000 choices took minutes and
    # 200,000 hours. Now a dict of value keys: well under a second on any machine.
    choices = [f"c{i}" for i in range(MAX_CHOICES - 2)] + [1, 1.5]
    started = time.perf_counter()
    setting = EnumSetting.model_validate({"type": "enum", "choices": choices, "default": "c0"})
    for value in ("c9000", 1, 1.0, 1.5):
        setting.check(value)
    assert time.perf_counter() - started < 5
    assert setting.check(1.0) == 1 and type(setting.check(1.0)) is int  # the choice itself
    with pytest.raises(ValueError, match="expected one of"):
        setting.check(True)  # True is not 1
    with pytest.raises(ValueError, match=r"\.\.\. \(10000 in all\)\], got \['x'\]"):
        setting.check(["x"])  # unhashable, and the message lists 10 choices, not 10,000


def test_more_enum_choices_than_the_bound_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    choices = ", ".join(f"c{i}" for i in range(MAX_CHOICES + 1))
    path.write_text(f"name: r\nsettings:\n  e: {{type: enum, choices: [{choices}], "
                    "default: c0}\n", encoding="utf-8")
    with pytest.raises(RegistryError, match=f"settings.e.choices: at most {MAX_CHOICES:,} "
                                            rf"item\(s\), got {MAX_CHOICES + 1:,}"):
        load_registry(path)


def test_a_registry_of_more_settings_than_the_bound_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A search keys, ranks and models every setting each step: past the bound it takes
    # minutes a step; 10,000 settings had no first candidate in 600 s before the fix.
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nsettings:\n" + "".join(
        f"  s{i}: {{type: bool, default: false}}\n" for i in range(MAX_SETTINGS + 1)),
        encoding="utf-8")
    assert_user_error(*run_forge(capsys, "registry", "show", path),
                      f"{path}:2: settings: at most {MAX_SETTINGS:,} item(s), got "
                      f"{MAX_SETTINGS + 1:,}")
    at_bound = {f"s{i}": {"type": "bool", "default": False} for i in range(MAX_SETTINGS)}
    assert len(Registry.model_validate({"name": "r", "settings": at_bound}).settings) == \
        MAX_SETTINGS


def one_setting(tmp_path: Path, name: str, kind: str, values: dict[str, str]) -> Path:
    """A registry file of one setting ``name`` of type ``kind``, on line 3."""
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nsettings:\n  {name}: {{type: {kind}, "
                    + ", ".join(f"{k}: {v}" for k, v in values.items()) + "}\n",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("field, text", [
    ("max", ".inf"), ("min", "-.inf"), ("step", ".inf"), ("default", ".nan"),
    ("max", "1" + "0" * 1200)])
def test_a_float_bound_that_is_not_finite_is_refused(tmp_path: Path, field: str,
                                                     text: str) -> None:
    values = {"min": "0.0", "max": "1.0", "step": "0.1", "default": "0.5", field: text}
    with pytest.raises(RegistryError) as info:
        load_registry(one_setting(tmp_path, "t", "float", values))
    assert info.value.line == 3 and ("finite" in str(info.value) or "digits" in str(info.value))


@pytest.mark.parametrize("field, text", [("max", str(2 ** 53 + 1)), ("min", str(-(2 ** 53) - 1)),
                                         ("max", "1" + "0" * 300)])
def test_an_int_bound_beyond_what_floats_count_exactly_is_refused(
        tmp_path: Path, field: str, text: str) -> None:
    # Within it, a proposer's model (optuna's, in floats) works; past it, it raised
    # OverflowError on every step and the search went on without proposals.
    values = {"min": "1", "max": "10", "default": "1", field: text}
    with pytest.raises(RegistryError) as info:
        load_registry(one_setting(tmp_path, "n", "int", values))
    bound = ("less than or equal to 9007199254740992" if field == "max"
             else "greater than or equal to -9007199254740992")
    assert info.value.line == 3 and f"settings.n.{field}: must be {bound}" in str(info.value)
    values[field] = str(2 ** 53 if field == "max" else -(2 ** 53))
    # The bound itself is accepted.
    assert load_registry(one_setting(tmp_path, "n", "int", values)).settings["n"].max >= 10


def test_a_float_range_wider_than_the_largest_float_is_refused(tmp_path: Path) -> None:
    # Each bound finite, their difference not: a proposer's model (optuna's) refused the
    # range on every step, and a tenth of it as the step was infinite.
    values = {"min": "-1.7e308", "max": "1.7e308", "default": "0.0"}
    with pytest.raises(RegistryError) as info:
        load_registry(one_setting(tmp_path, "w", "float", values))
    assert info.value.line == 3 and "settings.w: max - min must be a finite number" in str(
        info.value)
    widest = one_setting(tmp_path, "w", "float", {**values, "min": "0.0"})
    assert load_registry(widest).settings["w"].max == 1.7e308


@pytest.mark.parametrize("choice", [".inf", ".nan", '"\\ud800"'])
def test_an_enum_choice_that_is_not_a_finite_value_or_text_is_refused(
        tmp_path: Path, choice: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nsettings:\n  e: {{type: enum, choices: [a, {choice}], "
                    "default: a}\n", encoding="utf-8")
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert info.value.line == 3 and info.value.field is not None
    assert info.value.field.startswith("settings.e.choices")


def test_a_config_value_is_shown_bounded_in_its_error(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nsettings:\n  n: {type: int, min: 1, max: 3, default: 1}\n",
                    encoding="utf-8")
    registry = load_registry(path)
    laughs: list[object] = ["lol"] * 9
    for _ in range(9):
        laughs = [laughs] * 9  # 9^10 strings if written out
    cycle: list[object] = []
    cycle.append(cycle)
    for value in (laughs, cycle, "x" * 10**7, 10**4000):
        with pytest.raises(ConfigError) as info:
            registry.validate_config({"n": value})
        assert len(str(info.value)) < 200


@pytest.mark.parametrize("setting", [
    # On the grid to within float rounding: 0.1 * 7 is 0.7000000000000001.
    {"type": "float", "min": 0.0, "max": 1.5, "step": 0.1, "default": 0.7},
    {"type": "float", "min": -0.3, "max": 2.0, "step": 0.1, "default": 1.9},
    {"type": "float", "min": 1000.0, "max": 2000.0, "step": 0.001, "default": 1234.567},
    {"type": "int", "min": -7, "max": 20, "step": 3, "default": 8},
    # No step grid: a log scale halves and doubles, a float without a step moves by a
    # tenth of its range; each from its default, wherever that is.
    {"type": "int", "min": 1, "max": 64, "step": 3, "default": 5, "scale": "log"},
    {"type": "float", "min": 0.001, "max": 1.0, "step": 0.7, "default": 0.6, "scale": "log"},
    {"type": "float", "min": 0.0, "max": 1.0, "default": 0.63},
    # A step finer than floats resolve at these bounds: every float is on its grid.
    {"type": "float", "min": 0.0, "max": 1e300, "step": 1e-300, "default": 3.3e299},
])
def test_a_default_on_its_grid_or_without_one_is_accepted(setting: dict[str, Any]) -> None:
    registry = Registry.model_validate({"name": "r", "settings": {"s": setting}})
    assert registry.defaults().values["s"] == setting["default"]


def test_an_off_grid_default_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = one_setting(tmp_path, "temperature", "float",
                       {"min": "0", "max": "1", "step": "0.7", "default": "0.6"})
    assert_user_error(*run_forge(capsys, "registry", "show", path),
                      f"{path}:3: settings.temperature: default 0.6 is off the step grid")
