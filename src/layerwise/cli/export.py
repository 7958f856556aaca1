"""``layerwise export`` (a sentence-transformers folder) and ``layerwise encode`` (a corpus -> an embedding file)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from layerwise.cli._common import add_backend_option
from layerwise.cli._option_types import layer_list, max_length, nonnegative_float, positive_float, positive_int
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.errors import DataFileError, UsageError


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

    e = sub.add_parser("encode", help="embed a corpus (.txt, .jsonl, .csv/.tsv, .parquet) into .npy or .parquet, or "
                                      "into a folder of Parquet shards on Ray (--engine ray)")
    e.add_argument("corpus", help="one text per line (.txt), JSON lines (.jsonl), CSV/TSV or Parquet with a column")
    e.add_argument("out", metavar="OUTPUT", help="OUTPUT.npy (+ OUTPUT.ids.txt) or OUTPUT.parquet (id, embedding); "
                                                 "with --engine ray a folder of Parquet shards (row, id, embedding)")
    e.add_argument("--column", default=None, help="the text column or field (default: text; not for .txt)")
    e.add_argument("--id-column", default=None,
                   help="the id column or field, set on every row (default: the row number from 0; not for .txt)")
    src = e.add_mutually_exclusive_group()
    src.add_argument("--model", default=None,
                     help=f"built-in name or Hugging Face folder, pooled by --layers/--pooling (default: {DEFAULT_MODEL})")
    src.add_argument("--folder", default=None, help="an exported sentence-transformers folder (no layer cache; an "
                                                    "interrupted run resumes like a --model one)")
    e.add_argument("--layers", type=layer_list, default=(-1,), help="hidden states to average (default: -1, the last)")
    e.add_argument("--pooling", default="mean", choices=["mean", "cls", "pooler"], help="token pooling (default: mean)")
    e.add_argument("--head", action="store_true", help="LC + MLP through the checkpoint's pooler head")
    e.add_argument("--chunk-size", type=positive_int, default=None,
                   help="texts read, encoded and written at once (default 4096; with --engine ray the rows per Ray "
                        "block, default about 4 blocks per actor, at most 4096)")
    e.add_argument("--batch-size", type=positive_int, default=64)
    e.add_argument("--max-length", type=max_length, default=256)
    e.add_argument("--device", default="cpu")
    e.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    add_backend_option(e)
    e.add_argument("--cache-dir", default=None, help="--model's layer-stack cache (default: $LAYERWISE_HOME/cache)")
    e.add_argument("--no-cache", action="store_true",
                   help="keep nothing between runs: no layer cache, and no finished chunks kept beside OUTPUT (by "
                        "default the same command after an interrupt encodes only the missing chunks)")
    e.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_ray_options(e)
    e.set_defaults(handler=run_encode)


def _add_ray_options(e) -> None:
    e.add_argument("--engine", default="local", choices=["local", "ray"],
                   help="local: this process, chunk by chunk, resumable after an interrupt (default); ray: Ray "
                        "Data with a pool of actors holding the model, Parquet shards out (pip install "
                        "\"layerwise[ray]\")")
    e.add_argument("--address", default=None,
                   help="--engine ray: the Ray cluster to use (e.g. auto, or ray://HEAD:10001 after `ray start "
                        "--head`); default: a local Ray instance with this machine's CPUs")
    e.add_argument("--actors", type=positive_int, default=None,
                   help="--engine ray: actors holding the model (default: one per GPU with --gpus-per-actor, else "
                        "one per CPU less one, since actors that reserve every CPU starve Ray's write tasks: 1 on a "
                        "2-core machine)")
    e.add_argument("--cpus-per-actor", type=positive_float, default=1.0,
                   help="--engine ray: CPUs reserved per actor (its torch threads; fractions allowed)")
    e.add_argument("--gpus-per-actor", type=nonnegative_float, default=0.0,
                   help="--engine ray: GPUs per actor (> 0 runs the model on cuda)")


def run_export(args, command) -> int:
    from layerwise.benchmarks.lc.run import subset_from_results
    from layerwise.export import export_trained, source_kind
    from layerwise.methods.lc.export import SubsetExport, export_layer_subset

    kind = source_kind(args.source)
    latte = [flag for flag, on in (("--encoder", args.encoder is not None), ("--layer", args.layer is not None),
                                   ("--include-special", args.include_special)) if on]
    if kind != "lattemix" and latte:
        raise UsageError(f"{', '.join(latte)} apply to a Latte-Mix token model only; {args.source} is not one")
    if kind == "lattemix":
        out = _export_lattemix(args)
    elif kind == "layer_subset":
        hint = _not_a_model(args.source, source_kind)
        if hint:
            raise UsageError(hint)
        if args.layers is None and args.results is None:
            raise UsageError(f"{args.source} is a pretrained model: say which hidden states to export with --layers "
                             "(e.g. 0,6) or --from RESULTS.json")
        choice = None if args.results is None else subset_from_results(args.results, head=args.head)
        config = SubsetExport(model=args.source, layers=args.layers, pooling=args.pooling, head=args.head,
                              max_length=args.max_length, choice=choice)
        out = export_layer_subset(config, args.dest, overwrite=args.overwrite)
    else:
        given = [flag for flag, on in (("--layers", args.layers is not None), ("--from", args.results is not None),
                                       ("--head", args.head), ("--pooling", args.pooling != "mean")) if on]
        if given:
            raise UsageError(f"{args.source} is a {kind} folder, exported as trained; leave out {', '.join(given)}")
        out = export_trained(args.source, args.dest, overwrite=args.overwrite)
    loader = "layerwise.load_sentence_transformer" if kind in ("trained_pooler", "lattemix") else "SentenceTransformer"
    print(f"wrote {out} ({kind}); load it with {loader}({str(out)!r})")
    return 0


def _export_lattemix(args):
    from layerwise.methods.lattemix.export import export_lattemix

    other = [flag for flag, on in (("--layers", args.layers is not None), ("--from", args.results is not None),
                                   ("--head", args.head), ("--pooling", args.pooling != "mean")) if on]
    if other:
        raise UsageError(f"{args.source} is a Latte-Mix token model; leave out {', '.join(other)}")
    if args.encoder is None or args.layer is None:
        raise UsageError(f"{args.source} is a Latte-Mix token model, which does not record its encoder: pass "
                         "--encoder MODEL and --layer N (the ones it was trained on)")
    return export_lattemix(args.source, args.dest, model=args.encoder, layer=args.layer, max_length=args.max_length,
                           include_special=args.include_special, overwrite=args.overwrite)


def _embedder_config(args):
    from layerwise.encode import EmbedderConfig, PoolingSpec

    if args.folder is not None:
        tweaked = [f for f, on in (("--layers", args.layers != (-1,)), ("--pooling", args.pooling != "mean"),
                                   ("--head", args.head)) if on]
        if tweaked:
            raise UsageError(f"--folder {args.folder} holds its own pooling; leave out {', '.join(tweaked)}")
        return EmbedderConfig(folder=args.folder, batch_size=args.batch_size, device=args.device)
    return EmbedderConfig(model=args.model or DEFAULT_MODEL,
                          pooling=PoolingSpec(kind=args.pooling, layers=args.layers, head=args.head),
                          max_length=args.max_length, batch_size=args.batch_size, device=args.device,
                          dtype=args.dtype, cache_dir=False if args.no_cache else args.cache_dir,
                          backend=args.backend)


def _not_a_model(source, source_kind) -> str | None:
    """What to pass instead when ``source`` is a local folder that holds no model of its own (no ``config.json``):
    a sentence-transformers folder already, or a run's output folder with the model folders inside it."""
    path = Path(source).expanduser()
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    if (path / "modules.json").is_file():
        return (f"{source} is a sentence-transformers folder already (modules.json): load it with "
                f"SentenceTransformer({str(source)!r}) or layerwise.load_sentence_transformer; there is nothing to "
                "export")
    inner = [p for depth in ("*", "*/*", "*/*/*") for p in sorted(path.glob(depth)) if p.is_dir()
             and ((p / "config.json").is_file() or (p / "modules.json").is_file() or source_kind(p) != "layer_subset")]
    if inner:
        shown = ", ".join(str(p) for p in inner[:4]) + (f" (and {len(inner) - 4} more)" if len(inner) > 4 else "")
        return f"{source} holds no model of its own (no config.json); export one of the model folders in it: {shown}"
    return (f"{source} is not a model folder (no config.json): pass a Hugging Face model folder, a built-in model "
            "name, or a folder written by layerwise train, multitask or tmft")


def run_encode(args, command) -> int:
    from layerwise.encode import encode_corpus, scan_corpus
    from layerwise.encode.writers import check_output, check_unlocked

    if args.engine == "ray":
        return _run_encode_ray(args, command)
    ray_only = [f for f, on in (("--address", args.address is not None), ("--actors", args.actors is not None),
                                ("--cpus-per-actor", args.cpus_per_actor != 1.0),
                                ("--gpus-per-actor", args.gpus_per_actor != 0.0)) if on]
    if ray_only:
        raise UsageError(f"{', '.join(ray_only)} apply to --engine ray only; add --engine ray or leave them out")
    source = _corpus_source(args)
    check_output(args.out, overwrite=args.overwrite, inputs=(args.corpus,))
    check_unlocked(args.out)  # another encode writing OUT: refused now, not after the model loads
    with _flags_named():
        n = scan_corpus(source)  # a bad file stops here, before the model loads
    result = encode_corpus(source, args.out, _embedder_config(args).build(), chunk_size=args.chunk_size or 4096,
                           overwrite=args.overwrite, show_progress=not args.quiet, resume=not args.no_cache)
    ids = f" + ids {result.ids}" if result.ids else ""
    print(f"wrote {result.output}{ids}: {n} texts x {result.dim} dims in {result.seconds:.1f} s")
    return 0


def _corpus_source(args):
    """The corpus of ``layerwise encode``; --column/--id-column refused for a .txt corpus, which has no columns."""
    from layerwise.encode import CorpusSource

    given = [flag for flag, value in (("--column", args.column), ("--id-column", args.id_column)) if value is not None]
    if Path(args.corpus).suffix.lower() == ".txt" and given:
        raise UsageError(f"{args.corpus} is a .txt corpus, one text a line with no columns, so {' and '.join(given)} "
                         "cannot apply (the ids are the row numbers from 0); leave them out, or write the corpus as "
                         ".jsonl/.csv/.tsv/.parquet")
    return CorpusSource(args.corpus, column="text" if args.column is None else args.column, id_column=args.id_column)


@contextlib.contextmanager
def _flags_named():
    """A bad corpus's error names --column/--id-column instead of the Python arguments."""
    try:
        yield
    except DataFileError as err:
        raise err.naming_flags({"column": "--column", "id_column": "--id-column"}) from None


def _run_encode_ray(args, command) -> int:
    from layerwise.encode.ray_engine import RayEncodeConfig, encode_corpus_ray, require_ray
    from layerwise.encode.shards import check_output_folder
    from layerwise.encode.writers import check_unlocked

    if args.device != "cpu":
        raise UsageError(f"with --engine ray the actors' device follows --gpus-per-actor (cuda when above 0), not "
                         f"--device {args.device}: leave --device out")
    source = _corpus_source(args)
    check_output_folder(args.out, overwrite=args.overwrite)
    check_unlocked(args.out)  # another encode writing OUT: refused now, before Ray starts or a model loads
    require_ray()
    config = RayEncodeConfig(address=args.address, actors=args.actors, cpus_per_actor=args.cpus_per_actor,
                             gpus_per_actor=args.gpus_per_actor, rows_per_block=args.chunk_size)
    with _flags_named():
        result = encode_corpus_ray(source, args.out, _embedder_config(args), config=config,
                                   overwrite=args.overwrite, show_progress=not args.quiet, command=command)
    print(f"wrote {result.output} (Parquet shards): {result.n} texts x {result.dim} dims in {result.seconds:.1f} s; "
          "load it with layerwise.encode.load_embeddings")
    return 0


__all__ = ["add_parsers", "run_encode", "run_export"]
