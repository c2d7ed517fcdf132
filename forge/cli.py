"""The ``forge`` command line. Bad input: one line on stderr, exit 2, no traceback.

The commands live in :mod:`forge.commands`, one module each; this module holds the
app and :func:`main`, which turns forge's errors into exit codes.
"""

from __future__ import annotations

import sys

import typer
from pydantic import ValidationError

from forge._files import validation_problem
from forge.commands import register_all
from forge.commands._common import err
from forge.errors import EvaluationInterrupted, ForgeError, UserError

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find a better configuration for an agent harness, one setting at a "
                       "time, and prove it before it ships.")
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
            if isinstance(exc.__cause__, ValidationError) and hasattr(exc, "message"):
                # typer checks an option's value with pydantic: its wording, as forge's.
                exc.message = validation_problem(exc.__cause__).message
            err.print(f"forge: error: {exc.format_message()}",  # type: ignore[attr-defined]
                      highlight=False, markup=False, soft_wrap=True)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
