"""One encoder, a head per task, and what each head reads: the last layer, its own layer mix, or a layer subset.

Each task's sentence embedding u (B, d) comes from the masked-mean vectors of every hidden state, m (B, K, d)
(K = L + 1, state 0 the embedding output, K - 1 the last layer):

    layers="last"     u = m[:, K - 1]                                  (mean pooling, the report's)
    layers="mix"      u = gamma_t * sum_k softmax(w_t)_k m[:, k]         (a ScalarMix per task t)
    layers="subset"   u = mean_{k in S_t} m[:, k]                        (a fixed subset per task)

Each task may also choose for itself (``mix_tasks``: a ScalarMix for those tasks; ``subsets``: a fixed subset, one
hidden state k being the subset (k,)); a task with neither reads the last layer. FREEZE_SST's transformer head
reads the last layer's token states instead (and gets no mix). Saved as one folder: ``encoder/`` (Hugging Face
model and tokenizer), ``heads/<task>/``, ``mixes/<task>/`` and ``shared/`` (each in the
:class:`~layerwise.modules.base.Module` format) and ``multitask_model.json`` (format version, head classes,
layer mode, subsets, mixed tasks, max_length), written into a temporary sibling and renamed into place;
:meth:`MultitaskNetwork.save_heads` writes all but ``encoder/`` (beside an encoder saved elsewhere).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from layerwise.encoders.batching import cut_texts
from layerwise.encoders.hidden_states import pool_hidden_states
from layerwise.encoders.model_files import check_model_folder
from layerwise.files import atomic_folder
from layerwise.finite import check_finite_weights
from layerwise.modules import heads as head_modules
from layerwise.modules.heads import SharedHidden
from layerwise.modules.scalar_mix import ScalarMix

__all__ = ["MODEL_FILE", "MultitaskNetwork", "build_heads", "is_multitask_folder"]

MODEL_FILE = "multitask_model.json"
FORMAT_VERSION = 1
HEAD_CLASSES = {c.__name__: c for c in (head_modules.ClassificationHead, head_modules.PairHead,
                                        head_modules.CosineHead, head_modules.PrototypeHead,
                                        head_modules.TransformerClassificationHead)}


def is_multitask_folder(folder: str | Path) -> bool:
    folder = Path(folder)
    return (folder / MODEL_FILE).is_file() and (folder / "encoder").is_dir()


def build_heads(config, hidden_size: int, n_classes: int, n_heads: int) -> tuple[dict, nn.Module | None]:
    """The heads of a MultitaskConfig ({"sst", "para", "sts"} -> Module) and the shared hidden layers (or None)."""
    h = head_modules
    drop = config.dropout
    if config.sst_prototypes:  # with freeze_sst too (SST_TO_STS+FROZEN, the report's protocol)
        sst = h.PrototypeHead(hidden_size, config.sst_prototypes * n_classes, n_classes, drop)
    elif config.freeze_sst:
        sst = h.TransformerClassificationHead(hidden_size, n_classes, config.sst_transformer_layers, n_heads, drop)
    else:
        sst = h.ClassificationHead(hidden_size, n_classes, drop)
    shared = None
    width = 0
    if config.shared_layers:
        shared = h.SharedHidden(h.pair_features_dim(config.para_features, hidden_size), hidden_size,
                                config.shared_layers, drop)
        width = hidden_size
    para = h.PairHead(hidden_size, config.para_features, drop, width)
    sts = h.CosineHead(drop) if config.sts_head == "cosine" else h.PairHead(hidden_size, "concat", drop, width)
    return {"sst": sst, "para": para, "sts": sts}, shared


class MultitaskNetwork(nn.Module):
    """Encoder + task heads. ``subsets`` maps a task to its hidden-state indices (layers="subset", or any task that
    reads fixed states); ``mix_tasks`` names the tasks with a layer mix of their own (layers="mix": every task)."""

    def __init__(self, encoder, tokenizer, heads: dict, *, shared: nn.Module | None = None, layers: str = "last",
                 subsets: dict | None = None, max_length: int = 128, mix_tasks=()):
        super().__init__()
        self.encoder, self.tokenizer = encoder, tokenizer
        self.heads = nn.ModuleDict(heads)
        self.shared = shared
        self.layers, self.max_length = layers, int(max_length)
        self.n_states = encoder.config.num_hidden_layers + 1
        reads_tokens = {t for t, h in heads.items() if isinstance(h, head_modules.TransformerClassificationHead)}
        mixed = [t for t in heads if t not in reads_tokens] if layers == "mix" else list(mix_tasks)
        if set(mixed) - set(heads) or set(mixed) & reads_tokens:
            raise ValueError(f"mix_tasks {list(mix_tasks)} are invalid: name tasks with heads that read sentence "
                             f"embeddings ({sorted(set(heads) - reads_tokens)})")
        self.mixes = nn.ModuleDict({t: ScalarMix(self.n_states) for t in mixed})
        self.subsets = {t: tuple(int(k) for k in s) for t, s in (subsets or {}).items()}
        bad = {t: s for t, s in self.subsets.items() if not s or min(s) < 0 or max(s) >= self.n_states}
        if bad:
            raise ValueError(f"subsets {bad} are invalid: use non-empty tuples of hidden states 0..{self.n_states - 1}")

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def encode_texts(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``mean`` (B, K, d) per-state masked means, ``tokens`` (B, T, d) last-layer states, ``mask`` (B, T)."""
        enc = self.tokenizer(cut_texts(texts, self.max_length), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        out = self.encoder(**enc, output_hidden_states=True)
        _, mean = pool_hidden_states(out.hidden_states, enc["attention_mask"])
        return mean, out.hidden_states[-1], enc["attention_mask"]

    def embed(self, task: str, mean: torch.Tensor) -> torch.Tensor:
        """The embedding task ``task`` reads: (B, K, d) -> (B, d) (see the module docstring)."""
        if task in self.mixes:
            return self.mixes[task](mean)
        if task in self.subsets:
            return mean[:, list(self.subsets[task])].mean(1)
        if self.layers == "subset":
            raise ValueError(f"layers='subset' but no subset was set for task {task!r}; set model.subsets[{task!r}]"
                             " (run_experiment chooses them with layer_choice.choose_subsets)")
        return mean[:, -1]

    def logits(self, task: str, texts: list[str]) -> torch.Tensor:
        """(B, n_classes) logits of the single-text classification task ``task``."""
        mean, tokens, mask = self.encode_texts(texts)
        head = self.heads[task]
        if isinstance(head, head_modules.TransformerClassificationHead):
            return head(tokens, mask)
        return head(self.embed(task, mean))

    def sst_logits(self, texts: list[str]) -> torch.Tensor:
        """(B, n_classes) sentiment logits."""
        return self.logits("sst", texts)

    def pair_scores(self, task: str, first: list[str], second: list[str]) -> torch.Tensor:
        """(B,) PARA logits or STS predictions (of gold / 5) of sentence pairs ((B, C) logits from a pair head with C
        outputs); one encoder pass for both sides."""
        mean, _, _ = self.encode_texts(list(first) + list(second))
        u, v = self.embed(task, mean).split(len(first))
        head = self.heads[task]
        if isinstance(head, head_modules.PairHead):
            return head(u, v, self.shared if head.shared_size else None)
        return head(u, v)

    def sentence_embeddings(self, texts: list[str]) -> torch.Tensor:
        """(B, d) last-layer mean embeddings (what NLI pre-finetuning trains)."""
        return self.encode_texts(texts)[0][:, -1]

    def layer_weights(self) -> dict[str, list[float]]:
        """softmax(w_t) of each task's layer mix (layers="mix"), else {}."""
        return {t: m.mixing_weights().detach().cpu().tolist() for t, m in self.mixes.items()}

    def save(self, folder: str | Path) -> Path:
        """Write the encoder, heads, mixes, shared layers and ``multitask_model.json`` into ``folder`` atomically."""
        folder = Path(folder)
        with atomic_folder(folder, replaceable=is_multitask_folder) as tmp:
            self.encoder.save_pretrained(tmp / "encoder")
            self.tokenizer.save_pretrained(tmp / "encoder")
            self.save_heads(tmp)
        return folder

    def save_heads(self, folder: str | Path) -> Path:
        """Write the heads, mixes, shared layers and ``multitask_model.json`` (everything but the encoder) into the
        existing or new ``folder`` (not atomic by itself: write into a folder that is renamed into place)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for task, head in self.heads.items():
            head.save(folder / "heads" / task)
        for task, mix in self.mixes.items():
            mix.save(folder / "mixes" / task)
        if self.shared is not None:
            self.shared.save(folder / "shared")
        info = {"format_version": FORMAT_VERSION, "max_length": self.max_length, "layers": self.layers,
                "heads": {t: type(h).__name__ for t, h in self.heads.items()},
                "shared": self.shared is not None, "subsets": {t: list(s) for t, s in self.subsets.items()},
                "mix_tasks": list(self.mixes)}
        (folder / MODEL_FILE).write_text(json.dumps(info, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "MultitaskNetwork":
        """The model saved in ``folder`` (by :meth:`save` or a training checkpoint), in eval mode."""
        folder = Path(folder)
        if not is_multitask_folder(folder):
            raise FileNotFoundError(f"{folder} holds no saved MultitaskNetwork (encoder/ and {MODEL_FILE}); pass a "
                                    "folder written by MultitaskNetwork.save or `layerwise multitask` (best/ or last/)")
        return cls.load_parts(folder / "encoder", folder)

    @classmethod
    def load_parts(cls, encoder: str | Path, heads: str | Path) -> "MultitaskNetwork":
        """The model whose encoder (Hugging Face model + tokenizer) is in ``encoder`` and whose heads
        :meth:`save_heads` wrote into ``heads``, in eval mode."""
        from transformers import AutoModel, AutoTokenizer

        folder = Path(heads)
        if not (folder / MODEL_FILE).is_file():
            raise FileNotFoundError(f"{folder} holds no {MODEL_FILE}: pass a folder written by "
                                    "MultitaskNetwork.save_heads")
        info = json.loads((folder / MODEL_FILE).read_text())
        if not isinstance(info, dict) or info.get("format_version") != FORMAT_VERSION:
            found = info.get("format_version") if isinstance(info, dict) else type(info).__name__
            raise ValueError(f"{folder / MODEL_FILE} has format {found}, expected {FORMAT_VERSION}")
        unknown = sorted(set(info["heads"].values()) - set(HEAD_CLASSES))
        if unknown:
            raise ValueError(f"{folder / MODEL_FILE} names unknown head classes {unknown}; "
                             f"valid: {sorted(HEAD_CLASSES)}")
        check_model_folder(encoder)  # sizes against the weights before anything is allocated
        heads = {t: HEAD_CLASSES[c].load(folder / "heads" / t) for t, c in info["heads"].items()}
        shared = SharedHidden.load(folder / "shared") if info["shared"] else None
        model = cls(AutoModel.from_pretrained(encoder, local_files_only=True),
                    AutoTokenizer.from_pretrained(encoder, local_files_only=True), heads, shared=shared,
                    layers=info["layers"], subsets=info["subsets"], max_length=info["max_length"],
                    mix_tasks=info.get("mix_tasks", ()))
        for task, mix in model.mixes.items():
            mix.load_weights(folder / "mixes" / task)
        check_finite_weights(model.encoder, str(encoder))
        return model.eval()

    def load_weights(self, folder: str | Path) -> "MultitaskNetwork":
        """Copy every weight saved in ``folder`` into this model (same architecture)."""
        self.load_state_dict(type(self).load(folder).state_dict())
        return self
