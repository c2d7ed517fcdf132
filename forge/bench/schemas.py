"""JSON Schemas of forge's input files, for editors: bench, registry, and config files.

One schema per file kind, each a complete JSON Schema (draft 2020-12) with ``$schema``,
``$id``, a title and a description on every field, so an editor (VS Code's YAML
extension, any ``yaml-language-server`` client) can complete, explain and check a file
as it is typed:

``bench``
    A bench file. ``harness`` and ``scorer`` accept exactly the registered kinds
    (``{python: "harness:run"}``, ``exact``, ``{all: [...]}``), each with the schema of
    its own arguments; composite scorers nest the scorer schema again.
``registry``
    A setting registry.
``config``
    A config or defaults file *of one registry*: one property per setting, its type
    and bounds, its default, and the registry's ``description`` of it; every setting
    required and no other key allowed, as :meth:`Registry.validate_config` checks.

The schemas are made from forge's own models and plugin registries when asked for, so
they cannot fall behind the loader; where forge is laxer than a schema can say (a
string where a number is expected, which pydantic converts), the schema is the
stricter of the two. The loader stays the authority: a file the schema accepts may
still be refused for what a schema cannot see (a split file that does not exist, a
task id used twice).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from forge._version import __version__
from forge.bench.loader import (
    BenchFile,
    BudgetSettings,
    GateSettings,
    MetricSpec,
    SearchSettings,
)
from forge.config.registry import (
    BoolSetting,
    EnumSetting,
    FloatSetting,
    IntSetting,
    Registry,
    RuntimeRule,
    RuntimeSection,
)
from forge.core.spec import PluginRegistry
from forge.executors import EXECUTORS, ExecutorSettings
from forge.harness import HARNESSES
from forge.scorers import SCORERS

__all__ = ["DIALECT", "KINDS", "bench_schema", "config_schema", "registry_schema"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: The file kinds ``forge schema`` knows, in the order its help lists them.
KINDS = ("bench", "registry", "config")

# Field descriptions for the models whose fields carry none of their own (a
# ``Field(description=...)`` in the model wins over these). A field without either is
# caught by the schema tests.
_FIELDS: dict[type[BaseModel], dict[str, str]] = {
    BenchFile: {
        "name": "the bench's name; saved results and journals carry it",
        "description": "one line on what the harness is",
        "harness": "what runs one attempt: a registered harness kind and its arguments",
        "registry": "the setting registry (YAML), relative to this file",
        "defaults": "the default config (YAML), relative to this file; without it, the "
                    "registry's defaults",
        "splits": "split name -> task file (JSONL), relative to this file; dev is required",
        "rollouts": "how each config is evaluated: attempts per task, concurrency, timeout",
        "scorer": "how an attempt's output is judged: a registered scorer kind and its "
                  "arguments",
        "metrics": "auxiliary metrics gated against regression: name -> direction and "
                   "allowed increase",
        "gates": "the promotion gates' levels and margins",
        "search": "when the search stops",
        "executor": "where attempts run: a name (local, process, ray) or {name, workers, "
                    "ray_address}",
    },
    MetricSpec: {"direction": "which way is better: lower or higher"},
    GateSettings: {
        "alpha": "error level of the dev, val and auxiliary tests (0 < alpha < 1)",
        "min_effect": "smallest dev improvement worth promoting",
        "val_margin": "how much worse than the incumbent val may be (non-inferiority margin)",
        "task_floors": "tag -> lowest pass rate any task with that tag may have (0..1)",
    },
    BudgetSettings: {
        "rollouts": "stop once this many rollouts are spent",
        "cost": "stop once the attempts' cost adds up to this",
        "wall_time_s": "stop after this many seconds",
    },
    SearchSettings: {
        "max_steps": "stop after this many steps",
        "patience": "stop after this many steps in a row without a promotion",
        "budget": "stop when a budget is spent (rollouts, cost, wall time)",
    },
    ExecutorSettings: {"name": "the executor: local, process or ray"},
    Registry: {
        "name": "the registry's name (the harness it configures)",
        "settings": "setting name -> its type, bounds and default",
        "hints": "failure signal -> {setting: direction}, read by the reflect proposer",
        "runtime": "what the runtime mutator may change during a live run",
    },
    IntSetting: {
        "type": "an integer setting",
        "min": "smallest allowed value", "max": "largest allowed value",
        "step": "the step of a move (linear scale)",
        "default": "the value when no config says otherwise",
        "scale": "linear (moves add ±step) or log (moves double or halve)",
        "description": "what the setting does, shown in reviews and editors",
    },
    FloatSetting: {
        "type": "a real-valued setting",
        "min": "smallest allowed value", "max": "largest allowed value",
        "step": "the step of a move (linear scale; default a tenth of the range)",
        "default": "the value when no config says otherwise",
        "scale": "linear (moves add ±step) or log (moves double or halve)",
        "description": "what the setting does, shown in reviews and editors",
    },
    BoolSetting: {
        "type": "an on/off setting",
        "default": "the value when no config says otherwise",
        "description": "what the setting does, shown in reviews and editors",
    },
    EnumSetting: {
        "type": "a setting with a fixed list of values",
        "choices": "the allowed values",
        "default": "the value when no config says otherwise (one of the choices)",
        "description": "what the setting does, shown in reviews and editors",
    },
    RuntimeSection: {
        "allow": "the settings the runtime mutator may change",
        "max_moves_per_run": "most moves one run may make",
        "rules": "which failure signal answers with which move",
    },
    RuntimeRule: {
        "on": "the failure signal",
        "target": "the setting to move",
        "direction": "up, down, toggle, or an enum choice to switch to",
    },
}

# One line per plugin for an editor's hover; a plugin not listed shows its class's
# first docstring line.
_PLUGINS: dict[str, dict[str, str]] = {
    "harness": {
        "python": "a Python function module:function, called once per attempt",
        "command": "a program per attempt (or long-lived workers), JSON over stdin/stdout",
        "http": "a stateless HTTP service, one POST per attempt",
        "openai": "a tool-using agent loop over an OpenAI-compatible endpoint",
    },
    "scorer": {
        "exact": "passes when the output equals the task's expected answer",
        "numeric": "passes when the output is within a tolerance of the expected number",
        "regex": "passes when a pattern matches the output",
        "contains": "passes when the output contains the given text",
        "code": "a Python function module:function that scores the attempt",
        "toolcall": "passes when every expected tool was called cleanly",
        "judge": "a model grades the output against a rubric",
        "all": "passes when every child scorer passes",
        "any": "passes when some child scorer passes",
        "weighted": "the weighted mean of the child scorers' values against a threshold",
    },
}


def _document(kind: str, title: str, description: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DIALECT, "$id": f"urn:forge:schema:{kind}", "title": title,
            "description": f"{description} (forge {__version__})", **body}


def _describe(schema: dict[str, Any], models: Mapping[type[BaseModel], dict[str, str]]) -> None:
    """Fill in missing field descriptions of the models' definitions in ``schema``."""
    defs = schema.get("$defs", {})
    for model, fields in models.items():
        target = schema if schema.get("title") == model.__name__ else defs.get(model.__name__)
        if target is None:
            continue
        for name, text in fields.items():
            prop = target.get("properties", {}).get(name)
            if prop is not None:
                prop.setdefault("description", text)


def _plugin_schemas(registry: PluginRegistry[Any], ref: str,
                    defs: dict[str, Any]) -> dict[str, Any]:
    """A plugin spec as YAML writes it: a bare name, or ``{name: arguments}`` (arguments
    may be the plugin's shorthand value, or null when none is required)."""
    bare: list[str] = []
    forms: list[dict[str, Any]] = []
    for name in registry.names():
        plugin = registry.get(name)
        assert plugin is not None  # a name registry.names() gave
        shorthand = registry.shorthand(name)
        prefix = f"{registry.kind}_{name}_"
        args = plugin.options_model.model_json_schema(
            ref_template="#/$defs/" + prefix + "{model}")
        for def_name, definition in args.pop("$defs", {}).items():
            defs[prefix + def_name] = definition
        if registry.kind == "scorer":
            _nest_scorers(args, defs, prefix, ref)
        accepted = [args]
        if shorthand is not None:
            accepted.append(args["properties"][shorthand])
        if not args.get("required"):
            accepted.append({"type": "null"})
            bare.append(name)
        about = _PLUGINS.get(registry.kind, {}).get(name) or _first_line(plugin)
        forms.append({"type": "object", "description": about,
                      "properties": {name: {"description": about, "anyOf": accepted}},
                      "required": [name], "additionalProperties": False})
    names = ", ".join(registry.names())
    if bare:
        forms.insert(0, {"type": "string", "enum": bare,
                         "description": f"a {registry.kind} that needs no arguments"})
    return {"description": f"a registered {registry.kind}: one of {names}, as 'name' or "
                           "{name: arguments}", "oneOf": forms}


def _nest_scorers(args: dict[str, Any], defs: dict[str, Any], prefix: str, ref: str) -> None:
    # The composites take scorers, typed Any in their models: point them back at the
    # scorer schema, so a child is checked as strictly as the top-level scorer.
    props = args.get("properties", {})
    if props.get("scorers", {}).get("items") == {}:
        props["scorers"]["items"] = {"$ref": ref}
    for definition in (d for n, d in defs.items() if n.startswith(prefix)):
        child = definition.get("properties", {}).get("scorer")
        if child is not None and set(child) <= {"title"}:
            child["$ref"] = ref
            child.setdefault("description", "the child scorer")


def _first_line(cls: type) -> str:
    return (cls.__doc__ or cls.__name__).strip().splitlines()[0]


def bench_schema() -> dict[str, Any]:
    """The JSON Schema of a bench file."""
    body = BenchFile.model_json_schema()
    _describe(body, _FIELDS)
    defs = body.setdefault("$defs", {})
    defs["Harness"] = _plugin_schemas(HARNESSES, "#/$defs/Harness", defs)
    defs["Scorer"] = _plugin_schemas(SCORERS, "#/$defs/Scorer", defs)
    props = body["properties"]
    props["harness"] = {"$ref": "#/$defs/Harness",
                        "description": _FIELDS[BenchFile]["harness"]}
    props["scorer"] = {"$ref": "#/$defs/Scorer", "default": "exact",
                       "description": _FIELDS[BenchFile]["scorer"]}
    # `executor: process` is the short form of `executor: {name: process}`.
    props["executor"] = {"description": _FIELDS[BenchFile]["executor"], "anyOf": [
        {"type": "string", "enum": EXECUTORS.names()}, {"$ref": "#/$defs/ExecutorSettings"}]}
    body.pop("title", None)
    body.pop("description", None)
    return _document("bench", "forge bench file", "A forge bench: a harness, its registry "
                     "and defaults, task splits, a scorer, gates and budget", body)


def registry_schema() -> dict[str, Any]:
    """The JSON Schema of a registry file."""
    body = Registry.model_json_schema()
    _describe(body, _FIELDS)
    body.pop("title", None)
    body.pop("description", None)
    return _document("registry", "forge registry file", "A forge setting registry: each "
                     "setting's type, bounds and default", body)


def config_schema(registry: Registry) -> dict[str, Any]:
    """The JSON Schema of a config (or defaults) file of ``registry``."""
    props: dict[str, Any] = {}
    for name, setting in registry.settings.items():
        about = f"{setting.type} {setting.bounds_text()}, default {setting.default!r}"
        prop: dict[str, Any] = {
            "description": f"{setting.description} ({about})" if setting.description
            else about,
            "default": setting.default}
        if isinstance(setting, IntSetting):
            prop.update(type="integer", minimum=setting.min, maximum=setting.max)
        elif isinstance(setting, FloatSetting):
            prop.update(type="number", minimum=setting.min, maximum=setting.max)
        elif isinstance(setting, BoolSetting):
            prop.update(type="boolean")
        else:
            prop.update(enum=copy.deepcopy(setting.choices))
        props[name] = prop
    document = _document(
        "config", f"forge config of registry {registry.name}",
        f"A complete config of registry {registry.name!r}: every setting, nothing else",
        {"type": "object", "properties": props, "required": list(registry.settings),
         "additionalProperties": False})
    # A config fits one registry: its $id names which, by content digest.
    document["$id"] = f"urn:forge:schema:config:{registry.name}:{registry.digest[:16]}"
    return document
