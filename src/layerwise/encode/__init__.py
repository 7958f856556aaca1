"""Embed corpora with any layerwise pooling or an exported folder (``layerwise encode``), and the MTEB wrapper.

``encode_corpus`` runs in this process, and the same call after an interrupt encodes only the chunks that were not
finished (:mod:`layerwise.encode.journal`); ``encode_corpus_ray`` (``--engine ray``) runs on Ray Data, which it imports
only when called (``pip install "layerwise[ray]"``).
"""

from layerwise.encode.corpus import EncodeResult, encode_corpus, load_embeddings
from layerwise.encode.embedders import EmbedderConfig, FolderEmbedder, PoolingSpec, SpecEmbedder
from layerwise.encode.ray_engine import RayEncodeConfig, encode_corpus_ray
from layerwise.encode.readers import CORPUS_FORMATS, CorpusSource, scan_corpus
from layerwise.encode.writers import OUTPUT_FORMATS

__all__ = ["CORPUS_FORMATS", "OUTPUT_FORMATS", "CorpusSource", "EmbedderConfig", "EncodeResult", "FolderEmbedder",
           "PoolingSpec", "RayEncodeConfig", "SpecEmbedder", "encode_corpus", "encode_corpus_ray", "load_embeddings",
           "scan_corpus"]
