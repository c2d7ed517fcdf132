"""Reading input files with locations, and writing output files atomically.

Every input error forge reports names the file, the field and, where the file is
YAML or JSONL, the line. pydantic gives the field as a path of keys; the YAML node
tree (``yaml.compose``) gives the line of each key, so both meet here. The text is
parsed within bounds by :mod:`forge._util.parse`: a hostile file (not UTF-8, too deep, a
huge integer, a lone surrogate, a control character) is one line too.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from forge._util.bounds import MAX_YAML_BYTES
from forge._util.parse import (
    BoundExceeded,
    DuplicateKey,
    HostileValue,
    check_value,
    compose_yaml,
    field_path,
    loads_json,
    parse_yaml,
)
from forge._util.show import short
from forge.errors import InputFileError

__all__ = [
    "ValidationProblem",
    "YamlDocument",
    "atomic_write_bytes",
    "atomic_write_text",
    "field_path",
    "load_versioned_json",
    "load_yaml",
    "parse_yaml",
    "raise_validation_error",
    "read_jsonl",
    "validation_problem",
]


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file that can say on which line a field was written."""

    path: Path
    data: Any
    root: yaml.Node | None

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """1-based line of the deepest node of ``loc`` that exists in the file."""
        node = self.root
        line = None if node is None else node.start_mark.line + 1
        for key in loc:
            child = None
            if isinstance(node, yaml.MappingNode):
                for k_node, v_node in node.value:
                    if isinstance(k_node, yaml.ScalarNode) and k_node.value == str(key):
                        child = v_node
                        line = k_node.start_mark.line + 1
                        break
            elif (isinstance(node, yaml.SequenceNode) and isinstance(key, int)
                  and 0 <= key < len(node.value)):
                child = node.value[key]
                line = child.start_mark.line + 1
            if child is None:
                break
            node = child
        return line


def load_yaml(path: str | Path, error: type[InputFileError]) -> YamlDocument:
    """Parse a YAML file; a missing, unreadable, malformed or hostile file (see
    :mod:`forge._util.parse`) raises ``error`` with the line and field where known."""
    p = Path(path)
    text = _decode(_read_bounded(p, error), p, error)
    try:
        composed = compose_yaml(text)
        root, data = composed.root, composed.data
        check_value(data)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, p, error) from None
    except HostileValue as exc:
        refused = YamlDocument(path=p, data=None, root=root)
        raise error(exc.message, file=p, field=field_path(exc.loc) or None,
                    line=refused.line_of(exc.loc)) from None
    return YamlDocument(path=p, data=data, root=root)


def _read_bounded(p: Path, error: type[InputFileError]) -> bytes:
    """The file's bytes, refused past :data:`MAX_YAML_BYTES` without reading further."""
    try:
        with p.open("rb") as file:  # no further than the bound: the file may be huge
            raw = file.read(MAX_YAML_BYTES + 1)
    except FileNotFoundError:
        raise error("file not found", file=p) from None
    except IsADirectoryError:
        raise error("is a folder, not a YAML file", file=p) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=p) from None
    if len(raw) > MAX_YAML_BYTES:
        raise error(f"larger than {MAX_YAML_BYTES:,} bytes ({MAX_YAML_BYTES // 2**20} MiB); "
                    "expected a YAML file of a few kilobytes", file=p)
    return raw


def _yaml_error(exc: yaml.YAMLError, text: str, p: Path,
                error: type[InputFileError]) -> InputFileError:
    """The one-line error for a YAML file PyYAML or forge's bounds refused."""
    if isinstance(exc, DuplicateKey):
        mark = exc.problem_mark
        return error(exc.problem or "a key is written twice", file=p,
                     field=field_path(exc.loc) or None,
                     line=None if mark is None else mark.line + 1)
    if isinstance(exc, BoundExceeded):
        mark = exc.problem_mark
        where = "" if mark is None else f" (at column {mark.column + 1})"
        return error(f"{exc.problem}{where}", file=p,
                     line=None if mark is None else mark.line + 1)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "malformed YAML"
        return error(f"malformed YAML: {problem}", file=p, line=line)
    if isinstance(exc, yaml.reader.ReaderError):
        # PyYAML's text for it spans two lines; one is enough, with the line number.
        return error(f"malformed YAML: character {_char(exc.character)} is not allowed "
                     "(control characters must be escaped in a double-quoted string)",
                     file=p, line=text.count("\n", 0, exc.position) + 1)
    return error(f"malformed YAML: {' '.join(str(exc).split())}", file=p)


def _decode(raw: bytes, path: Path, error: type[InputFileError]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"cannot read: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                    file=path, line=line) from None


def _char(character: Any) -> str:
    code = character if isinstance(character, int) else ord(str(character)[:1] or "\0")
    return f"U+{code:04X}"


def read_jsonl(path: str | Path, error: type[InputFileError]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line; a line that is malformed
    or hostile JSON, or not UTF-8, names its line (and the field, where it is one)."""
    p = Path(path)
    try:
        fh = p.open("rb")
    except FileNotFoundError:
        raise error("file not found", file=p) from None
    except IsADirectoryError:
        raise error("is a folder, not a JSONL file", file=p) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=p) from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(f"not UTF-8: byte 0x{raw[exc.start]:02x} at column "
                            f"{exc.start + 1}", file=p, line=number) from None
            if not text.strip():
                continue
            try:
                yield number, loads_json(text)
            except json.JSONDecodeError as exc:
                raise error(f"malformed JSON: {exc.msg} (column {exc.colno})",
                            file=p, line=number) from None
            except HostileValue as exc:
                raise error(exc.message, file=p, field=field_path(exc.loc) or None,
                            line=number) from None


_Model = TypeVar("_Model", bound=BaseModel)


def load_versioned_json(path: str | Path, model: type[_Model], *, error: type[InputFileError],
                        version: int | tuple[int, ...], what: str,
                        missing: str = "file not found") -> _Model:
    """Read a JSON file forge wrote (``run.json``, a saved result, a provenance sidecar)
    into ``model``, refusing anything else with one line naming the file and the field.

    The file must be one JSON object whose ``format_version`` is ``version`` (or one of
    them; an int: ``true`` is not ``1``); ``what`` names the kind of file in the messages (``not a
    forge result``, ``damaged run.json: ...``); ``missing`` is the message for an
    absent file.
    """
    p = Path(path)
    text = _read_text(p, error, what=what, missing=missing)
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON: {exc.msg}", file=p, line=exc.lineno) from None
    except HostileValue as exc:
        raise error(exc.message, file=p, field=field_path(exc.loc) or None) from None
    _check_version(data, p, error, version=version, what=what)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problem = validation_problem(exc, data=data)
        raise error(f"damaged {what}: {problem.message}", file=p,
                    field=problem.field or None) from None


def _read_text(p: Path, error: type[InputFileError], *, what: str, missing: str) -> str:
    """The UTF-8 text of a file forge wrote, or one line saying why it cannot be read."""
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(missing, file=p) from None
    except IsADirectoryError:
        raise error(f"is a folder; expected a {what} file", file=p) from None
    except UnicodeDecodeError:
        raise error("cannot read: not UTF-8", file=p) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=p) from None


def _check_version(data: Any, p: Path, error: type[InputFileError], *,
                   version: int | tuple[int, ...], what: str) -> None:
    """Refuse anything but a JSON object whose ``format_version`` this forge reads."""
    if not isinstance(data, dict) or "format_version" not in data:
        raise error(f"not a {what} (no format_version)", file=p)
    found = data["format_version"]
    readable = version if isinstance(version, tuple) else (version,)
    if type(found) is not int or found not in readable:
        raise error(f"format_version {found!r} is not readable by this forge, which reads "
                    f"{' and '.join(str(v) for v in readable)}", file=p,
                    field="format_version")


def raise_validation_error(
    exc: ValidationError,
    *,
    error: type[InputFileError],
    file: str | Path | None,
    doc: YamlDocument | None = None,
    prefix: Sequence[str | int] = (),
    line: int | None = None,
) -> NoReturn:
    """Turn pydantic's first error into one ``error`` line: file, line, field, expectation."""
    problem = validation_problem(exc, data=_at(doc.data, prefix) if doc is not None else None)
    full = [*prefix, *problem.loc]
    if doc is not None and line is None:
        line = doc.line_of(full)
    raise error(problem.message, file=file, field=field_path(full) or None, line=line) from None


@dataclass(frozen=True)
class ValidationProblem:
    """Pydantic's first error as forge words it: the key path and one line of text.

    ``cause`` is the exception a validator raised, when one did (pydantic keeps it in
    the error's context): a caller that raises its own kinds can look at it.
    """

    loc: tuple[str | int, ...]
    message: str
    cause: Exception | None = None

    @property
    def field(self) -> str:
        """The key path as ``a.b[0].c`` (empty for the whole value)."""
        return field_path(self.loc)


def validation_problem(exc: ValidationError, *, data: Any = None) -> ValidationProblem:
    """The first error of ``exc``, without pydantic's wording for validator and union
    internals (``function-after``, a union's tag, "Value error, "), the offending value
    shown clipped. ``data`` (the validated input, when at hand) keeps a key named like a
    union tag (a setting called ``float``)."""
    first = exc.errors(include_url=False)[0]
    message = _wording(first)
    if first["type"] not in {"missing", "extra_forbidden", "value_error", "assertion_error",
                             "too_long", "too_short"} \
            and "input" in first:
        message = f"{message} (got {short(first['input'])})"
    cause = first.get("ctx", {}).get("error")
    return ValidationProblem(tuple(_key_path(first["loc"], data)), message,
                             cause if isinstance(cause, Exception) else None)


#: Pydantic's texts for the errors a user meets, as forge says them: pydantic speaks of
#: its own machinery ("Unable to extract tag using discriminator", "Input should be a
#: valid dictionary or instance of RolloutSettings"), forge of the file's fields.
_WORDING = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
    "int_parsing": "expected an integer", "int_type": "expected an integer",
    "int_from_float": "expected an integer", "float_parsing": "expected a number",
    "float_type": "expected a number", "finite_number": "expected a finite number",
    "bool_parsing": "expected true or false", "bool_type": "expected true or false",
    "string_type": "expected a text", "list_type": "expected a list",
    "tuple_type": "expected a list", "set_type": "expected a list",
    "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping", "dataclass_type": "expected a mapping",
    "string_unicode": "expected a text",
}


def error_wording(error: Any) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as forge words it
    (see :data:`_WORDING`), for a caller that reports every error, not the first."""
    return _wording(error)


def _wording(error: Any) -> str:
    """One pydantic error as forge words it (see :data:`_WORDING`)."""
    kind, message = str(error["type"]), str(error["msg"])
    ctx: dict[str, Any] = error.get("ctx") or {}
    if kind in _WORDING:
        return _WORDING[kind]
    if kind in {"union_tag_not_found", "union_tag_invalid"}:
        return _union_tag_wording(kind, ctx)
    if kind in {"too_long", "too_short"} and "actual_length" in ctx:
        return _length_wording(kind, ctx, error.get("input"))
    if kind in {"literal_error", "enum"} and "expected" in ctx:
        return f"expected {ctx['expected']}"
    if message.startswith("Value error, "):
        return message[len("Value error, "):]
    if message.startswith("Input should be "):
        return "must be " + message[len("Input should be "):]
    return message


def _union_tag_wording(kind: str, ctx: dict[str, Any]) -> str:
    """A tagged union's error: the tag field missing, or naming no known kind."""
    # pydantic quotes the discriminator's name itself ("'type'").
    tag_field = str(ctx.get("discriminator", "type")).strip("'")
    if kind == "union_tag_not_found":
        return f"no {tag_field!r} field saying which kind this is"
    return (f"{tag_field} {short(ctx.get('tag'))} is not one of "
            f"{ctx.get('expected_tags', 'the known kinds')}")


def _length_wording(kind: str, ctx: dict[str, Any], value: Any) -> str:
    """A collection with too many or too few items."""
    most = kind == "too_long"
    bound = ctx.get("max_length" if most else "min_length")
    # A mapping's count is not in the context: its validation stops past the bound.
    actual = ctx["actual_length"]
    if actual is None and isinstance(value, Sized):
        actual = len(value)
    return (f"{'at most' if most else 'at least'} {bound:,} item(s), got "
            + (f"{actual:,}" if isinstance(actual, int) else "more"))


_UNION_TAGS = {"int", "float", "bool", "enum"}
_MISSING = object()


def _at(data: Any, loc: Sequence[str | int]) -> Any:
    for part in loc:
        data = _child(data, part)
    return data


def _child(data: Any, part: str | int) -> Any:
    if isinstance(data, dict):
        return data.get(part, _MISSING)
    if isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
        return data[part]
    return _MISSING


def _key_path(loc: Sequence[str | int], data: Any) -> list[str | int]:
    """Drop the loc parts that are not keys: function validators, discriminated-union tags.

    With the document's data at hand, a union tag is dropped only where it is not a key,
    so a setting named ``float`` keeps its name.
    """
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and part.startswith("function-"):
            continue
        child = _child(data, part)
        if isinstance(part, str) and part in _UNION_TAGS and child is _MISSING:
            continue
        out.append(part)
        data = child
    return out


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write all of ``text`` (UTF-8) or nothing: see :func:`atomic_write_bytes`."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str to write, got {type(text).__name__}")
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write all of ``data`` or nothing: a temp file in the same folder, fsync, rename.

    A file that is replaced keeps its permissions; a new one gets the umask's.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as fh:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
