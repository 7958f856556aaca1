"""``layerwise`` command line: a thin layer over the library; one module per method's commands.

Each module adds its subcommands with ``add_parsers(sub)`` and sets ``handler(args, command) -> exit code``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from layerwise.cli import lattemix, layer_attention, lc, models, multitask, truncated

__all__ = ["build_parser", "main"]

_COMMAND_MODULES = (lc, lattemix, layer_attention, multitask, truncated, models)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="layerwise",
        description="Sentence embeddings from every layer of a transformer encoder.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    command = ["layerwise", *(sys.argv[1:] if argv is None else argv)]
    try:
        return args.handler(args, command)
    except (ValueError, FileNotFoundError, KeyError, TypeError, RuntimeError) as exc:
        print(f"layerwise: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
