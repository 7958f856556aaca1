"""``layerwise`` command line: a thin layer over the library; one module per method's commands.

Each module adds its subcommands with ``add_parsers(sub)`` and sets ``handler(args, command) -> exit code``.

Exit codes: 0 done; 2 a user error (bad option, path, data or model file), printed as one line; 130 interrupted
(Ctrl-C), with one line saying what was kept; 1 an internal error, i.e. a bug (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from layerwise.cache import CacheCorruptError
from layerwise.cli import compress, export, lattemix, layer_attention, lc, models, multitask, results, truncated
from layerwise.cli._checks import preflight
from layerwise.cli._outputs import check_output_names, guard_output
from layerwise.errors import LayerwiseError
from layerwise.files import write_failure

__all__ = ["EXIT_BUG", "EXIT_INTERRUPTED", "EXIT_USAGE", "USER_ERRORS", "build_parser", "main"]

_COMMAND_MODULES = (lc, lattemix, layer_attention, multitask, truncated, compress, export, models, results)
TRAINING_COMMANDS = ("train", "tmft", "multitask")  # the commands that run as N processes under torchrun (DDP)

EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

#: Exceptions caused by input, reported as one line. Library code raises these (with the fix in the message)
#: at its public boundaries; TypeError, KeyError, RuntimeError and the rest are bugs. A cache folder that
#: belongs to another key (CacheCorruptError) is the user's to fix too.
USER_ERRORS = (LayerwiseError, ValueError, OSError, CacheCorruptError)

KEPT_ON_INTERRUPT = ("interrupted: nothing finished is lost; encoded sentences stay in the layer cache and finished "
                     "parts in the output folder, so the same command continues where it stopped")


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (the usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from layerwise import __version__
    from layerwise.reports import source_revision

    rev = source_revision()
    if rev is None:
        return f"layerwise {__version__}"
    return f"layerwise {__version__} (git {rev['commit'][:12]}{', dirty' if rev['dirty'] else ''})"


class _VersionAction(argparse.Action):
    """``--version``: computed only when asked (it may run git)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="layerwise",
        description="Sentence embeddings from every layer of a transformer encoder.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version (and git commit) and exit")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of any error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for module in _COMMAND_MODULES:
        module.add_parsers(sub)
    for p in sub.choices.values():  # also after the command; SUPPRESS keeps the value given before it
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # this library's progress at INFO (none with --quiet); other libraries' warnings only (onnxruntime's quantizer,
    # NNCF and sentence-transformers log every node or save at INFO)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("layerwise").setLevel(logging.WARNING if getattr(args, "quiet", False) else logging.INFO)
    command = ["layerwise", *(sys.argv[1:] if argv is None else argv)]
    try:
        preflight(args)
        check_output_names(args)  # a file of --output the command would replace and did not write: refused now
        with contextlib.ExitStack() as stack:
            stack.enter_context(guard_output(args))
            silent_rank = _join_processes(args)  # under torchrun, rank > 0: no output but warnings and errors
            if getattr(args, "quiet", False):  # (set on those ranks too)
                _quiet_transformers(stack)
            if silent_rank:
                stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
            code = args.handler(args, command)
            _leave_processes()
            return code
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"layerwise: {KEPT_ON_INTERRUPT}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except USER_ERRORS as exc:
        if args.debug:
            raise
        print(f"layerwise: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, reported as one
        if args.debug:
            raise
        if write_failure(exc):  # a full disk met inside a library that reports it as its own error type
            print(f"layerwise: error: writing failed ({_one_line(exc)}); free some space or write to another disk, "
                  "then run the same command again", file=sys.stderr)
            return EXIT_USAGE
        print(f"layerwise: internal error ({type(exc).__name__}: {_one_line(exc)}); this is a bug, "
              "rerun with --debug for the traceback", file=sys.stderr)
        return EXIT_BUG


def _quiet_transformers(stack: contextlib.ExitStack) -> None:
    """``-q``: no progress bar or warning of transformers either (its weight-loading and shard-writing bars, the
    load report of a head layerwise adds itself), for this command only (restored after it)."""
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    stack.callback(hf_logging.set_verbosity, verbosity)
    if bars:
        stack.callback(hf_logging.enable_progress_bar)


def _join_processes(args) -> bool:
    """Under torchrun, join the process group (gloo: the commands train on CPU); True on the ranks that stay quiet."""
    from layerwise.training import distributed

    if not distributed.launched():
        return False
    if args.command not in TRAINING_COMMANDS:
        raise ValueError(f"`layerwise {args.command}` does not train: run it without torchrun (only "
                         f"{', '.join(TRAINING_COMMANDS)} run as several processes)")
    distributed.setup(getattr(args, "device", None) or "cpu")
    if distributed.is_main():
        return False
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("layerwise").setLevel(logging.WARNING)
    args.quiet = True  # no progress bars either
    return True


def _leave_processes() -> None:
    """After a finished command, under torchrun: every rank leaves the process group together (a no-op otherwise)."""
    from layerwise.training import distributed

    distributed.teardown()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text


if __name__ == "__main__":
    sys.exit(main())
