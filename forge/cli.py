"""The ``forge`` command line. Bad input: one line on stderr, exit 2, no traceback.

The commands live in :mod:`forge.commands`, one module each; this module holds the
app and :func:`main`, which turns forge's errors into exit codes.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from forge import __version__
from forge.commands import register_all
from forge.commands._common import err
from forge.errors import EvaluationInterrupted, ForgeError, UserError

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  # Inherited by every sub-command's context: -h works everywhere.
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Find a better configuration for an agent harness, one setting at a "
                       "time, and prove it before it ships.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"forge {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="print forge's version and exit")] = False) -> None:
    # Only the options of `forge` itself; each command is registered below.
    pass


register_all(app)


def _usage_error(exc: BaseException) -> bool:
    """Typer's parser errors (bad option, missing argument) expose these two members;
    matching on them keeps us off typer's private exception module."""
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line and exit 2; Ctrl-C exits 130."""
    try:
        result = app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt, EvaluationInterrupted):
        err.print("forge: interrupted; nothing was saved", highlight=False)
        return 130
    except UserError as exc:
        err.print(f"forge: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except ForgeError as exc:
        err.print(f"forge: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 1
    except Exception as exc:
        if not _usage_error(exc):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":
            pass  # typer has printed the help already
        else:
            err.print(f"forge: error: {exc.format_message()}",  # type: ignore[attr-defined]
                      highlight=False, markup=False, soft_wrap=True)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
