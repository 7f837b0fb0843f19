"""The ``claimtrail`` command: a thin dispatcher over one module per subcommand.

Each ``audit/cli/cmd_<name>.py`` exposes ``register(subparsers)``, which adds the ``<name>``
parser and sets ``func`` to a callable taking the parsed namespace and returning an exit code.
Only the module of the command being run is imported, so a command pays start-up time for its
own dependencies alone (``allocate`` never loads the store, the API or telemetry); the full
list is loaded for help and for unknown commands. User errors raise ``UserError`` and are
printed as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from audit.errors import UserError
from audit.logs import LEVELS, setup_logging


def command_names() -> list[str]:
    """Every subcommand, from the ``cmd_<name>`` modules beside this one (no module is imported)."""
    import audit.cli as pkg

    return sorted(info.name[len("cmd_"):] for info in pkgutil.iter_modules(pkg.__path__) if info.name.startswith("cmd_"))


def chosen_command(argv: Sequence[str], commands: Sequence[str]) -> str | None:
    """The command ``argv`` runs, or None when help is asked first or the command is unknown."""
    skip_value = False
    for word in argv:
        if skip_value:
            skip_value = False
        elif word == "--log-level":
            skip_value = True
        elif word in ("-h", "--help"):
            return None
        elif not word.startswith("-"):
            return word if word in commands else None
    return None


def log_level(text: str) -> str:
    """``--log-level``: a name of ``LEVELS`` in any case."""
    if text.upper() not in LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(LEVELS)}")
    return text.upper()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the one ``argv`` runs."""
    parser = argparse.ArgumentParser(prog="claimtrail", description="Audit accelerator allocation in Kubernetes DRA.")
    parser.add_argument("--log-level", default="WARNING", type=log_level, metavar="LEVEL",
                        help="DEBUG, INFO, WARNING (default) or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = command_names()
    chosen = chosen_command(argv, commands) if argv is not None else None
    for name in [chosen] if chosen else commands:
        importlib.import_module(f"audit.cli.cmd_{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"claimtrail {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`claimtrail why … | head`): stop quietly, as Unix tools do
        sys.stderr.close()
        return 141


if __name__ == "__main__":
    sys.exit(main())
