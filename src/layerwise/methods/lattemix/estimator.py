"""``LatteMix``: Latte-Mix as an estimator (fit on an unlabeled corpus; compare, encode, save, load).

    lm = LatteMix("all-MiniLM-L6-v2", layer=-1, kind="categorical").fit(corpus)   # list of str, no labels
    lm.similarity(sentences1, sentences2, measure="js")   # (n,) one value per pair, higher = more similar
    lm.mixtures(sentences).probs                            # (n, n_groups, n_classes): each row of a group sums to 1
    lm.encode(sentences)                                    # (n, n_groups * n_classes): the mixtures, flattened
    lm.save("my-lattemix")                                  # a sentence-transformers folder; LatteMix.load reads it

``fit`` encodes the token vectors of hidden state ``layer`` of the corpus with the frozen encoder and trains the
token model (:func:`~layerwise.methods.lattemix.train.train_on_token_stack`, through the shared training loop);
a sentence is then the mixture of its tokens' posteriors (:func:`~layerwise.methods.lattemix.similarity.sentence_mixtures`).
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
from pathlib import Path

import numpy as np
import torch

from layerwise.base import SentenceEstimator, check_int, check_number, check_texts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.encoders.truncate import truncate_encoder
from layerwise.errors import UsageError
from layerwise.export.card import ExportCard, render_card
from layerwise.export.sentence_transformers import EXPORT_MARKER, check_destination, save_st_folder, transformer_options
from layerwise.layers import validate_layers
from layerwise.methods.lattemix.config import MODEL_KINDS, LatteMixConfig
from layerwise.methods.lattemix.models import TokenLatentModel
from layerwise.methods.lattemix.similarity import SIMILARITIES, Mixtures, pair_similarity, sentence_mixtures
from layerwise.methods.lattemix.train import TrainConfig, train_on_token_stack

logger = logging.getLogger(__name__)

__all__ = ["LatteMix"]

_INTS = {"n_groups": 1, "n_classes": 2, "latent_dim": 1, "depth": 1, "hidden_dim": 1, "beta_warmup_steps": 0,
         "epochs": 1, "batch_size": 1, "lr_warmup_steps": 0, "max_length": 3, "encode_batch_size": 1}


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class LatteMix(SentenceEstimator):
    """Latte-Mix (Li et al.): a token-level latent model over the frozen token vectors of one hidden state.

    A sentence is the mixture of its tokens' posteriors, p(z|m) = 1/K sum_i q(z|u_i); two sentences are compared
    by the cosine or Jensen-Shannon divergence of their mixtures (categorical model), the cosine of their mean codes
    (``ae``), or the closed-form L2 distance or cosine of their Gaussian mixtures (``normal``).

    Parameters
    ----------
    model : str
        The frozen encoder: a built-in name or a local Hugging Face folder (as :class:`LayerEncoder` takes it).
    layer : int
        Hidden state whose token vectors are modelled (0 = embedding output, -1 = last).
    kind : {"categorical", "normal", "ae"}
        Gumbel-softmax VAE with ``n_groups`` groups of ``n_classes`` classes, Gaussian VAE with ``latent_dim``
        dimensions, or a plain autoencoder with a ``latent_dim`` code.
    n_groups, n_classes : int
        Categorical latent: independent groups, classes per group.
    latent_dim : int
        Size of the continuous latent (``normal`` and ``ae``).
    depth, hidden_dim : int
        Encoder layers (1: one linear map) and the width of the hidden ones.
    decoder_depth : int or None
        Decoder layers (None: ``depth``, the decoder mirrors the encoder; the paper's decoder has 3).
    tau : float
        Gumbel-softmax temperature of the training samples (the paper uses 0.3; 1.0 scored higher here).
    kl_threshold : float or None
        KL thresholding: the KL term is sum over latent units (categorical groups, Gaussian dimensions) of
        max(kl_threshold, the unit's batch-mean KL) (the paper: 0.3 nats). None: the plain KL.
    beta, beta_warmup_steps : float, int
        Final weight of the KL term, reached linearly over this many steps.
    epochs, batch_size, lr, lr_warmup_steps : int, int, float, int
        Passes over the corpus's tokens, tokens per training step, Adam learning rate and its linear warm-up.
    max_steps : int or None
        Stop training after this many steps (None: all ``epochs``).
    include_special : bool
        Keep [CLS]/[SEP] (<s>/</s>) tokens in training and in the mixtures.
    max_length : int
        Tokens per text (longer texts are cut).
    encode_batch_size : int
        Texts per forward pass of the encoder (``encode(batch_size=...)`` overrides it for one call).
    device : str
        Where the encoder runs (the small token model trains and runs on the CPU).
    seed : int
        Initialisation, token order and the Gumbel / Gaussian noise of training.
    show_progress : bool or None
        Progress bars (None: when the output is a terminal).

    Methods
    -------
    fit(texts)
        Train on an unlabeled corpus (list of str).
    similarity(sentences1, sentences2, measure="cosine")
        One value per pair, float64 ``(n,)``; ``measure``: ``cosine``, ``js`` or ``l2`` (categorical), ``l2`` or ``cosine``
        (normal), ``cosine`` (ae).
    mixtures(texts)
        The per-text mixtures (:class:`~layerwise.methods.lattemix.similarity.Mixtures`; ``.probs`` of shape
        ``(n, n_groups, n_classes)`` for a categorical model).
    encode(sentences)
        The mixture vectors, float32: ``(n, n_groups * n_classes)`` (categorical: the mixtures flattened) or
        ``(n, latent_dim)`` (ae: the mean code); their cosine is the ``cosine`` measure. A ``normal`` model has none.
    save(folder), load(folder)
        A sentence-transformers folder with the same ``encode`` (categorical and ae).

    Attributes
    ----------
    latent_model_ : TokenLatentModel
        The trained token model (eval mode).
    encoder_ : LayerEncoder
        The frozen encoder.
    layer_ : int
        The hidden state used, counted from 0 (``layer=-1`` resolved).
    training_ : dict
        ``n_sentences``, ``n_tokens`` trained on, ``steps``, ``seconds``, ``final_loss``, ``final_kl``.
    history_ : dict or None
        Per-step ``loss``, ``recon``, ``kl``, ``beta`` of ``fit`` (None after :meth:`load`).
    """

    _fitted_attributes = ("latent_model_", "encoder_", "layer_", "training_", "history_")

    def __init__(self, model: str = DEFAULT_MODEL, *, layer: int = -1, kind: str = "categorical", n_groups: int = 32,
                 n_classes: int = 16, latent_dim: int = 32, depth: int = 1, hidden_dim: int = 512,
                 decoder_depth: int | None = None, tau: float = 1.0, kl_threshold: float | None = None,
                 beta: float = 1.0, beta_warmup_steps: int = 1000, epochs: int = 1, batch_size: int = 256,
                 lr: float = 1e-3, lr_warmup_steps: int = 200, max_steps: int | None = None,
                 include_special: bool = False, max_length: int = 256, encode_batch_size: int = 64,
                 device: str = "cpu", seed: int = 0, show_progress: bool | None = None):
        self.model = model
        self.layer = layer
        self.kind = kind
        self.n_groups = n_groups
        self.n_classes = n_classes
        self.latent_dim = latent_dim
        self.depth = depth
        self.hidden_dim = hidden_dim
        self.decoder_depth = decoder_depth
        self.tau = tau
        self.kl_threshold = kl_threshold
        self.beta = beta
        self.beta_warmup_steps = beta_warmup_steps
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.lr_warmup_steps = lr_warmup_steps
        self.max_steps = max_steps
        self.include_special = include_special
        self.max_length = max_length
        self.encode_batch_size = encode_batch_size
        self.device = device
        self.seed = seed
        self.show_progress = show_progress

    # ------------------------------------------------------------------ parameters

    def _settings(self) -> tuple[LatteMixConfig, TrainConfig]:
        """The parameters checked, as the model's and the training's configs; a UsageError names a bad one."""
        if self.kind not in MODEL_KINDS:
            raise UsageError(f"kind={self.kind!r} is not a Latte-Mix model kind; use one of {', '.join(MODEL_KINDS)}")
        for name, low in _INTS.items():
            check_int(getattr(self, name), name, low=low)
        for name in ("layer", "seed"):
            if not _is_int(getattr(self, name)):
                raise UsageError(f"{name}={getattr(self, name)!r} is invalid: use an integer")
        check_int(self.max_steps, "max_steps", low=0, none_ok=True)
        check_int(self.decoder_depth, "decoder_depth", low=1, none_ok=True)
        if self.kl_threshold is not None:
            check_number(self.kl_threshold, "kl_threshold", positive=False)
        for name, positive in (("tau", True), ("beta", False), ("lr", True)):
            check_number(getattr(self, name), name, positive=positive)
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError):
            raise UsageError(f"device={self.device!r} is not a torch device; use 'cpu', 'cuda' or 'cuda:N'") from None
        if not isinstance(self.include_special, bool):
            raise UsageError(f"include_special={self.include_special!r} is invalid: use True or False")
        config = LatteMixConfig(kind=self.kind, n_classes=int(self.n_classes), n_groups=int(self.n_groups),
                                latent_dim=int(self.latent_dim), depth=int(self.depth), hidden_dim=int(self.hidden_dim),
                                tau=float(self.tau), beta=float(self.beta),
                                beta_warmup_steps=int(self.beta_warmup_steps),
                                decoder_depth=None if self.decoder_depth is None else int(self.decoder_depth),
                                kl_threshold=None if self.kl_threshold is None else float(self.kl_threshold))
        train = TrainConfig(epochs=int(self.epochs), batch_size=int(self.batch_size), lr=float(self.lr),
                            lr_warmup_steps=int(self.lr_warmup_steps), seed=int(self.seed),
                            max_steps=None if self.max_steps is None else int(self.max_steps))
        return config, train

    def _encoder(self, model) -> LayerEncoder:
        try:
            return LayerEncoder(model, max_length=int(self.max_length), batch_size=int(self.encode_batch_size),
                                device=self.device, cache_dir=False, show_progress=self.show_progress)
        except ValueError as err:  # a max_length the tokenizer cannot honour, an unknown device, ...
            raise UsageError(str(err)) from None

    # ------------------------------------------------------------------ fit

    def fit(self, texts, y=None) -> "LatteMix":
        """Train the token model on the token vectors of ``texts`` (an unlabeled corpus, list of str).

        ``y`` is ignored (scikit-learn's convention for unsupervised estimators). Returns ``self``.
        """
        texts = check_texts(texts, name="texts")
        config, train = self._settings()
        encoder = self._encoder(self.model)
        try:
            (layer,) = validate_layers([self.layer], encoder.n_states)
        except ValueError as err:
            raise UsageError(f"layer={self.layer!r}: {err}") from None
        stack = encoder.encode_tokens(texts, (layer,))
        try:
            latent, history = train_on_token_stack(config, stack, layer, train, include_special=self.include_special,
                                                   show_progress=self.show_progress)
        except ValueError as err:
            raise UsageError(f"texts: {err}") from None
        losses = [float(x) for x in history["loss"]]
        if not all(math.isfinite(x) for x in losses):
            raise UsageError(f"training diverged (loss {losses[-1]}): refit with a lower lr (lr={self.lr!r})")
        tail = max(1, len(losses) // 20)
        n_tokens = int(len(stack.special) if self.include_special else (~stack.special).sum())
        self.encoder_ = encoder
        self.layer_ = int(layer)
        self.history_ = history
        self.training_ = {"n_sentences": len(texts), "n_tokens": n_tokens, "steps": int(history["steps"]),
                          "seconds": float(history["seconds"]),
                          "final_loss": float(np.mean(losses[-tail:])) if losses else None,
                          "final_kl": float(np.mean(history["kl"][-tail:])) if losses else None}
        self.latent_model_ = latent
        logger.info("Latte-Mix %s trained on %d tokens of hidden state %d (%d steps)", self.kind, n_tokens, layer,
                    history["steps"])
        return self

    # ------------------------------------------------------------------ use

    def mixtures(self, texts, *, batch_size: int | None = None) -> Mixtures:
        """The mixture of each text's token posteriors.

        Returns a :class:`~layerwise.methods.lattemix.similarity.Mixtures` of ``n`` texts: for ``categorical``,
        ``.probs`` of shape ``(n, n_groups, n_classes)`` (each group a distribution); for ``ae``, ``.probs`` of
        shape ``(n, 1, latent_dim)`` (the mean code); for ``normal``, the Gaussian components themselves: ``.mu`` and
        ``.var`` of shape ``(total_tokens, latent_dim)`` with text ``i`` owning rows ``offsets[i]:offsets[i + 1]``.
        """
        self._check_fitted()
        texts = check_texts(texts, name="texts")
        return self._mixtures(texts, batch_size=batch_size, name="texts")

    def _mixtures(self, texts: list[str], *, batch_size: int | None, name: str) -> Mixtures:
        if batch_size is not None and (not _is_int(batch_size) or batch_size < 1):
            raise UsageError(f"batch_size={batch_size!r} is invalid: use a positive integer")
        encoder = self.encoder_
        kept = encoder.batch_size
        encoder.batch_size = int(batch_size or kept)
        try:
            stack = encoder.encode_tokens(texts, (self.layer_,))
        finally:
            encoder.batch_size = kept
        if not self.include_special:
            empty = np.flatnonzero(np.bincount(stack.sentence_ids()[~stack.special], minlength=len(texts)) == 0)
            if len(empty):
                i = int(empty[0])
                raise UsageError(f"{name}[{i}] ({texts[i][:40]!r}) has no tokens besides special tokens: give a "
                                 "non-empty text, or fit with include_special=True")
        return sentence_mixtures(self.latent_model_, stack, self.layer_, include_special=self.include_special)

    def similarity(self, sentences1, sentences2, measure: str = "cosine", *, batch_size: int | None = None) -> np.ndarray:
        """Similarity of ``sentences1[i]`` and ``sentences2[i]`` for every ``i``: float64 ``(n,)``, higher = closer.

        ``measure``: ``categorical``: ``cosine`` (of the mixtures), ``js`` (minus their Jensen-Shannon divergence
        summed over groups) or ``l2`` (minus their squared L2 distance summed over groups); ``normal``: ``l2`` (minus the squared L2 distance of the Gaussian mixtures) or
        ``cosine``; ``ae``: ``cosine`` (of the mean codes).
        """
        self._check_fitted()
        a = check_texts(sentences1, name="sentences1")
        b = check_texts(sentences2, name="sentences2")
        if len(a) != len(b):
            raise UsageError(f"sentences1 has {len(a)} texts and sentences2 {len(b)}: give one pair per index")
        valid = SIMILARITIES[self.latent_model_.config.kind]
        if measure not in valid:
            raise UsageError(f"measure={measure!r} is not available for a {self.latent_model_.config.kind} model; "
                             f"use one of {', '.join(valid)}")
        unique = list(dict.fromkeys(a + b))
        where = {s: i for i, s in enumerate(unique)}
        mix = self._mixtures(unique, batch_size=batch_size, name="sentences")
        sim = pair_similarity(mix.take(np.array([where[s] for s in a])), mix.take(np.array([where[s] for s in b])),
                              measure)
        if not np.isfinite(sim).all():
            raise UsageError(f"the {measure} similarity is not finite (NaN or inf): the model's weights are damaged or "
                             "training diverged; refit with a lower lr")
        return sim

    def _encode(self, texts: list[str], *, batch_size: int | None) -> np.ndarray:
        """The mixture vectors: ``categorical`` (n, n_groups * n_classes), ``ae`` (n, latent_dim); their cosine is
        the ``cosine`` measure. A ``normal`` model's mixtures are sets of Gaussians, not vectors."""
        kind = self.latent_model_.config.kind
        if kind == "normal":
            raise UsageError("a normal Latte-Mix model has no sentence vector (its mixtures are sets of Gaussians): "
                             "compare texts with similarity(...), or fit with kind='categorical' or 'ae'")
        probs = self._mixtures(texts, batch_size=batch_size, name="sentences").probs
        return probs.reshape(len(probs), -1).astype(np.float32)

    # ------------------------------------------------------------------ save / load

    def save(self, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write a sentence-transformers folder: the encoder cut at ``layer_`` and the token model.

        ``modules.json`` names :class:`~layerwise.methods.lattemix.st_module.LatteMixModule`, a class of the installed
        ``layerwise`` package, by its import path; the folder holds no ``.py`` file. sentence-transformers 6 imports
        such a class only with ``SentenceTransformer(folder, trust_remote_code=True)``; :meth:`load` and
        :func:`layerwise.load_sentence_transformer` read it without. Its ``encode`` equals
        this estimator's. ``overwrite`` replaces a folder this method wrote before, nothing else. A ``normal`` model
        has no sentence vector and is refused.
        """
        from layerwise.methods.lattemix.st_module import LatteMixModule  # sentence-transformers: an optional extra

        self._check_fitted()
        latent = self.latent_model_
        if latent.config.kind == "normal":
            raise UsageError("a normal Latte-Mix model has no sentence vector to save as a sentence-transformers "
                             "folder: fit with kind='categorical' or 'ae'")
        try:
            check_destination(folder, overwrite)
        except FileExistsError as err:
            raise UsageError(str(err).replace("(--overwrite)", "")) from None
        encoder = self.encoder_
        # the ids the tokenizer adds around a text ([CLS]/[SEP], <s>/</s>): what ``special_tokens_mask`` flags
        special_ids = sorted(set(encoder.tokenizer("")["input_ids"]))
        module = LatteMixModule(latent.config.to_dict(), special_ids, self.include_special)
        module.latent.load_state_dict(latent.state_dict())
        cut = truncate_encoder(encoder.model, self.layer_, copy_model=True)
        params = self.get_params(deep=False)
        card = ExportCard(
            kind="lattemix", source=encoder.identity.to_dict(), layers=[self.layer_], pooling="mixture",
            layerwise_module=True,
            description=f"Latte-Mix ({latent.config.kind}): the mean posterior of the tokens of hidden state "
                        f"{self.layer_} of {encoder.identity.name}; compare with cosine similarity.",
            extra={"max_length": encoder.max_length, "include_special": self.include_special,
                   "latte_mix": latent.config.to_dict(),
                   "estimator": {"class": "LatteMix", "params": params, "layer_": self.layer_,
                                 "training_": self.training_}})
        return save_st_folder(cut, encoder.tokenizer, folder, [module],
                              transformer_kwargs=transformer_options(encoder.max_length),
                              provenance=card.provenance(), readme=render_card(card, Path(folder).name),
                              overwrite=overwrite)

    @classmethod
    def load(cls, folder: str | os.PathLike, *, device: str = "cpu") -> "LatteMix":
        """A fitted :class:`LatteMix` from a folder written by :meth:`save` (no code from the folder runs), encoding
        on ``device`` (the device it was trained on is not restored)."""
        from layerwise.methods.lattemix.st_module import LatteMixModule, module_path

        folder = Path(folder)
        try:
            record = json.loads((folder / EXPORT_MARKER).read_text())
            saved = record["estimator"]
            params, layer, training = dict(saved["params"]), int(saved["layer_"]), dict(saved["training_"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UsageError(f"{folder} is not a folder written by LatteMix.save ({EXPORT_MARKER}: {err}); give "
                             "the folder save() wrote") from None
        try:
            sub = module_path(folder)
            module = LatteMixModule.load(str(folder), subfolder=sub)
        except (OSError, ValueError, RuntimeError) as err:
            raise UsageError(f"{folder}: cannot read its Latte-Mix module ({err})") from None
        est = cls(**cls._saved_params(params), device=device)
        encoder = est._encoder(folder)  # the cut encoder at the folder's root: its top hidden state is ``layer_``
        latent: TokenLatentModel = module.latent.eval()
        if latent.config.input_dim != encoder.identity.hidden_size:
            raise UsageError(f"{folder}: the token model reads {latent.config.input_dim}-d vectors but the encoder "
                             f"has {encoder.identity.hidden_size}-d hidden states; the folder is damaged")
        if encoder.n_states - 1 != layer:
            raise UsageError(f"{folder}: saved at hidden state {layer} but its encoder has {encoder.n_states - 1} "
                             "layers; the folder is damaged")
        est.encoder_ = encoder
        est.layer_ = layer
        est.history_ = None
        est.training_ = training
        est.latent_model_ = latent
        return est
