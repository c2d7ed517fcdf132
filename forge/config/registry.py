"""The registry: which settings a harness has, their types and bounds, and valid configs.

Nothing outside the registry can change and nothing can leave its bounds: every
config forge evaluates, proposes or promotes goes through :meth:`Registry.validate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from forge._util.bounds import MAX_SETTINGS
from forge._util.digest import digest_of
from forge._util.files import (
    YamlDocument,
    field_path,
    load_yaml,
    parse_yaml,
    raise_validation_error,
    validation_problem,
)

# The setting kinds have their own module; callers name them here too.
from forge.config.settings import INT_BOUND as INT_BOUND
from forge.config.settings import BoolSetting as BoolSetting
from forge.config.settings import EnumSetting as EnumSetting
from forge.config.settings import FloatSetting as FloatSetting
from forge.config.settings import IntSetting as IntSetting
from forge.config.settings import Scalar as Scalar
from forge.config.settings import Setting as Setting
from forge.config.settings import same_value as same_value
from forge.errors import ConfigError, RegistryError
from forge.secrets.masking import clip

__all__ = [
    "BoolSetting",
    "Config",
    "EnumSetting",
    "FloatSetting",
    "IntSetting",
    "Registry",
    "RuntimeRule",
    "RuntimeSection",
    "Scalar",
    "Setting",
    "load_config",
    "load_registry",
    "parse_assignment",
    "same_value",
]

class _ReferenceError(ValueError):
    """A hint or runtime entry that names a bad setting or direction, with its location."""

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc


class RuntimeRule(BaseModel):
    """A failure signal that the runtime mutator answers with one move of one setting."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    on: str
    target: str
    direction: Literal["up", "down", "toggle"] | str


class RuntimeSection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    allow: list[str] = Field(default_factory=list)
    max_moves_per_run: int = Field(default=1, ge=0)
    rules: list[RuntimeRule] = Field(default_factory=list)


class Registry(BaseModel):
    """The settings of one harness. Load with :func:`load_registry`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    settings: dict[str, Setting] = Field(min_length=1, max_length=MAX_SETTINGS)
    hints: dict[str, dict[str, str]] = Field(default_factory=dict)
    runtime: RuntimeSection | None = None

    @model_validator(mode="after")
    def _references(self) -> Registry:
        for signal, moves in self.hints.items():
            for target, direction in moves.items():
                self._check_reference(("hints", signal, target), target, direction)
        if self.runtime is not None:
            for i, target in enumerate(self.runtime.allow):
                if target not in self.settings:
                    raise _ReferenceError(f"runtime.allow names unknown setting {target!r}",
                                          ("runtime", "allow", i))
            for i, rule in enumerate(self.runtime.rules):
                self._check_reference(("runtime", "rules", i), rule.target, rule.direction)
        return self

    def _check_reference(self, loc: tuple[str | int, ...], target: str, direction: str) -> None:
        where = field_path(loc[:2] if loc[0] == "hints" else loc)
        if target not in self.settings:
            raise _ReferenceError(f"{where} names unknown setting {target!r}", loc)
        setting = self.settings[target]
        allowed = ({"toggle"} if isinstance(setting, BoolSetting)
                   else {str(c) for c in setting.choices} if isinstance(setting, EnumSetting)
                   else {"up", "down"})
        if direction not in allowed:
            raise _ReferenceError(f"{where}: direction {direction!r} for {target!r}; "
                                  f"expected one of {sorted(allowed)}", loc)

    @cached_property
    def digest(self) -> str:
        """sha256 of the registry's canonical content (comments and layout do not count)."""
        return digest_of(self.model_dump(mode="json"))

    def validate_config(self, values: Mapping[str, Any], *, file: str | Path | None = None,
                        doc: YamlDocument | None = None) -> Config:
        """A complete, in-bounds config, or :class:`ConfigError` naming the key and bound."""
        if not isinstance(values, Mapping):
            raise ConfigError("expected a mapping of setting: value", file=file)
        for key in values:
            if key not in self.settings:
                line = doc.line_of([key]) if doc else None
                raise ConfigError(f"unknown setting; registry {self.name!r} has "
                                  f"{', '.join(self.settings)}",
                                  file=file, field=str(key), line=line)
        checked: dict[str, Scalar] = {}
        for key, setting in self.settings.items():
            if key not in values:
                raise ConfigError(f"missing; expected {setting.type} "
                                  f"{clip(setting.bounds_text(), 200)}", file=file, field=key)
            try:
                checked[key] = setting.check(values[key])
            except ValueError as exc:
                line = doc.line_of([key]) if doc else None
                raise ConfigError(str(exc), file=file, field=key, line=line) from None
        return Config(values=checked, registry_digest=self.digest)

    def defaults(self) -> Config:
        return self.validate_config({k: s.default for k, s in self.settings.items()})

    def with_values(self, config: Config, updates: Mapping[str, Any], *,
                    source: str = "--set") -> Config:
        """``config`` with some settings replaced, validated as a whole."""
        return self.validate_config({**config.values, **updates}, file=source)


class Config(BaseModel):
    """A validated mapping ``setting -> value``, tied to its registry by digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    values: dict[str, Scalar]
    registry_digest: str

    @cached_property
    def fingerprint(self) -> str:
        return digest_of({"config": self.values, "registry": self.registry_digest})

    def as_dict(self) -> dict[str, Scalar]:
        """A fresh copy that a harness may mutate without touching this config."""
        return dict(self.values)


def load_registry(path: str | Path) -> Registry:
    doc = load_yaml(path, RegistryError)
    if not isinstance(doc.data, dict):
        raise RegistryError("expected a mapping with 'name' and 'settings'", file=doc.path)
    try:
        return Registry.model_validate(doc.data)
    except ValidationError as exc:
        cause = validation_problem(exc).cause
        line = doc.line_of(cause.loc) if isinstance(cause, _ReferenceError) else None
        raise_validation_error(exc, error=RegistryError, file=doc.path, doc=doc, line=line)


def load_config(path: str | Path, registry: Registry) -> Config:
    doc = load_yaml(path, ConfigError)
    data = doc.data
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of setting: value", file=doc.path)
    return registry.validate_config(data, file=doc.path, doc=doc)


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line; the value is read as a YAML scalar."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected key=value, got {text!r}", file="--set")
    try:
        value = parse_yaml(raw) if raw.strip() else raw
    except yaml.YAMLError:
        value = raw
    return key.strip(), value
