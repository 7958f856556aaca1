"""Latte-Mix (Li et al.): sentence similarity as the distance between mixtures of token latent distributions.

A small VAE is trained on frozen token vectors of one hidden state; a sentence is the mixture of its tokens'
posteriors, p(z|m) = 1/K sum_i q(z|u_i), and two sentences are compared by the cosine or Jensen-Shannon divergence
of their mixtures (categorical VAE), or the closed-form L2 distance of Gaussian mixtures (Normal VAE).
"""

from layerwise.methods.lattemix.config import MODEL_KINDS, LatteMixConfig
from layerwise.methods.lattemix.estimator import LatteMix
from layerwise.methods.lattemix.models import TokenLatentModel, build_model, gumbel_softmax_sample, load_model
from layerwise.methods.lattemix.similarity import SIMILARITIES, Mixtures, pair_similarity, sentence_mixtures
from layerwise.methods.lattemix.train import TrainConfig, train_on_token_stack, train_token_model

__all__ = [
    "MODEL_KINDS",
    "SIMILARITIES",
    "LatteMix",
    "LatteMixConfig",
    "Mixtures",
    "TokenLatentModel",
    "TrainConfig",
    "build_model",
    "gumbel_softmax_sample",
    "load_model",
    "pair_similarity",
    "sentence_mixtures",
    "train_on_token_stack",
    "train_token_model",
]
