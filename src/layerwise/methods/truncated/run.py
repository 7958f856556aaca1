"""One TMFT run end to end: optional pre-step (word similarity or MLM), then STS fine-tuning of the truncated model.

Everything trains through :func:`layerwise.training.train`, so each stage checkpoints into its own folder under
``output/<run name>-<settings digest>/`` (:func:`run_folder`: a run with other epochs, learning rate... gets another
folder) and a killed run continues where it stopped (same model, data and settings, or it is refused).
The MLM stage does not depend on the layer, so its adapted encoder is kept once per model, seed and MLM settings
(``output/mlm/<model>-seed<k>-<digest>/encoder``) and shared by every depth.
Under ``torchrun`` every process runs this code and trains; only rank 0 writes the kept model and the MLM encoder.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from layerwise.data import load_sts, load_wiki_head, snli_sentences
from layerwise.data.checksum import content_checksum
from layerwise.data.wordsim import load_wordsim
from layerwise.encoders import LayerEncoder
from layerwise.encoders.registry import resolve_model
from layerwise.encoders.truncate import count_parameters
from layerwise.evaluation.sts import sts_scores
from layerwise.keys import keyed_name, model_key
from layerwise.methods.truncated.config import TMFTConfig
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import MaskedLMTask, PairRegressionTask, PairSet, pair_spearman
from layerwise.training import TrainingConfig, seed_everything, steps_per_epoch, train
from layerwise.training.checkpoint import STATE_JSON
from layerwise.training.distributed import local_device, run_on_main

logger = logging.getLogger(__name__)

__all__ = ["TMFTResult", "mlm_sentences", "run_folder", "run_tmft", "stsb_pairs", "wordsim_pairs"]


@dataclass(frozen=True)
class TMFTResult:
    """One TMFT run: STS-B scores x100 of the checkpoint with the best dev Spearman, size and time."""

    config: dict  # TMFTConfig as a dict
    model: dict  # the starting model's identity (weights, tokenizer, config hashes)
    parameters: int  # truncated encoder, pooler excluded
    full_parameters: int  # the whole encoder, pooler excluded
    dev_spearman: float  # best STS-B dev Spearman (the selection)
    test_spearman: float
    test_pearson: float
    steps: int  # STS optimisation steps
    train_seconds: float  # STS optimisation only (this invocation; resumed runs count their last part)
    pre_step: dict | None  # what the pre-step did and scored
    data: dict  # checksums of every data set used
    saved_model: str | None  # the sentence-transformers folder of the kept checkpoint

    def to_dict(self) -> dict:
        return asdict(self)


def stsb_pairs(data_dir=None, limit: int | None = None) -> tuple[PairSet, PairSet, object]:
    """STS-B train (targets gold / 5), dev (gold), and the test STSData."""
    tr, dev, test = (load_sts("stsb", data_dir=data_dir, split=s) for s in ("train", "dev", "test"))
    n = len(tr) if limit is None else min(limit, len(tr))
    train_set = PairSet(tuple(tr.sentences1[:n]), tuple(tr.sentences2[:n]), np.asarray(tr.scores[:n]) / 5.0,
                        "stsb-train")
    return train_set, PairSet(tuple(dev.sentences1), tuple(dev.sentences2), np.asarray(dev.scores), "stsb-dev"), test


def wordsim_pairs(config: TMFTConfig, data_dir=None) -> tuple[PairSet, PairSet, PairSet]:
    """The word pairs of ``config.ws.sets`` pooled (each file's scores divided by its maximum) and split
    train/dev/test by ``config.ws.split`` with ``config.seed``."""
    w1, w2, y = [], [], []
    for name in config.ws.sets:
        d = load_wordsim(name, data_dir)
        w1 += d.words1
        w2 += d.words2
        y.append(d.scores / d.scores.max())
    y = np.concatenate(y)
    order = np.random.default_rng([config.seed, 70_15_15]).permutation(len(y))
    a = int(round(config.ws.split[0] * len(y)))
    b = a + int(round(config.ws.split[1] * len(y)))
    parts = [order[:a], order[a:b], order[b:]]
    if min(len(p) for p in parts) < 2:
        raise ValueError(f"{len(y)} word pairs are too few for a {config.ws.split} split: each part needs 2 pairs")
    return tuple(PairSet(tuple(w1[i] for i in p), tuple(w2[i] for i in p), y[p], f"wordsim-{n}")
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


def _train(task, loop: TrainingConfig, folder: Path, show_progress):
    resume = (folder / "last" / STATE_JSON).is_file()
    return train(task, loop, output_dir=folder, resume=resume, overwrite=not resume, show_progress=show_progress,
                 restore_best=True)


def _ws_step(model: TruncatedModel, config: TMFTConfig, data_dir, folder: Path, show_progress) -> dict:
    tr, dev, test = wordsim_pairs(config, data_dir)
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


def _mlm_encoder(config: TMFTConfig, data_dir, output: Path, show_progress, device=None) -> tuple[Path, dict]:
    """The MLM-adapted encoder folder of (model, seed), trained once and reused for every depth."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    shared = {"model": config.model, "mlm": asdict(config.mlm), "max_length": config.max_length,
              "weight_decay": config.weight_decay, "max_grad_norm": config.max_grad_norm}
    root = output / "mlm" / keyed_name(f"{Path(config.model).name}-seed{config.seed}", shared)
    texts = mlm_sentences(config, data_dir)
    m = config.mlm
    per_epoch = steps_per_epoch(len(texts), m.batch_size * m.grad_accumulation)
    info = {"kind": "mlm", "sentences": len(texts), "steps": m.epochs * per_epoch, "data": content_checksum(texts),
            "head": "fresh MLM head (transform + decoder tied to the input embeddings): the checkpoint has none"}
    if (root / "encoder" / "config.json").is_file():
        return root / "encoder", info
    path = resolve_model(config.model).path
    seed_everything(config.seed)  # the fresh head's initialisation
    mlm = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True).to(local_device(device))
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    # a checkpoint every tenth of the run (MLM has no dev score): a cut-off step resumes instead of starting again
    loop = TrainingConfig(steps=info["steps"], grad_accumulation=m.grad_accumulation, weight_decay=config.weight_decay,
                          max_grad_norm=config.max_grad_norm, seed=config.seed, eval_every=max(1, info["steps"] // 10))
    task = MaskedLMTask(mlm, tok, texts, m, seed=config.seed, max_length=config.max_length)
    run = train(task, loop, output_dir=root / "train", resume=(root / "train" / "last" / STATE_JSON).is_file(),
                overwrite=not (root / "train" / "last" / STATE_JSON).is_file(), show_progress=show_progress)
    info["final_loss"] = float(np.mean(run.loss[-10:]))
    run_on_main(_save_encoder, mlm, tok, root / "encoder")  # rank 0 writes; every process then reads it
    return root / "encoder", info


def _save_encoder(mlm, tokenizer, folder: Path) -> None:
    mlm.base_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def run_folder(config: TMFTConfig, output: str | Path) -> Path:
    """``output/<config.name>-<first 8 hex digits of the digest of every setting>``: one folder per distinct run."""
    return Path(output) / keyed_name(config.name, config.to_dict())


def run_tmft(config: TMFTConfig, *, data_dir=None, output: str | Path = "runs/tmft",
             show_progress: bool | None = None, device: str | None = None) -> TMFTResult:
    """Run ``config``; checkpoints and the kept model go under ``output`` (see the module docstring).

    ``device``: where the model trains (None: cpu; "cuda" under torchrun: each process its LOCAL_RANK GPU). It is
    not a setting of the run (not in its folder name or results key): the same run on another device.
    """
    output = Path(output)
    folder = run_folder(config, output)
    train_set, dev_set, test = stsb_pairs(data_dir, config.train_limit)  # data first: fail before any model loads
    identity = LayerEncoder(config.model, cache_dir=False, show_progress=False).identity
    start, pre = config.model, None
    if config.pre_step == "mlm":
        start, pre = _mlm_encoder(config, data_dir, output, show_progress, device)
    seed_everything(config.seed)
    model = TruncatedModel.from_pretrained(str(start), config.layers, max_length=config.max_length)
    model.to(local_device(device))
    if config.pre_step == "ws":
        pre = _ws_step(model, config, data_dir, folder / "ws", show_progress)
    per_epoch = steps_per_epoch(len(train_set), config.batch_size)
    loop = TrainingConfig(steps=config.epochs * per_epoch, weight_decay=config.weight_decay,
                          max_grad_norm=config.max_grad_norm, eval_every=per_epoch, seed=config.seed)
    task = PairRegressionTask(model, train_set, batch_size=config.batch_size, lr=config.lr, seed=config.seed,
                              dev=dev_set, description=f"tmft sts L{config.layers}")
    run = _train(task, loop, folder / "sts", show_progress)
    scores = sts_scores(model.encode(list(test.sentences1)), model.encode(list(test.sentences2)), test.scores)
    saved = run_on_main(model.save, folder / "model", provenance={"config": config.to_dict(), "model": model_key(identity)})
    return TMFTResult(
        config=config.to_dict(), model=model_key(identity), parameters=model.n_parameters(),
        full_parameters=_full_parameters(config.model), dev_spearman=float(run.best_dev),
        test_spearman=float(scores["spearman"]), test_pearson=float(scores["pearson"]), steps=loop.steps,
        train_seconds=run.train_seconds, pre_step=pre,
        data={"stsb": content_checksum([train_set, dev_set, test])}, saved_model=str(saved))


def _full_parameters(model: str) -> int:
    from transformers import AutoConfig, AutoModel

    path = resolve_model(model).path
    return count_parameters(AutoModel.from_config(AutoConfig.from_pretrained(path, local_files_only=True)))
