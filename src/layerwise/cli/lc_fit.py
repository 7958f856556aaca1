"""The lc commands that fit :class:`~layerwise.LayerCombination` on the user's files: ``search --save`` (fitted on
the pairs, or the dev file, and saved) and ``transfer --train FILE [--test FILE]`` (the classification fit, its test
scores against the paper's baselines, and its JSON and markdown)."""

from __future__ import annotations

from pathlib import Path

from layerwise.cli._checks import user_files
from layerwise.cli._common import encoder_options

__all__ = ["run_transfer_files", "save_sts"]


def _estimator(args, **params):
    """A LayerCombination with the command's model and encoder settings."""
    from layerwise.methods.lc.estimator import LayerCombination

    options = encoder_options(args)
    return LayerCombination(args.model, max_layers=args.max_layers, batch_size=options["batch_size"],
                            max_length=options["max_length"], device=options["device"], dtype=options["dtype"],
                            cache_dir=options["cache_dir"], show_progress=not args.quiet, **params)


def save_sts(args, data, name: str) -> None:
    """``search --save``: LayerCombination fitted on ``data`` (all of --pairs, or --dev: ``name``), saved (encoding:
    cached)."""
    est = _estimator(args).fit(data.sentences1, data.sentences2, data.scores)
    out = est.save(args.save, overwrite=args.overwrite)
    print(f"saved LayerCombination fitted on {name} ({len(data)} pairs): hidden states {est.layers_}, "
          f"Spearman x100 {est.score_:.2f}; load it with SentenceTransformer({str(out)!r})")


def run_transfer_files(args, command) -> int:
    """``transfer --train FILE [--test FILE]``: LayerCombination's classification fit on the user's labeled texts."""
    from layerwise.benchmarks.store import keyed_name, model_key
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.reports import environment, write_json, write_text

    files = user_files(args)
    train, test = files["train"], files.get("test")
    if args.shortlist < 0:
        raise ValueError(f"--shortlist must be 0 (exhaustive) or positive, got {args.shortlist}")
    if args.save:
        check_destination(args.save, args.overwrite)  # before the fit, not after it
    est = _estimator(args, n_inner=args.inner_splits, inner=args.inner, shortlist=args.shortlist or None,
                     ridge_alpha=args.ridge_alpha, seed=args.seed, n_jobs=args.jobs)
    labels = [train.label_names[i] for i in train.labels]
    if train.sentences2 is not None:
        est.fit(train.sentences, train.sentences2, labels=labels)
    else:
        est.fit(train.sentences, labels)
    doc = _transfer_file_doc(args, est, train, test)
    doc["environment"] = environment(command)
    key = {"model": model_key(est.model_identity_), "encoder": {"max_length": args.max_length, "dtype": args.dtype},
           "train": doc["train"], "test": doc.get("test", {}).get("file"), "protocol": doc["protocol"]}
    names = [doc["train"]["name"]] + ([doc["test"]["name"]] if test is not None else [])
    stem = keyed_name(f"transfer-{_plain(est.model_identity_.name)}-{'-'.join(names)}", key)
    out = Path(args.output)
    paths = {"json": write_json(out / f"{stem}.json", doc),
             "markdown": write_text(out / f"{stem}.md", _transfer_file_markdown(doc))}
    t = doc["train"]
    print(f"model {est.model_identity_.name} | train {t['name']} ({t['n_texts']} {t['unit']}, {len(t['classes'])} "
          "classes)")
    print(f"chose hidden states {tuple(est.layers_)}: inner accuracy x100 {est.score_:.2f}")
    if test is not None:
        cells = "  ".join(f"{m} {v:.2f}" for m, v in doc["test"]["methods"].items())
        print(f"test {doc['test']['name']} ({doc['test']['n_texts']}): accuracy x100 {cells}")
    if args.save:
        saved = est.save(args.save, overwrite=args.overwrite)
        print(f"saved to {saved}; LayerCombination.load({str(saved)!r}) predicts, SentenceTransformer embeds")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def _transfer_file_doc(args, est, train, test) -> dict:
    """What ``transfer --train`` writes to JSON: the files, the protocol, the choice, the best subsets, the test."""
    from layerwise.data.readers import data_label

    pair = train.sentences2 is not None
    doc = {"kind": "transfer-file", "model": est.model_identity_.to_dict(),
           "train": {"file": str(args.train), "name": data_label(args.train), "n_texts": len(train.labels),
                     "unit": "pairs" if pair else "texts", "pairs": pair, "classes": list(train.label_names)},
           "protocol": {"n_inner": args.inner_splits, "max_layers": int(est.masks_.sum(1).max()),
                        "shortlist": args.shortlist or None, "ridge_alpha": args.ridge_alpha, "seed": args.seed,
                        **({"inner": args.inner} if args.inner != "shuffle" else {})},  # old keys unchanged
           "layers": list(est.layers_), "inner_accuracy": est.score_,
           "top": [{"layers": list(ls), "screen_accuracy": v} for ls, v in est.top(10)]}
    if test is not None:
        labels = [test.label_names[i] for i in test.labels]
        acc = est.score(test.sentences, test.sentences2, labels=labels) if pair else est.score(test.sentences, labels)
        doc["test"] = {"file": str(args.test), "name": data_label(args.test), "n_texts": len(labels), "accuracy": acc,
                       "methods": _baselines_on_test(args, est, train, test)}
    return doc


def _baselines_on_test(args, est, train, test) -> dict[str, float]:
    """Test accuracy x100 of LC and of the paper's baselines (CLS, last layer, last four, a random subset), each
    classifier fitted on all of --train (the layer stacks come back from the layer cache)."""
    import numpy as np

    from layerwise.methods.lc.transfer import TransferFeatures, compare_on_test

    index = {name: i for i, name in enumerate(train.label_names)}

    def features(data, labels) -> TransferFeatures:
        n = len(data.sentences)
        stack = est.encode_layers(list(data.sentences) + list(data.sentences2 or []))
        pair = data.sentences2 is not None
        return TransferFeatures(first=stack.take(np.arange(n)) if pair else stack, labels=labels,
                                n_classes=len(index), second=stack.take(np.arange(n, 2 * n)) if pair else None)

    test_labels = np.array([index[test.label_names[i]] for i in test.labels], dtype=np.int64)
    return compare_on_test(features(train, train.labels), features(test, test_labels), est.layers_, seed=args.seed,
                           n_jobs=args.jobs)


def _inner_words(protocol: dict) -> str:
    """How the inner splits of a ``transfer --train`` run were drawn, in words."""
    if protocol.get("inner", "shuffle") == "kfold":
        return f"{protocol['n_inner']}-fold inner cross-validation"
    return f"{protocol['n_inner']} seeded stratified 82/18 inner splits"


def _transfer_file_markdown(doc: dict) -> str:
    t, p = doc["train"], doc["protocol"]
    lines = [f"# BERT-LC on {t['name']}: {doc['model']['name']}", "",
             f"- train: `{t['file']}` ({t['n_texts']} {t['unit']}, classes {', '.join(t['classes'])})",
             f"- protocol: {_inner_words(p)} (seed {p['seed']}) score every subset "
             f"of at most {p['max_layers']} hidden states; logistic regression fitted on all of train with the chosen "
             "subset",
             f"- chosen hidden states: {tuple(doc['layers'])} (0 = embedding output); inner accuracy x100 "
             f"{doc['inner_accuracy']:.2f}"]
    if "test" in doc:
        lines.append(f"- test: `{doc['test']['file']}` ({doc['test']['n_texts']} {t['unit']}): accuracy x100 "
                     f"{doc['test']['accuracy']:.2f}")
        lines += ["", f"## Test accuracy x100 on {doc['test']['name']} (every classifier fitted on all of train)", "",
                  "| method | accuracy |", "|---|---|",
                  *(f"| {m} | {v:.2f} |" for m, v in doc["test"]["methods"].items())]
    lines += ["", "## Best subsets by the ridge screen (inner accuracy x100)", "", "| hidden states | accuracy |",
              "|---|---|", *(f"| {tuple(r['layers'])} | {r['screen_accuracy']:.2f} |" for r in doc["top"]), ""]
    return "\n".join(lines)


def _plain(name: str) -> str:
    """A model name as a plain file-name part (a folder path: its last part)."""
    return Path(name).name
