"""Validation at the command-line boundary, before any model is loaded or any text encoded.

Numbers are checked by the argparse ``type=`` functions of :mod:`layerwise.cli._option_types` while parsing.
Paths, the device and the data sets a command will read are checked by :func:`preflight`, which
``main`` runs after parsing and before the command: a results folder that cannot be written, a data folder
that is a file, a missing data set or an absent GPU is found in a second, not after an hour of encoding.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from layerwise.errors import UsageError

__all__ = ["check_device", "check_folder", "check_writable_folder", "preflight"]

# -- paths, device, data --------------------------------------------------------------------------------


def check_folder(path: str | os.PathLike, option: str) -> Path:
    """An existing folder (a data folder): not missing, not a file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"{option} {p} does not exist; pass an existing folder")
    if not p.is_dir():
        raise UsageError(f"{option} {p} is a file, not a folder; pass the folder that holds the data")
    return p


def check_writable_folder(path: str | os.PathLike, option: str) -> Path:
    """A folder that is, or can be created as, writable: its nearest existing ancestor is tried with a temp file.

    Nothing is created except that probe file, which is removed at once.
    """
    p = Path(path).expanduser()
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        what = "is a file" if probe == p else f"cannot be created: {probe} is a file"
        raise UsageError(f"{option} {p} {what}, not a folder; pass a folder path")
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".layerwise-write-check-")
    except OSError as exc:
        raise UsageError(
            f"{option} {p} is not writable ({exc.strerror or exc} in {probe}); pass a folder you can write to"
        ) from None
    os.close(fd)
    os.unlink(name)
    return p


def check_device(device: str) -> None:
    """A torch device string whose hardware is present (``cpu``, ``cuda``, ``cuda:1``, ``mps``)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device {device!r} is not a device name; pass cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise UsageError(f"--device {device} asks for a GPU but torch sees none here; pass --device cpu")
        if dev.index is not None and dev.index >= n:
            raise UsageError(f"--device {device}: torch sees {n} GPU(s) (cuda:0..cuda:{n - 1}); pick one of those")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"--device {device} is not available on this machine; pass --device cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise UsageError(f"--device {device!r} is not supported; pass cpu, cuda, cuda:N or mps")


def _check_data(args) -> None:
    from layerwise.data.senteval import available_transfer, canonical_task
    from layerwise.data.sts import available_sts, resolve_data_dir, sts_display_name

    data_dir = getattr(args, "data_dir", None)
    root = resolve_data_dir(data_dir)
    sts = [getattr(args, "dataset", None), *(getattr(args, "datasets", None) or []), *(getattr(args, "sts", None) or [])]
    missing = [s for s in dict.fromkeys(s for s in sts if s) if s not in available_sts(data_dir)]
    if missing:
        names = ", ".join(sts_display_name(s) for s in missing)
        if root is None:
            raise UsageError(f"{names} is read from a data folder and none is given: pass --data-dir (or set "
                             "$LAYERWISE_DATA) to the folder whose sts/ holds it, or give your own pairs (--pairs)")
        raise UsageError(f"{names} not found in the data folder {root}; pass --data-dir with sts/ holding it, or "
                         "leave it out")
    tasks = [*(getattr(args, "tasks", None) or []), *(getattr(args, "limited_tasks", None) or [])]
    if tasks:
        present = set(available_transfer(data_dir))
        absent = [t for t in dict.fromkeys(tasks) if canonical_task(t) not in present]
        if absent and root is None:
            raise UsageError(f"transfer task(s) {', '.join(absent)} are read from a data folder and none is given: "
                             "pass --data-dir (or set $LAYERWISE_DATA) to the folder whose senteval/ holds them, "
                             "or give your own labelled texts (--train)")
        if absent:
            raise UsageError(f"transfer task(s) {', '.join(absent)} not found in the data folder {root}; "
                             "pass --data-dir with senteval/ holding them, or leave them out")
    sources = getattr(args, "train_sources", None) or []
    if "snli" in sources or "wiki" in sources:
        from layerwise.data.nli import load_snli, load_wiki_head

        if "snli" in sources:
            load_snli(data_dir, "all")  # small files: read now, so a missing one stops the run before the model
        if "wiki" in sources:
            load_wiki_head(data_dir)


#: ``--dev-size`` when none is given: the paper's 350 dev pairs, or half the pairs of a smaller data set
DEFAULT_DEV_SIZE = 350


def _check_dev_size(args) -> None:
    """``search``, ``ablate``: the dev pairs of each split must leave at least 2 test pairs (the data is small: read
    it now). No ``--dev-size`` takes :data:`DEFAULT_DEV_SIZE`, or half the pairs where that would leave too few."""
    from layerwise.data.sts import load_sts, sts_display_name

    files = user_files(args)
    if "dev" in files or ("pairs" not in files and args.command == "ablate"):
        # a dev file and a test file: no split is drawn; ablate's built-in STS sets: each far over 2 x 350 pairs
        args.dev_size = args.dev_size or DEFAULT_DEV_SIZE
        return
    if "pairs" in files:
        from layerwise.data.readers import data_label

        n, what = len(files["pairs"].sentences1), f"{data_label(args.pairs)} ({args.pairs}"
    else:
        data = load_sts(args.dataset, data_dir=getattr(args, "data_dir", None), split=args.split)
        n, what = len(data), f"{sts_display_name(args.dataset)} ({data.split}"
    if args.dev_size is None:
        args.dev_size = min(DEFAULT_DEV_SIZE, n // 2)
    if not 2 <= args.dev_size <= n - 2:
        raise UsageError(f"--dev-size {args.dev_size} does not fit {what}, {n} pairs): pass a --dev-size from 2 to "
                         f"{n - 2}")


# -- the user's own data files (search, layers, ablate: --pairs or --dev/--test; transfer: --train [--test]) --------

STS_FILE_COMMANDS = ("search", "layers", "ablate")
DEFAULT_ABLATE_STS = ("stsb", "sickr")
DEFAULT_ABLATE_TASKS = ("mr", "cr", "subj", "trec")
DEFAULT_ABLATE_LIMITED = ("mr", "subj", "trec")
DEFAULT_TRANSFER_TASKS = ("mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc")  # the seven tasks in the shared data


def resolve_data_options(args) -> None:
    """Check how a BERT-LC command names its data and fill in the built-in defaults where no file is given.

    ``search``/``layers``/``ablate`` take ``--pairs FILE`` or ``--dev FILE --test FILE`` instead of the built-in sets
    (``--dataset``/``--split``; ``--sts`` for ablate, whose SentEval tasks then default to none); ``transfer`` takes
    ``--train FILE [--test FILE]`` instead of ``--tasks``. Mixing the two ways is refused.
    """
    command = getattr(args, "command", None)
    if command in STS_FILE_COMMANDS:
        pairs, dev, test = args.pairs, args.dev, args.test
        if pairs and (dev or test):
            raise UsageError("give --pairs FILE (split into dev and test by the protocol) or --dev FILE --test FILE, "
                             "not both")
        if bool(dev) != bool(test):
            given, missing = ("--dev", "--test") if dev else ("--test", "--dev")
            raise UsageError(f"{given} needs {missing} too: the subset is chosen on --dev and reported on --test (or "
                             "give one file with --pairs)")
        own = bool(pairs or dev)
        builtin = [flag for flag, value in (("--dataset", getattr(args, "dataset", None)),
                                            ("--split", getattr(args, "split", None)),
                                            ("--sts", getattr(args, "sts", None))) if value is not None]
        if own and builtin:
            one = len(builtin) == 1
            raise UsageError(f"{', '.join(builtin)} {'names' if one else 'name'} a built-in data set; with --pairs or "
                             f"--dev/--test leave {'it' if one else 'them'} out")
        if own and getattr(args, "aggregation", "all") != "all":
            raise UsageError(f"--aggregation {args.aggregation} combines the subsets of STS12-16; the pairs of your "
                             "file are scored all at once: leave --aggregation out")
        if command == "ablate":
            args.sts = [] if own else list(args.sts if args.sts is not None else DEFAULT_ABLATE_STS)
            if args.tasks is None:
                args.tasks = [] if own else list(DEFAULT_ABLATE_TASKS)
            if args.limited_tasks is None:
                args.limited_tasks = [] if own else list(DEFAULT_ABLATE_LIMITED)
            _check_ablate_parts(args)
        elif not own:
            args.dataset = args.dataset or "stsb"
    elif command == "transfer":
        if args.test and not args.train:
            raise UsageError("--test goes with --train (the classifier is fitted on --train, scored on --test)")
        if args.train:
            given = [flag for flag, value in (("--tasks", args.tasks), ("--outer-splits", args.outer_splits),
                                              ("--screen-dim", args.screen_dim)) if value is not None]
            if given:
                one = len(given) == 1
                raise UsageError(f"{', '.join(given)} {'applies' if one else 'apply'} to the built-in SentEval tasks; "
                                 f"with --train leave {'it' if one else 'them'} out")
        else:
            args.tasks = list(args.tasks if args.tasks is not None else DEFAULT_TRANSFER_TASKS)
            args.outer_splits = 10 if args.outer_splits is None else args.outer_splits


# ablate's options of the parts on SentEval tasks -> (the parts they set, their default)
_ABLATE_TASK_OPTIONS = {"--outer-splits": ("outer_splits", ("tasks", "limited_tasks"), 10),
                        "--inner-splits": ("inner_splits", ("tasks", "limited_tasks"), 10),
                        "--max-denominator": ("max_denominator", ("limited_tasks",), 256),
                        "--limited-seeds": ("limited_seeds", ("limited_tasks",), 10)}


def _check_ablate_parts(args) -> None:
    """An option of a part that does not run (no transfer task, no limited-data task: the default with your own
    pairs) is refused, not ignored; the others get their defaults."""
    for flag, (name, parts, default) in _ABLATE_TASK_OPTIONS.items():
        runs = any(getattr(args, part) for part in parts)
        if getattr(args, name) is not None and not runs:
            which = " or ".join(f"--{p.replace('_', '-')}" for p in parts)
            raise UsageError(f"{flag} sets the ablation parts on SentEval tasks, and none runs here (no {which}; "
                             "with your own pairs there are none unless named): leave it out, or name the tasks")
        if getattr(args, name) is None:
            setattr(args, name, default)


def user_files(args) -> dict:
    """The user's files a command names, read once (kept on ``args``): ``pairs``, or ``dev`` and ``test`` (STS
    pairs), or ``train`` and ``test`` (labeled texts) -> what the readers return. A bad file raises one line here,
    before any model loads (``preflight`` calls this first)."""
    cached = getattr(args, "_user_files", None)
    if cached is not None:
        return cached
    from layerwise.cli._files import labeled_from_args, pairs_from_args

    command = getattr(args, "command", None)
    out: dict = {}
    if command in STS_FILE_COMMANDS:
        if args.pairs:
            out["pairs"] = pairs_from_args(args, args.pairs, min_rows=4 if command != "layers" else 3)
        if args.dev:
            out["dev"] = pairs_from_args(args, args.dev, min_rows=3)
            out["test"] = pairs_from_args(args, args.test, min_rows=3)
    elif command == "transfer" and args.train:
        out["train"] = labeled_from_args(args, args.train, min_rows=10)
        if args.test:
            out["test"] = labeled_from_args(args, args.test, min_rows=1)
            _check_test_labels(out["train"], out["test"], args)
    args._user_files = out
    return out


def _check_test_labels(train, test, args) -> None:
    """The test file's labels must be classes of the train file (the classifier knows no other)."""
    if (train.sentences2 is None) != (test.sentences2 is None):
        raise UsageError(f"--train {args.train} and --test {args.test} differ in having a second text; give both "
                         "files the --text2-column")
    unknown = sorted(set(test.label_names[i] for i in set(test.labels.tolist())) - set(train.label_names))
    if unknown:
        raise UsageError(f"--test {args.test} has labels that --train {args.train} lacks ({', '.join(unknown[:5])}); "
                         "a classifier predicts only the classes it was trained on")


def _check_results_file(args) -> None:
    """``export --from``: the results file is read (and its subset found) before anything loads."""
    if getattr(args, "command", None) != "export" or not getattr(args, "results", None):
        return
    from layerwise.benchmarks.lc.run import subset_from_results

    try:
        subset_from_results(args.results, head=getattr(args, "head", False))
    except ValueError as exc:
        raise UsageError(f"--from: {' '.join(str(exc).split())}") from None


def _check_model(args) -> None:
    """Resolve ``--model`` (its files are checked, a built-in's weights hash too) and check ``--layer`` against it."""
    import json

    from layerwise.encoders.registry import resolve_model

    resolved = resolve_model(args.model)
    layer = getattr(args, "layer", None)
    if layer is None:
        return
    n_states = int(json.loads((resolved.path / "config.json").read_text())["num_hidden_layers"]) + 1
    if not -n_states <= layer < n_states:
        raise UsageError(f"--layer {layer} is not a hidden state of {resolved.name}: it has {n_states} "
                         f"(0 = embedding output .. {n_states - 1} = last layer, or -1 for the last)")


def _check_backend(args) -> None:
    """``--backend onnx|onnx-int8``: onnxruntime installed (else the extra to install), CPU, float32."""
    from layerwise.encoders.onnx_backend import check_backend

    backend = getattr(args, "backend", "torch")
    if backend == "torch":
        return
    check_backend(backend)
    if getattr(args, "save", None):
        raise UsageError(f"--save fits a LayerCombination, which encodes with torch: run the search with --backend "
                         f"{backend} to compare, and --save without it")
    if getattr(args, "folder", None) is not None:
        raise UsageError(f"--backend {backend} applies to --model; an exported --folder is run by sentence-transformers")
    wrong = [f"{flag} {value}" for flag, value, ok in (("--device", getattr(args, "device", "cpu"), "cpu"),
                                                        ("--dtype", getattr(args, "dtype", "float32"), "float32"))
             if value is not None and str(value).split(":")[0] != ok]
    if wrong:
        raise UsageError(f"--backend {backend} runs the float32 graph on the CPU through onnxruntime: leave out "
                         f"{' and '.join(wrong)}")


_MIN_FREE = 1 << 20  # an output folder with less than 1 MB free is full for any corpus; the writer checks the size


def _check_encode_output(args) -> None:
    """``encode``: OUT's folder (OUT itself with --engine ray) must be writable and not full, before the model loads."""
    import shutil

    out = Path(args.out).expanduser()
    folder = out if getattr(args, "engine", "local") == "ray" else out.parent
    check_writable_folder(folder, "OUTPUT's folder" if folder != out else "OUTPUT")
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < _MIN_FREE:
        raise UsageError(f"OUTPUT {out}: the disk of {probe} is full ({free:,} bytes free); free some space or choose "
                         "an output on another disk")


def preflight(args) -> None:
    """Check the paths, device and data a parsed command will use; raise :class:`UsageError` on the first problem."""
    from layerwise.encoders.registry import layerwise_home

    _check_backend(args)
    if getattr(args, "model_dir", None):
        check_folder(args.model_dir, "MODEL_DIR")
    if getattr(args, "data_dir", None):
        check_folder(args.data_dir, "--data-dir")
    if getattr(args, "output", None):
        check_writable_folder(args.output, "--output")
    if getattr(args, "dest", None):
        check_writable_folder(args.dest, "--dest")
    if getattr(args, "command", None) == "encode" and getattr(args, "out", None):
        _check_encode_output(args)
    if hasattr(args, "cache_dir") and not getattr(args, "no_cache", False):
        cache = args.cache_dir or layerwise_home() / "cache"
        check_writable_folder(cache, "--cache-dir" if args.cache_dir else "the cache folder ($LAYERWISE_HOME/cache)")
    if getattr(args, "device", None):
        check_device(args.device)
    resolve_data_options(args)
    user_files(args)
    _check_data(args)
    _check_results_file(args)
    if getattr(args, "command", None) in ("search", "ablate"):
        _check_dev_size(args)
    if getattr(args, "model", None):
        _check_model(args)
