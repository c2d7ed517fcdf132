"""Writing a config as a YAML file that every YAML reader reads back exactly.

``forge promote`` writes a run's final config into a defaults file people also edit
and other tools read, some with YAML 1.1 readers (plain PyYAML), forge with its YAML
1.2 one. :func:`render_config` writes text both read back to the same values, type for
type; :func:`check_round_trip` proves it before anything is replaced.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from forge._util.files import parse_yaml
from forge.config.registry import Config, Registry, same_value
from forge.errors import ConfigError, ForgeError

__all__ = ["check_round_trip", "first_difference", "render_config", "show_value"]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_config(values: Mapping[str, Any], registry: Registry, *,
                  order: Sequence[str] | None = None, header: Sequence[str] = ()) -> str:
    """A config as YAML that every YAML reader reads back to exactly ``values``.

    ``order`` (by default the registry's) decides the key order; keys it misses follow
    in registry order. Strings are always double-quoted, so ``"1e3"`` or ``"on"``
    stay strings; floats always carry a dot and a signed exponent, so YAML 1.1
    readers (plain PyYAML) and forge's YAML 1.2 reader both see a float.
    """
    keys = [k for k in (order or []) if k in values]
    keys += [k for k in registry.settings if k in values and k not in keys]
    keys += [k for k in values if k not in keys]
    lines = [_comment(h) for h in header]
    lines += [f"{_key_text(k)}: {_value_text(values[k])}" for k in keys]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    # One physical line per header line, whatever a run id or bench name holds.
    return "# " + " ".join(text.split("\n")) if text.strip() else "#"


def _key_text(key: str) -> str:
    if _PLAIN_KEY.match(key) and parse_yaml(key) == key and yaml.safe_load(key) == key:
        return key  # plain only when both YAML 1.1 and 1.2 read it as this string
    return _quoted(key)


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ForgeError(f"cannot promote a non-finite float {value!r}")
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    if isinstance(value, str):
        return _quoted(value)
    raise ForgeError(f"cannot write a config value of type {type(value).__name__}")


def _quoted(text: str) -> str:
    # PyYAML's emitter escapes what a double-quoted scalar must escape; no line folding.
    out: str = yaml.safe_dump(text, default_style='"', allow_unicode=True, width=math.inf)
    return out.rstrip("\n")


def check_round_trip(text: str, expected: Config, registry: Registry, target: Path) -> None:
    """What forge writes must load back to exactly the config it means: checked before
    anything is replaced, the way ``load_config`` will read it."""
    try:
        data = parse_yaml(text)
        loaded = registry.validate_config(data, file=target)
    except (yaml.YAMLError, ConfigError) as exc:
        raise ForgeError(f"{target}: the text to write does not load back ({exc}); "
                         "nothing was written") from None
    if (first_difference(loaded.values, expected.values) is not None
            or any(type(loaded.values[k]) is not type(v) for k, v in expected.values.items())):
        raise ForgeError(f"{target}: the text to write loads back to another config; "
                         "nothing was written")


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """The first key (in ``a``'s order, then ``b``'s) whose values differ type for type
    (``True`` is not ``1``), with both values; None when the configs are the same."""
    for key in [*a, *(k for k in b if k not in a)]:
        if key not in a or key not in b or not same_value(a[key], b[key]):
            return key, a.get(key, "(missing)"), b.get(key, "(missing)")
    return None


def show_value(value: Any) -> str:
    """A config value as a person reads it in a message: JSON (``true``, ``"on"``, 2)."""
    return json.dumps(value, ensure_ascii=True)
