"""The plug-in pattern: a registry per kind, classes registered next to their definition,
specs built back into objects, and every error naming its file, field and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import pytest
from conftest import MakeBench, line_of
from pydantic import BaseModel, ConfigDict

from forge._util.files import load_yaml
from forge.bench.loader import load_bench
from forge.core.spec import BuildContext, NoOptions, Plugin, PluginRegistry, Spec
from forge.errors import BenchError
from forge.executors import EXECUTORS, Executor, LocalExecutor
from forge.harness import HARNESSES, Harness, PythonHarness
from forge.proposers import PROPOSERS, Proposer, SweepProposer
from forge.scorers import SCORERS, ExactScorer, Scorer


class Shape(Plugin):
    """A toy plugin kind for the registry's own tests."""


class _SquareOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    side: int


SHAPES: PluginRegistry[Shape] = PluginRegistry("shape", Shape)


@SHAPES.register("square", shorthand="side")
class Square(Shape):
    options_model = _SquareOptions

    def __init__(self, side: int) -> None:
        self.side = side

    @classmethod
    def from_args(cls, args: dict[str, Any], ctx: BuildContext) -> Self:
        options = _SquareOptions.model_validate(args)
        if options.side > 100:
            raise ValueError("too big to draw")
        return cls(options.side)


@SHAPES.register("dot")
class Dot(Shape):
    """No options: the default ``from_args``."""


CTX = BuildContext(base_dir=Path.cwd(), file=Path("shapes.yaml"), field="shape")


def test_the_decorator_registers_the_class_and_returns_it_unchanged() -> None:
    assert SHAPES.names() == ["dot", "square"]
    assert SHAPES.get("square") is Square and SHAPES.get("circle") is None
    assert Square.__name__ == "Square"  # the decorator hands the class back


def test_a_class_of_another_kind_or_a_taken_name_is_refused() -> None:
    with pytest.raises(TypeError, match="not a Shape"):
        SHAPES.register("scorer")(ExactScorer)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="two shapes are named 'dot'"):
        SHAPES.register("dot")(Dot)


def test_specs_parse_from_yaml_forms_and_build_back() -> None:
    assert SHAPES.parse({"square": 3}, CTX) == Spec(name="square", args={"side": 3})
    assert SHAPES.parse("dot", CTX) == Spec(name="dot")
    square = SHAPES.build(Spec(name="square", args={"side": 3}), CTX)
    assert isinstance(square, Square) and square.side == 3
    assert isinstance(SHAPES.build(Spec(name="dot"), CTX), Dot)


@pytest.mark.parametrize(("spec", "message"), [
    (Spec(name="circle"), "shapes.yaml: shape: unknown shape 'circle'; known: dot, square"),
    (Spec(name="square", args={"side": "wide"}), "shapes.yaml: shape.square.side: "),
    (Spec(name="square", args={"side": 3, "colour": 1}),
     "shapes.yaml: shape.square.colour: unknown field"),
    (Spec(name="square", args={"side": 101}), "shapes.yaml: shape.square: too big to draw"),
    (Spec(name="dot", args={"size": 1}), "shapes.yaml: shape.dot.size: unknown field"),
])
def test_build_errors_name_file_and_field(spec: Spec, message: str) -> None:
    with pytest.raises(BenchError) as err:
        SHAPES.build(spec, CTX)
    assert str(err.value).startswith(message)


def test_the_context_of_a_part_extends_the_field_and_keeps_the_rest() -> None:
    part = CTX.at("all", 1, "regex")
    assert part.field == "shape.all[1].regex"
    assert part.loc == ("shape", "all", 1, "regex")
    assert (part.base_dir, part.file) == (CTX.base_dir, CTX.file)
    assert BuildContext(base_dir=Path.cwd()).at("scorer").field == "scorer"


BLOCK_BENCH = """\
name: mini
harness:
  python: "harness:run"
registry: registry.yaml
splits: {dev: tasks/dev.jsonl}
scorer:
  all:
    - exact
    - regex:
        pattern: "(unclosed"
"""


def test_an_error_deep_in_a_spec_gets_the_line_where_it_is_written(
        make_bench: MakeBench) -> None:
    path = make_bench()
    path.write_text(BLOCK_BENCH, encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_bench(path)
    assert err.value.field == "scorer.all[1].regex"
    assert err.value.line == line_of(path, "    - regex:")
    assert "invalid regular expression" in err.value.message


def test_a_python_harness_that_cannot_be_imported_gets_its_line(make_bench: MakeBench) -> None:
    path = make_bench()
    path.write_text(BLOCK_BENCH.replace("harness:run", "harness:nothing_here")
                    .replace("(unclosed", "closed"), encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_bench(path)
    assert err.value.field == "harness.python"
    assert err.value.line == line_of(path, "  python:")
    assert "has no attribute 'nothing_here'" in err.value.message


def test_an_unknown_executor_in_the_bench_is_refused_at_its_line(make_bench: MakeBench) -> None:
    path = make_bench()
    path.write_text(path.read_text(encoding="utf-8") + "executor:\n  name: threads\n",
                    encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_bench(path)
    assert err.value.field == "executor"
    assert err.value.line == line_of(path, "executor:")
    assert "unknown executor 'threads'; known: local, process, ray" in err.value.message


def test_a_context_without_its_document_has_no_line(tmp_path: Path) -> None:
    doc_path = tmp_path / "a.yaml"
    doc_path.write_text("scorer: exact\n", encoding="utf-8")
    doc = load_yaml(doc_path, BenchError)
    assert BuildContext(base_dir=tmp_path, file=doc_path, field="scorer", doc=doc).line == 1
    # A context for another file never borrows this document's lines.
    other = BuildContext(base_dir=tmp_path, file=tmp_path / "b.yaml", field="scorer", doc=doc)
    assert other.line is None
    assert BuildContext(base_dir=tmp_path, field="scorer").line is None


@pytest.mark.parametrize(("registry", "base", "example"), [
    (HARNESSES, Harness, PythonHarness),
    (SCORERS, Scorer, ExactScorer),
    (PROPOSERS, Proposer, SweepProposer),
    (EXECUTORS, Executor, LocalExecutor),
])
def test_every_kind_follows_the_pattern(registry: PluginRegistry[Any], base: type,
                                        example: type) -> None:
    assert registry.base is base
    for name in registry.names():
        plugin = registry.get(name)
        assert plugin is not None and issubclass(plugin, base)
        assert issubclass(plugin.options_model, BaseModel)
    assert example in {registry.get(n) for n in registry.names()}


def test_optional_hooks_do_nothing_unless_overridden() -> None:
    sweep = SweepProposer()
    assert sweep.journal_form() is None
    assert sweep.drain_rejections() == []
    assert issubclass(NoOptions, BaseModel) and SweepProposer.options_model is NoOptions
