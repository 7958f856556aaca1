"""TMFT: optional pre-step (word similarity or MLM), then STS fine-tuning of the truncated model.

:func:`fine_tune` is the method on the caller's data (the estimator's and the run's common part); :func:`run_tmft`
is one run of the paper's protocol on the built-in data (STS-B, or SICK-R with ``config.dataset``; the
word-similarity sets, SNLI + wiki sentences), scored on that set's test split and saved.
Everything trains through :func:`layerwise.training.train`, so each stage checkpoints into its own folder under
``output/<run name>-<settings digest>/`` (:func:`run_folder`: a run with other epochs, learning rate... gets another
folder) and a killed run continues where it stopped (same model, data and settings, or it is refused).
The MLM stage does not depend on the layer, so its adapted encoder is kept once per model, seed and MLM settings
(``output/mlm/<model>-seed<k>-<digest>/encoder``) and shared by every depth.
Under ``torchrun`` every process runs this code and trains; only rank 0 writes the kept model and the MLM encoder.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from layerwise.data import load_sts, load_wiki_head, snli_sentences
from layerwise.data.checksum import content_checksum
from layerwise.data.wordsim import load_wordsim
from layerwise.encoders import LayerEncoder
from layerwise.encoders.registry import resolve_model
from layerwise.encoders.truncate import count_parameters
from layerwise.evaluation.metrics import cosine_rows
from layerwise.evaluation.sts import sts_scores
from layerwise.evaluation.unit_outputs import pack_ranks
from layerwise.keys import keyed_name, model_key
from layerwise.methods.truncated.config import TMFTConfig
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import MaskedLMTask, PairRegressionTask, PairSet, pair_spearman
from layerwise.training import TrainingConfig, TrainingRun, seed_everything, steps_per_epoch, train
from layerwise.training.checkpoint import STATE_JSON
from layerwise.training.distributed import local_device, run_on_main

logger = logging.getLogger(__name__)

__all__ = ["TMFTData", "TMFTFit", "TMFTResult", "fine_tune", "mlm_folder", "mlm_sentences", "run_folder", "run_tmft",
           "split_word_pairs", "sts_pairs", "wordsim_pairs"]


@dataclass(frozen=True)
class TMFTResult:
    """One TMFT run: test scores x100 (STS-B, or ``config["dataset"]``) of the checkpoint with the best dev
    Spearman, size and time."""

    config: dict  # TMFTConfig as a dict
    model: dict  # the starting model's identity (weights, tokenizer, config hashes)
    parameters: int  # truncated encoder, pooler excluded
    full_parameters: int  # the whole encoder, pooler excluded
    dev_spearman: float  # best dev Spearman (the selection; SICK-R: its trial split)
    test_spearman: float
    test_pearson: float
    steps: int  # STS optimisation steps
    train_seconds: float  # STS optimisation only (this invocation; resumed runs count their last part)
    pre_step: dict | None  # what the pre-step did and scored
    data: dict  # checksums of every data set used
    saved_model: str | None  # the sentence-transformers folder of the kept checkpoint
    # each test pair's cosine as its dense rank (evaluation.unit_outputs.pack_ranks): what a paired test of two runs
    # reads; None: a result stored before it was kept
    test_predictions: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


# built-in scored pairs: (train, dev, test) split names and the gold scale mapped to [0, 1] for the targets
_SPLITS = {"stsb": (("train", "dev", "test"), (0.0, 5.0)), "sickr": (("train", "trial", "test"), (1.0, 5.0))}


def sts_pairs(dataset: str = "stsb", data_dir=None, limit: int | None = None) -> tuple[PairSet, PairSet, object]:
    """A built-in set's train pairs (targets: gold mapped from its scale to [0, 1]: STS-B 0-5 / 5, SICK-R 1-5
    (gold - 1) / 4), its dev pairs (gold; SICK-R: the trial split) and its test STSData."""
    if dataset not in _SPLITS:
        raise ValueError(f"dataset={dataset!r}: use one of {', '.join(_SPLITS)} (or your own pairs with --train)")
    (train, dev_split, test_split), (lo, hi) = _SPLITS[dataset]
    tr, dev, test = (load_sts(dataset, data_dir=data_dir, split=s) for s in (train, dev_split, test_split))
    n = len(tr) if limit is None else min(limit, len(tr))
    targets = (np.asarray(tr.scores[:n]) - lo) / (hi - lo)
    train_set = PairSet(tuple(tr.sentences1[:n]), tuple(tr.sentences2[:n]), targets, f"{dataset}-train")
    return train_set, PairSet(tuple(dev.sentences1), tuple(dev.sentences2), np.asarray(dev.scores),
                              f"{dataset}-{dev_split}"), test


def wordsim_pairs(config: TMFTConfig, data_dir=None) -> tuple[PairSet, PairSet, PairSet]:
    """The word pairs of ``config.ws.sets`` pooled (each file's scores divided by its maximum) and split
    train/dev/test by ``config.ws.split`` with ``config.seed``."""
    w1, w2, y = [], [], []
    for name in config.ws.sets:
        d = load_wordsim(name, data_dir)
        w1 += d.words1
        w2 += d.words2
        y.append(d.scores / d.scores.max())
    return split_word_pairs(w1, w2, np.concatenate(y), config.ws.split, config.seed)


def split_word_pairs(words1, words2, targets, split: tuple[float, float, float], seed: int,
                     ) -> tuple[PairSet, PairSet, PairSet]:
    """Word pairs with targets in [0, 1] split train/dev/test by the fractions ``split``, shuffled with ``seed``."""
    y = np.asarray(targets, dtype=np.float64)
    order = np.random.default_rng([seed, 70_15_15]).permutation(len(y))
    a = int(round(split[0] * len(y)))
    b = a + int(round(split[1] * len(y)))
    parts = [order[:a], order[a:b], order[b:]]
    if min(len(p) for p in parts) < 2:
        raise ValueError(f"{len(y)} word pairs are too few for a {tuple(split)} train/dev/test split: each part "
                         "needs 2 pairs; give more word pairs")
    return tuple(PairSet(tuple(words1[i] for i in p), tuple(words2[i] for i in p), y[p], f"wordsim-{n}")
                 for p, n in zip(parts, ("train", "dev", "test"), strict=True))


def mlm_sentences(config: TMFTConfig, data_dir=None) -> list[str]:
    """Unlabeled sentences for MLM: SNLI dev+test and the wiki1m head, a seeded sample of ``limit`` if set."""
    texts: list[str] = []
    for source in config.mlm.sources:
        texts += snli_sentences(data_dir) if source == "snli" else load_wiki_head(data_dir)
    texts = list(dict.fromkeys(texts))
    if config.mlm.limit is not None and config.mlm.limit < len(texts):
        keep = np.sort(np.random.default_rng(config.seed).choice(len(texts), config.mlm.limit, replace=False))
        texts = [texts[i] for i in keep]
    return texts


@dataclass
class TMFTFit:
    """What :func:`fine_tune` trained (before any test evaluation or save)."""

    model: TruncatedModel  # the truncated encoder + pooling, with the weights of the best dev score (or the last)
    run: TrainingRun  # the STS stage's history: loss per step, dev score per epoch, best dev (None without dev)
    steps: int  # STS optimisation steps
    pre_step: dict | None  # what the pre-step did and scored (None: no pre-step)


@dataclass(frozen=True)
class TMFTData:
    """The data :func:`fine_tune` trains on: ``train`` pairs with targets in [0, 1]; ``dev`` pairs with gold scores
    on any scale, whose Spearman picks the epoch kept (None: the last epoch is kept); ``word_pairs``: train/dev/test
    word pairs (targets in [0, 1]) for the ``"ws"`` pre-step; ``mlm_texts``: the sentences of the ``"mlm"`` one."""

    train: PairSet
    dev: PairSet | None = None
    word_pairs: tuple[PairSet, PairSet, PairSet] | None = None
    mlm_texts: list[str] | None = None


def fine_tune(config: TMFTConfig, data: TMFTData, *, folder: Path | None = None, mlm_folder: Path | None = None,
              show_progress: bool | None = None, device: str | None = None) -> TMFTFit:
    """The method on given data: the optional pre-step, then STS fine-tuning of the encoder cut at max(layers).

    ``data``: what it trains on (:class:`TMFTData`). ``folder``: checkpoints of each stage (``ws/``, ``sts/``), a
    cut-off call resumes from them (None: trained in memory); ``mlm_folder``: where the MLM-adapted encoder is kept
    and reused (None: a temporary folder). Only ``config.model``, ``layers``, ``pre_step``, the optimisation
    settings, ``ws`` (epochs, batch size, lr) and ``mlm`` (epochs, batch size, accumulation, lr, masking) are read:
    the data is what is passed.
    """
    train_set, dev_set, word_pairs, mlm_texts = data.train, data.dev, data.word_pairs, data.mlm_texts
    if (config.pre_step == "ws") != (word_pairs is not None) or (config.pre_step == "mlm") != (mlm_texts is not None):
        raise ValueError(f"pre_step {config.pre_step!r} takes word_pairs only for 'ws' and mlm_texts only for 'mlm'")
    pre = None
    if config.pre_step == "mlm":
        model, pre = _mlm_step(config, mlm_texts, mlm_folder, show_progress, device)
    else:
        seed_everything(config.seed)
        model = TruncatedModel.from_pretrained(config.model, config.layers, max_length=config.max_length)
    model.to(local_device(device))
    if config.pre_step == "ws":
        pre = _ws_step(model, config, word_pairs, _sub(folder, "ws"), show_progress)
    per_epoch = steps_per_epoch(len(train_set), config.batch_size)
    loop = TrainingConfig(steps=config.epochs * per_epoch, weight_decay=config.weight_decay,
                          max_grad_norm=config.max_grad_norm, eval_every=per_epoch, seed=config.seed)
    task = PairRegressionTask(model, train_set, batch_size=config.batch_size, lr=config.lr, seed=config.seed,
                              dev=dev_set, description=f"tmft sts L{config.layers}")
    run = _train(task, loop, _sub(folder, "sts"), show_progress)
    return TMFTFit(model=model, run=run, steps=loop.steps, pre_step=pre)


def _sub(folder: Path | None, name: str) -> Path | None:
    return None if folder is None else Path(folder) / name


def _train(task, loop: TrainingConfig, folder: Path | None, show_progress):
    resume = folder is not None and (folder / "last" / STATE_JSON).is_file()
    return train(task, loop, output_dir=folder, resume=resume, overwrite=folder is not None and not resume,
                 show_progress=show_progress, restore_best=True)


def _ws_step(model: TruncatedModel, config: TMFTConfig, pairs: tuple[PairSet, PairSet, PairSet],
             folder: Path | None, show_progress) -> dict:
    tr, dev, test = pairs
    ws = config.ws
    per_epoch = steps_per_epoch(len(tr), ws.batch_size)
    loop = TrainingConfig(steps=ws.epochs * per_epoch, weight_decay=config.weight_decay,
                          max_grad_norm=config.max_grad_norm, eval_every=per_epoch, seed=config.seed)
    task = PairRegressionTask(model, tr, batch_size=ws.batch_size, lr=ws.lr, seed=config.seed, dev=dev,
                              description="tmft ws")
    run = _train(task, loop, folder, show_progress)
    return {"kind": "ws", "dev_spearman": run.best_dev, "test_spearman": pair_spearman(model, test),
            "pairs": [len(tr), len(dev), len(test)], "steps": loop.steps,
            "data": content_checksum([tr, dev, test])}


def mlm_folder(config: TMFTConfig, output: str | Path, data: str | None = None) -> Path:
    """``output/mlm/<model>-seed<k>-<digest>``: the MLM-adapted encoder of (model, seed, MLM settings), shared by
    every depth; ``data`` (a content checksum of the sentences) joins the key when they are the caller's own."""
    shared = {"model": config.model, "mlm": asdict(config.mlm), "max_length": config.max_length,
              "weight_decay": config.weight_decay, "max_grad_norm": config.max_grad_norm}
    if data is not None:
        shared["data"] = data
    return Path(output) / "mlm" / keyed_name(f"{Path(config.model).name}-seed{config.seed}", shared)


def _mlm_step(config: TMFTConfig, texts: list[str], root: Path | None, show_progress,
              device=None) -> tuple[TruncatedModel, dict]:
    """MLM on ``texts`` (the encoder kept in ``root/encoder`` and reused; None: a temporary folder), then the
    adapted encoder truncated at max(layers)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    m = config.mlm
    per_epoch = steps_per_epoch(len(texts), m.batch_size * m.grad_accumulation)
    info = {"kind": "mlm", "sentences": len(texts), "steps": m.epochs * per_epoch, "data": content_checksum(texts),
            "head": "fresh MLM head (transform + decoder tied to the input embeddings): the checkpoint has none"}
    with contextlib.ExitStack() as stack:
        temporary = root is None
        if temporary:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tmft-mlm-")))
        if not (root / "encoder" / "config.json").is_file():
            path = resolve_model(config.model).path
            seed_everything(config.seed)  # the fresh head's initialisation
            mlm = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True).to(local_device(device))
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
            # a checkpoint every tenth of the run (MLM has no dev score): a cut-off step resumes, not starts again
            loop = TrainingConfig(steps=info["steps"], grad_accumulation=m.grad_accumulation,
                                  weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm,
                                  seed=config.seed, eval_every=max(1, info["steps"] // 10))
            task = MaskedLMTask(mlm, tok, texts, m, seed=config.seed, max_length=config.max_length)
            checkpoints = None if temporary else root / "train"
            resume = checkpoints is not None and (checkpoints / "last" / STATE_JSON).is_file()
            run = train(task, loop, output_dir=checkpoints, resume=resume,
                        overwrite=checkpoints is not None and not resume, show_progress=show_progress)
            info["final_loss"] = float(np.mean(run.loss[-10:]))
            if temporary:  # each process its own folder
                _save_encoder(mlm, tok, root / "encoder")
            else:  # rank 0 writes; every process then reads it
                run_on_main(_save_encoder, mlm, tok, root / "encoder")
        seed_everything(config.seed)
        model = TruncatedModel.from_pretrained(str(root / "encoder"), config.layers, max_length=config.max_length)
    return model, info


def _save_encoder(mlm, tokenizer, folder: Path) -> None:
    mlm.base_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def run_folder(config: TMFTConfig, output: str | Path) -> Path:
    """``output/<config.name>-<first 8 hex digits of the digest of every setting>``: one folder per distinct run."""
    return Path(output) / keyed_name(config.name, config.to_dict())


def run_tmft(config: TMFTConfig, *, data_dir=None, output: str | Path = "runs/tmft",
             show_progress: bool | None = None, device: str | None = None) -> TMFTResult:
    """Run ``config`` on the built-in data (``config.dataset``: STS-B or SICK-R; word pairs of ``config.ws.sets``; MLM sentences of
    ``config.mlm.sources``); checkpoints and the kept model go under ``output`` (see the module docstring).

    ``device``: where the model trains (None: cpu; "cuda" under torchrun: each process its LOCAL_RANK GPU). It is
    not a setting of the run (not in its folder name or results key): the same run on another device.
    """
    output = Path(output)
    folder = run_folder(config, output)
    train_set, dev_set, test = sts_pairs(config.dataset, data_dir, config.train_limit)  # before any model loads
    word_pairs = wordsim_pairs(config, data_dir) if config.pre_step == "ws" else None
    texts = mlm_sentences(config, data_dir) if config.pre_step == "mlm" else None
    identity = LayerEncoder(config.model, cache_dir=False, show_progress=False).identity
    fit = fine_tune(config, TMFTData(train_set, dev_set, word_pairs, texts), folder=folder,
                    mlm_folder=mlm_folder(config, output), show_progress=show_progress, device=device)
    model, run = fit.model, fit.run
    emb1, emb2 = model.encode(list(test.sentences1)), model.encode(list(test.sentences2))
    scores = sts_scores(emb1, emb2, test.scores)
    saved = run_on_main(model.save, folder / "model", provenance={"config": config.to_dict(), "model": model_key(identity)})
    return TMFTResult(
        config=config.to_dict(), model=model_key(identity), parameters=model.n_parameters(),
        full_parameters=_full_parameters(config.model), dev_spearman=float(run.best_dev),
        test_spearman=float(scores["spearman"]), test_pearson=float(scores["pearson"]), steps=fit.steps,
        train_seconds=run.train_seconds, pre_step=fit.pre_step,
        data={config.dataset: content_checksum([train_set, dev_set, test])}, saved_model=str(saved),
        test_predictions=pack_ranks(cosine_rows(emb1, emb2)))


def _full_parameters(model: str) -> int:
    from transformers import AutoConfig, AutoModel

    path = resolve_model(model).path
    return count_parameters(AutoModel.from_config(AutoConfig.from_pretrained(path, local_files_only=True)))
