"""The ``forge`` command line. Bad input: one line on stderr, exit 2, no traceback.

The commands live in :mod:`forge.commands`, one module each; this module holds the
app and :func:`main`, which turns forge's errors into exit codes. The app is built
on first use (``forge.cli.app``, or :func:`main` once its signal handlers are in
place), and a command's module is imported only when that command runs or its help
is asked for: ``forge --version`` and ``forge --help`` import none of them (the
search, the executors, scipy), and a signal during an import ends forge as cleanly
as one later on.
"""

from __future__ import annotations

import functools
import signal
import sys
from typing import TYPE_CHECKING, Any

from forge._util.interrupt import handling, received
from forge.errors import EvaluationInterrupted, ForgeError, RunInterrupted, UserError

if TYPE_CHECKING:
    from types import TracebackType

    import typer

__all__ = ["app", "main"]

#: The app (declared for type checkers; built by ``__getattr__`` on first use).
app: typer.Typer


@functools.cache
def _app() -> typer.Typer:
    import typer

    from forge._version import __version__
    from forge.commands import LazyGroup

    # The commands are not registered here: the root group imports a command's module
    # when that command is asked for (forge.commands).
    built = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True,
                        pretty_exceptions_enable=False,
                        # Inherited by every sub-command's context: -h works everywhere.
                        context_settings={"help_option_names": ["-h", "--help"]},
                        help="Find a better configuration for an agent harness, one setting "
                             "at a time, and prove it before it ships.")

    def print_version(value: bool) -> None:
        if value:
            typer.echo(f"forge {__version__}")
            raise typer.Exit()

    @built.callback()
    # A default, not Annotated: typer reads this module's annotations with its globals,
    # where typer itself is not imported (the app is built late, see the docstring).
    def _root(version: bool = typer.Option(
            False, "--version", callback=print_version, is_eager=True,
            help="print forge's version and exit")) -> None:
        # Only the options of `forge` itself.
        pass

    return built


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _usage_error(exc: BaseException) -> bool:
    """Typer's parser errors (bad option, missing argument) expose these two members;
    matching on them keeps us off typer's private exception module."""
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def _second_signal() -> None:
    # The cleanup of the first is under way; what takes it long is the grace of
    # command children, so they go now.
    from forge.harness.supervisor import kill_live_groups

    kill_live_groups()


def _redacted_traceback(kind: type[BaseException], exc: BaseException,
                        tb: TracebackType | None) -> None:
    """The traceback of a crash (a bug of forge's), with the secrets masked: its message
    may quote what a harness or a service gave back."""
    import traceback

    from forge.secrets.masking import redact

    sys.stderr.write(redact("".join(traceback.format_exception(kind, exc, tb))))


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line and exit 2; running out of memory is one line
    and exit 1; SIGINT exits 130, SIGTERM 143, each once everything forge started has
    stopped (:mod:`forge._util.interrupt`)."""
    sys.excepthook = _redacted_traceback
    with handling(on_second=_second_signal):
        try:
            return _run(argv)
        except (KeyboardInterrupt, RunInterrupted) as exc:
            stop = (exc if isinstance(exc, RunInterrupted)
                    else RunInterrupted(received() or signal.SIGINT))
            # Not through rich: the signal may have come before it was imported.
            print(f"forge: {stop}", file=sys.stderr, flush=True)
            return stop.exit_status
        except MemoryError:
            pass  # reported below, once the frames holding what filled memory are freed
    # Exit 1, not 2: every input forge knows to expand (aliases, nesting, sizes) is
    # refused by a bound with exit 2 before it fills memory, so what is left is a run
    # larger than this machine, not a file to fix. Not through rich: it may not fit.
    print(_OUT_OF_MEMORY, file=sys.stderr, flush=True)
    return 1


_OUT_OF_MEMORY = ("forge: out of memory: the command needed more memory than the system "
                  "would give it (MemoryError), and stopped")


def _invoke(argv: list[str] | None) -> Any:
    """Run the app; an interrupt, however typer reports it, as :class:`RunInterrupted`."""
    import typer

    try:
        result = _app()(args=argv, standalone_mode=False)
    except (typer.Abort, EvaluationInterrupted):
        raise RunInterrupted(received() or signal.SIGINT) from None
    except typer.Exit as exc:
        return int(exc.exit_code)
    if received() is not None:
        # Typer returns 130 for a KeyboardInterrupt (our Interrupted) it caught.
        raise RunInterrupted(received() or signal.SIGINT)
    return result


def _masked(text: str) -> str:
    """``text`` with the secrets masked. Imported on an error only: the masks pull numpy
    in, which ``forge --version`` and ``--help`` do not need."""
    from forge.secrets.masking import redact

    return redact(text)


def _run(argv: list[str] | None) -> int:
    from forge.commands.common import err

    try:
        result = _invoke(argv)
    except RunInterrupted:
        raise
    except UserError as exc:
        # Redacted: a message may quote a value a harness or service gave back.
        err.print(_masked(f"forge: error: {exc}"), highlight=False, markup=False,
                  soft_wrap=True)
        return 2
    except ForgeError as exc:
        err.print(_masked(f"forge: {exc}"), highlight=False, markup=False, soft_wrap=True)
        return 1
    except Exception as exc:
        if not _usage_error(exc):
            raise
        if type(exc).__name__ != "NoArgsIsHelpError":  # else typer has printed the help
            _print_usage_error(exc)
        return 2
    return result if isinstance(result, int) else 0


def _print_usage_error(exc: Exception) -> None:
    from pydantic import ValidationError

    from forge._util.files import validation_problem
    from forge.commands.common import err

    if isinstance(exc.__cause__, ValidationError) and hasattr(exc, "message"):
        # typer checks an option's value with pydantic: its wording, as forge's.
        exc.message = validation_problem(exc.__cause__).message
    err.print(f"forge: error: {exc.format_message()}",  # type: ignore[attr-defined]
              highlight=False, markup=False, soft_wrap=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
