"""``layerwise models``: list the built-in models, assemble all-mpnet-base-v2."""

from __future__ import annotations


def add_parsers(sub) -> None:
    p = sub.add_parser("models", help="list built-in models or assemble all-mpnet-base-v2")
    p.add_argument("action", choices=["list", "assemble"])
    p.add_argument("--dest", default=None, help="assemble into this folder (default: $LAYERWISE_MODELS, else "
                   "$LAYERWISE_HOME/models)")
    p.add_argument("--force", action="store_true")
    p.set_defaults(handler=run)


def run(args, command) -> int:
    from layerwise.encoders import registry

    if args.action == "list":
        for m in registry.BUILTIN_MODELS.values():
            path = m.locate()
            print(f"{m.name:20s} {m.hf_id:45s} {path if path else 'not installed: ' + m.install}")
    else:
        print(registry.assemble_mpnet(args.dest, force=args.force))
    return 0
