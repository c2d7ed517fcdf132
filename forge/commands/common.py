"""What the commands moved out of ``forge/cli.py`` share: consoles, JSON output, options."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

__all__ = ["ExecutorFlags", "ExecutorOption", "RayAddressOption", "RayConnectTimeoutOption",
           "WorkersOption", "err", "out", "print_json", "write_for_option"]

#: Tables and messages; stderr for what must not mix with ``--json`` on stdout. No emoji
#: codes: rich would print ``tasks.jsonl:100:`` as ``tasks.jsonl💯``.
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)


def print_json(value: Any) -> None:
    """The one document on stdout (scripts parse it whole: DESIGN.md, CLI); under
    :func:`~forge.commands._stdout.json_stdout`, on the descriptor kept for it."""
    # Imported here: forge --version and --help load no command's module (_stdout
    # installs the router that keeps a harness's prints out of the document).
    from forge.commands._stdout import document

    stream = document()
    stream.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    stream.flush()


def write_for_option(option: str, path: Path, write: Callable[..., object], *args: Any
                     ) -> None:
    """Call ``write(*args)``, the write of ``path`` that ``option`` asked for; an OS
    error becomes the option's one-line error (exit 2)."""
    from forge.errors import OptionError

    try:
        write(*args)
    except OSError as exc:
        raise OptionError(f"cannot write {path}: {exc.strerror or exc}",
                          option=option) from None


if TYPE_CHECKING:  # what a type checker reads of the options built below
    from forge.executors import ExecutorSettings

    ExecutorOption = str | None
    WorkersOption = int | None
    RayAddressOption = str | None
    RayConnectTimeoutOption = float | None


@dataclass(frozen=True)
class ExecutorFlags:
    """``--executor``, ``--workers``, ``--ray-address``, ``--ray-connect-timeout`` as
    given (None: not given)."""

    name: str | None = None
    workers: int | None = None
    ray_address: str | None = None
    ray_connect_timeout_s: float | None = None

    def over(self, base: ExecutorSettings, *, whose: str) -> ExecutorSettings:
        """The settings these flags make of ``base`` (the bench's, or a run's journaled
        ones; ``whose`` names them): each part given replaces base's. The Ray flags with
        an executor that is not ``ray`` are refused rather than ignored: the executor's
        kind changes only by ``--executor``."""
        from forge.errors import OptionError

        settings = base.override(self.name, self.workers, self.ray_address,
                                 ray_connect_timeout_s=self.ray_connect_timeout_s)
        for flag, value in (("--ray-address", self.ray_address),
                            ("--ray-connect-timeout", self.ray_connect_timeout_s)):
            if value is not None and settings.name != "ray":
                how = "--executor" if self.name else whose
                raise OptionError(f"the executor is {settings.name} ({how}); a Ray cluster "
                                  "needs --executor ray", option=flag)
        return settings

    def resumed(self, journaled: ExecutorSettings) -> ExecutorSettings:
        """Where a resumed run runs: its journaled executor, the flags given over it part
        by part; an ``--executor`` of another kind starts from its flags alone (the
        journaled address or size of the other kind means nothing to it)."""
        if self.name is not None and self.name != journaled.name:
            from forge.executors import ExecutorSettings

            journaled = ExecutorSettings(self.name)
        return self.over(journaled, whose="the run's journaled executor")

    @contextlib.contextmanager
    def joining(self) -> Iterator[None]:
        """A Ray cluster that cannot be joined at the address typed as ``--ray-address``
        is bad input (exit 2); at one from a bench or a run's journal, the cluster is
        gone (:class:`~forge.errors.ClusterUnreachable`, exit 1)."""
        from forge.errors import ClusterUnreachable, OptionError

        try:
            yield
        except ClusterUnreachable as exc:
            if self.ray_address is None or exc.address != self.ray_address:
                raise
            raise OptionError(str(exc), option="--ray-address") from None


def __getattr__(name: str) -> Any:
    # The options of `eval` and `search` below: built when one of those commands is
    # loaded, because the executor names need every executor imported, which the other
    # commands (and `forge --version`, which prints its errors with `err`) do without.
    if name in _EXECUTOR_OPTIONS:
        value = _executor_options()[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_EXECUTOR_OPTIONS = ("ExecutorOption", "WorkersOption", "RayAddressOption",
                     "RayConnectTimeoutOption")


def _executor_options() -> dict[str, Any]:
    """Shared by `eval` and `search`: where attempts run."""
    from forge.executors import EXECUTORS, MAX_RAY_CONNECT_TIMEOUT_S, RAY_CONNECT_TIMEOUT_S

    return {
        "ExecutorOption": Annotated[str | None, typer.Option(
            "--executor", metavar="[" + "|".join(EXECUTORS.names()) + "]",
            help="where attempts run (default: the bench's executor, else local)")],
        "WorkersOption": Annotated[int | None, typer.Option(
            "--workers", min=1, help="worker processes or Ray actors (default: the cores)")],
        "RayAddressOption": Annotated[str | None, typer.Option(
            "--ray-address", help="join this Ray cluster (default: start a local one)")],
        "RayConnectTimeoutOption": Annotated[float | None, typer.Option(
            "--ray-connect-timeout", metavar="SECONDS", min=0.001,
            max=MAX_RAY_CONNECT_TIMEOUT_S,
            help="give up joining the Ray cluster after this long, with one line, before "
                 f"anything runs (default: the bench's, else {RAY_CONNECT_TIMEOUT_S:g})")],
    }
