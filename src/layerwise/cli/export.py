"""``layerwise export`` (a sentence-transformers folder) and ``layerwise encode`` (a corpus -> an embedding file)."""

from __future__ import annotations

from layerwise.cli._checks import layer_list, max_length, positive_int
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.errors import UsageError


def add_parsers(sub) -> None:
    p = sub.add_parser("export", help="write a sentence-transformers folder: a layer subset (--layers or --from), "
                                      "LC + MLP (--head), or a trained pooler / multi-task / TMFT folder")
    p.add_argument("source", help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or Hugging Face folder (give "
                                  "--layers or --from), or a folder written by `layerwise train`, `layerwise "
                                  "multitask` or `layerwise tmft`")
    p.add_argument("dest", help="the folder to write (created; replaced only with --overwrite and only if it holds "
                                "an export)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--layers", type=layer_list, default=None,
                       help="hidden states to average, e.g. 0,6 (0 = embedding output, -1 = last layer)")
    which.add_argument("--from", dest="results", default=None,
                       help="a `layerwise search` results JSON: export the subset chosen on most of its dev splits, "
                            "with its scores in the model card")
    p.add_argument("--pooling", default="mean", choices=["mean", "cls"], help="token pooling per hidden state")
    p.add_argument("--head", action="store_true",
                   help="LC + MLP: feed the subset through the checkpoint's trained pooler head (dense + tanh)")
    p.add_argument("--max-length", type=max_length, default=256, help="tokens per text of the exported model")
    p.add_argument("--encoder", default=None,
                   help="Latte-Mix source: the encoder its token model was trained on (built-in name or folder)")
    p.add_argument("--layer", type=int, default=None, help="Latte-Mix source: the hidden state it reads")
    p.add_argument("--include-special", action="store_true",
                   help="Latte-Mix source: the mixture includes the special tokens (as trained with it)")
    p.add_argument("--overwrite", action="store_true", help="replace DEST if it holds an earlier export")
    p.set_defaults(handler=run_export)

    e = sub.add_parser("encode", help="embed a corpus (.txt, .jsonl, .csv/.tsv, .parquet) into .npy or .parquet")
    e.add_argument("corpus", help="one text per line (.txt), JSON lines (.jsonl), CSV/TSV or Parquet with a column")
    e.add_argument("out", metavar="OUTPUT", help="OUTPUT.npy (+ OUTPUT.ids.txt) or OUTPUT.parquet (id, embedding)")
    e.add_argument("--column", default="text", help="the text column or field (default: text)")
    e.add_argument("--id-column", default=None, help="the id column or field (default: the row number from 0)")
    src = e.add_mutually_exclusive_group()
    src.add_argument("--model", default=None,
                     help=f"built-in name or Hugging Face folder, pooled by --layers/--pooling (default: {DEFAULT_MODEL})")
    src.add_argument("--folder", default=None, help="an exported sentence-transformers folder (not cached)")
    e.add_argument("--layers", type=layer_list, default=(-1,), help="hidden states to average (default: -1, the last)")
    e.add_argument("--pooling", default="mean", choices=["mean", "cls", "pooler"], help="token pooling (default: mean)")
    e.add_argument("--head", action="store_true", help="LC + MLP through the checkpoint's pooler head")
    e.add_argument("--trust-remote-code", action="store_true",
                   help="with --folder: allow a layerwise module class in it (a trained pooler export)")
    e.add_argument("--chunk-size", type=positive_int, default=4096, help="texts read, encoded and written at once")
    e.add_argument("--batch-size", type=positive_int, default=64)
    e.add_argument("--max-length", type=max_length, default=256)
    e.add_argument("--device", default="cpu")
    e.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    e.add_argument("--cache-dir", default=None, help="layer-stack cache (default: $LAYERWISE_HOME/cache); a rerun "
                                                     "after an interrupt reads the finished chunks from it")
    e.add_argument("--no-cache", action="store_true", help="read and write no cache (no resume)")
    e.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(handler=run_encode)


def run_export(args, command) -> int:
    from layerwise.export import SubsetExport, export_layer_subset, export_trained, source_kind

    kind = source_kind(args.source)
    latte = [flag for flag, on in (("--encoder", args.encoder is not None), ("--layer", args.layer is not None),
                                   ("--include-special", args.include_special)) if on]
    if kind != "lattemix" and latte:
        raise UsageError(f"{', '.join(latte)} apply to a Latte-Mix token model only; {args.source} is not one")
    if kind == "lattemix":
        out = _export_lattemix(args)
    elif kind == "layer_subset":
        if args.layers is None and args.results is None:
            raise UsageError(f"{args.source} is a pretrained model: say which hidden states to export with --layers "
                             "(e.g. 0,6) or --from RESULTS.json")
        config = SubsetExport(model=args.source, layers=args.layers, pooling=args.pooling, head=args.head,
                              max_length=args.max_length, results=args.results)
        out = export_layer_subset(config, args.dest, overwrite=args.overwrite)
    else:
        given = [flag for flag, on in (("--layers", args.layers is not None), ("--from", args.results is not None),
                                       ("--head", args.head), ("--pooling", args.pooling != "mean")) if on]
        if given:
            raise UsageError(f"{args.source} is a {kind} folder, exported as trained; leave out {', '.join(given)}")
        out = export_trained(args.source, args.dest, overwrite=args.overwrite)
    trust = ", trust_remote_code=True" if kind in ("trained_pooler", "lattemix") else ""
    print(f"wrote {out} ({kind}); load it with SentenceTransformer({str(out)!r}{trust})")
    return 0


def _export_lattemix(args):
    from layerwise.export.lattemix import export_lattemix

    other = [flag for flag, on in (("--layers", args.layers is not None), ("--from", args.results is not None),
                                   ("--head", args.head), ("--pooling", args.pooling != "mean")) if on]
    if other:
        raise UsageError(f"{args.source} is a Latte-Mix token model; leave out {', '.join(other)}")
    if args.encoder is None or args.layer is None:
        raise UsageError(f"{args.source} is a Latte-Mix token model, which does not record its encoder: pass "
                         "--encoder MODEL and --layer N (the ones it was trained on)")
    return export_lattemix(args.source, args.dest, model=args.encoder, layer=args.layer, max_length=args.max_length,
                           include_special=args.include_special, overwrite=args.overwrite)


def _embedder(args):
    from layerwise.encode import FolderEmbedder, PoolingSpec, SpecEmbedder
    from layerwise.encoders.layer_encoder import LayerEncoder

    if args.folder is not None:
        tweaked = [f for f, on in (("--layers", args.layers != (-1,)), ("--pooling", args.pooling != "mean"),
                                   ("--head", args.head)) if on]
        if tweaked:
            raise UsageError(f"--folder {args.folder} holds its own pooling; leave out {', '.join(tweaked)}")
        return FolderEmbedder(args.folder, batch_size=args.batch_size, device=args.device,
                              trust_remote_code=args.trust_remote_code)
    spec = PoolingSpec(kind=args.pooling, layers=args.layers, head=args.head)
    encoder = LayerEncoder(args.model or DEFAULT_MODEL, max_length=args.max_length, batch_size=args.batch_size,
                           device=args.device, dtype=args.dtype, cache_dir=False if args.no_cache else args.cache_dir,
                           show_progress=False)
    return SpecEmbedder(encoder, spec)


def run_encode(args, command) -> int:
    from layerwise.encode import CorpusSource, encode_corpus, scan_corpus
    from layerwise.encode.writers import check_output

    if args.trust_remote_code and args.folder is None:
        raise UsageError("--trust-remote-code applies to --folder only; leave it out")
    source = CorpusSource(args.corpus, column=args.column, id_column=args.id_column)
    check_output(args.out, overwrite=args.overwrite)
    n = scan_corpus(source)  # a bad file stops here, before the model loads
    result = encode_corpus(source, args.out, _embedder(args), chunk_size=args.chunk_size, overwrite=args.overwrite,
                           show_progress=not args.quiet)
    ids = f" + ids {result.ids}" if result.ids else ""
    print(f"wrote {result.output}{ids}: {n} texts x {result.dim} dims in {result.seconds:.1f} s")
    return 0


__all__ = ["add_parsers", "run_encode", "run_export"]
