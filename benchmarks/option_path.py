"""The call path of ``--budget-rollouts``: the modules its value passes through from the
command line to the place where it stops a search.

    python benchmarks/option_path.py                   # the forge first on sys.path
    PYTHONPATH=/path/to/checkout python benchmarks/option_path.py   # another checkout
    python benchmarks/option_path.py --functions       # and each function on the path

**Method.** ``forge search BENCH --budget-rollouts N`` runs in this process (through
:func:`forge.cli.main`, the ``forge`` command) on a small bench (default: the
closed-form bench, ``--seed 7``) whose rollout budget ``N`` stops it after a few
steps (default 1237). A profiler (:func:`sys.setprofile`,
:func:`threading.setprofile`) sees every Python call. A call *carries* N when one of its
arguments (``self`` included) is N, or holds N within three steps: an attribute of an
object of a class defined in forge (a dataclass, a pydantic model, any instance), an
item of a dict, list or tuple of at most 32 items (``self.options.budget.rollouts`` is
three steps from ``self``). Only calls of functions defined in forge count: the
parsing by click and typer before ``forge.commands.search`` and pydantic's validation
are libraries, not the project's path. The path is the carrying functions in the order
each is first called, up to and including the one that first returns the stop reason
``"budget_rollouts"``: where the budget stops the search. Later calls (the summary
printed, the outcome journaled) are not on the way to the stop.

From the path's modules, each run of consecutive calls in one module counted once, it
prints: the modules entered in order, the number of distinct modules, the *moves*
(changes of module along the path) and the *returns* (entries into a module the path
had already left). A value that flows down one layer at a time enters each module once
and never returns; each return is a module handing the value back to one it came from.

Only first calls count, so a function called at every step is one entry of the path,
placed where the search first called it. N is followed by identity: the int object
the command line parsed, as the first forge call receives it, is
the one carried (pydantic and dataclasses keep the object given; the first call is
the command's wrapper, which has it among its ``**kwargs``), so a counter that
happens to equal N (the attempts run, near the end) is not mistaken for it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE / "benches" / "closedform"
#: The stop reason the budget gives when its rollouts are spent.
STOP = "budget_rollouts"
#: Steps from an argument to N: ``self`` -> ``options`` -> ``budget`` -> ``rollouts``.
DEPTH = 3
#: Containers larger than this are not looked into (results, task lists, configs).
MAX_ITEMS = 32
_ATOMS = (str, bytes, float, bool, complex, type(None), Path)
#: The two readings of "a call carries N".
MODES = {
    "handoffs": "calls handed N (or an object holding it) as an argument; a method's "
                "receiver left out",
    "holders": "calls any of whose arguments, the receiver included, holds N",
}


@dataclass
class Tracer:
    """A profile function that keeps the forge functions whose calls carry ``value``."""

    value: int
    #: Whether the receiver (``self``, ``cls``) counts as an argument: ``holders``
    #: (True) follows every object that holds N; ``handoffs`` (False) only N handed on.
    receiver: bool = True
    #: The int object the command line parsed N into, once a forge call receives it.
    target: object = None
    path: list[tuple[str, str]] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    stopped_at: tuple[str, str] | None = None

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if self.stopped_at is not None or event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not (module == "forge" or module.startswith("forge.")):
            return
        key = (module, frame.f_code.co_qualname)
        if event == "return":
            if isinstance(arg, str) and arg == STOP and (key in self.seen or self.target):
                if key not in self.seen:  # the stop decision ends the path either way
                    self.seen.add(key)
                    self.path.append(key)
                self.stopped_at = key
            return
        if key in self.seen:
            return
        arguments = _arguments(frame, receiver=self.receiver)
        if self.target is None:  # the first forge call given N: the object followed
            self.target = self._given(arguments)
        if any(self._carries(v, DEPTH, set()) for v in arguments):
            self.seen.add(key)
            self.path.append(key)

    def _given(self, arguments: list[object]) -> object:
        """N as an argument, or an item of ``*args`` or ``**kwargs`` (a wrapper's)."""
        for v in arguments:
            items = v.values() if isinstance(v, dict) else v if isinstance(v, tuple) else (v,)
            for x in items:
                if type(x) is int and x == self.value:
                    return x
        return None

    def _carries(self, v: object, depth: int, visited: set[int]) -> bool:
        if type(v) is int:
            return v is self.target
        if depth == 0 or isinstance(v, _ATOMS) or id(v) in visited:
            return False
        visited.add(id(v))
        items: list[object]
        if isinstance(v, dict):
            items = list(v.values()) if len(v) <= MAX_ITEMS else []
        elif isinstance(v, list | tuple):
            items = list(v) if len(v) <= MAX_ITEMS else []
        elif type(v).__module__.startswith("forge"):
            items = _attributes(v)
        else:
            return False
        return any(self._carries(x, depth - 1, visited) for x in items)


def _arguments(frame: types.FrameType, *, receiver: bool = True) -> list[object]:
    """The values of a call's parameters (``*args`` and ``**kwargs`` included), at entry;
    without the receiver (a method's ``self`` or ``cls``) unless ``receiver``."""
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    local = frame.f_locals
    names = code.co_varnames[:n]
    if not receiver and names and names[0] in ("self", "cls"):
        names = names[1:]
    return [local[name] for name in names if name in local]


def _attributes(v: object) -> list[object]:
    """An instance's attributes, read from its ``__dict__`` and slots (no property runs)."""
    out: list[object] = []
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict):
        out.extend(d.values())
    for cls in type(v).__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            with contextlib.suppress(AttributeError):
                out.append(object.__getattribute__(v, name))
    return out


@dataclass(frozen=True)
class Figures:
    modules: list[str]
    distinct: int
    moves: int
    returns: int


def figures(path: list[tuple[str, str]]) -> Figures:
    """The path's modules in order (consecutive calls in one module once), with counts."""
    modules: list[str] = []
    for module, _ in path:
        if not modules or modules[-1] != module:
            modules.append(module)
    returns = sum(1 for i, m in enumerate(modules) if m in modules[:i])
    return Figures(modules, len(set(modules)), max(0, len(modules) - 1), returns)


def trace(bench: Path, budget: int, seed: int, *, receiver: bool) -> Tracer:
    """``forge search`` of ``bench`` with ``--budget-rollouts budget``, traced."""
    from forge.cli import main

    tracer = Tracer(budget, receiver=receiver)
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["search", str(bench), "--budget-rollouts", str(budget), "--seed", str(seed),
                "--journals", str(Path(tmp) / "journals"), "--run-id", "traced", "--json"]
        out = io.StringIO()
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        if code != 0:
            raise SystemExit(f"forge {' '.join(argv)} exited {code}:\n{out.getvalue()}")
    return tracer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", type=Path, default=BENCH)
    parser.add_argument("--budget", type=int, default=1237,
                        help="the --budget-rollouts followed (a distinctive number)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--functions", action="store_true",
                        help="print each function on the path too")
    parser.add_argument("--modes", default="handoffs,holders",
                        help="which paths: handoffs, holders, or both (comma-separated)")
    args = parser.parse_args(argv)
    import forge

    print(f"forge from {Path(forge.__file__).parent}")
    print(f"forge search {args.bench} --budget-rollouts {args.budget} --seed {args.seed}")
    for mode in args.modes.split(","):
        tracer = trace(args.bench, args.budget, args.seed, receiver=mode == "holders")
        _show(mode, tracer, functions=args.functions)
    return 0


def _show(mode: str, tracer: Tracer, *, functions: bool) -> None:
    f = figures(tracer.path)
    print(f"\n## {mode}: {MODES[mode]}")
    if tracer.stopped_at is None:
        print(f"the budget never returned {STOP!r}: the whole run's path is shown")
    else:
        print(f"stopped by: {'.'.join(tracer.stopped_at)}")
    if functions:
        for module, name in tracer.path:
            print(f"  {module}.{name}")
    print("modules in order: " + " -> ".join(m.removeprefix("forge.") for m in f.modules))
    print(f"distinct modules: {f.distinct}")
    print(f"moves between modules: {f.moves}")
    print(f"returns to a module already left: {f.returns}")


if __name__ == "__main__":
    sys.exit(main())
