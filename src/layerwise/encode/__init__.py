"""Embed corpora with any layerwise pooling or an exported folder (``layerwise encode``), and the MTEB wrapper."""

from layerwise.encode.corpus import EncodeResult, encode_corpus, load_embeddings
from layerwise.encode.embedders import FolderEmbedder, PoolingSpec, SpecEmbedder
from layerwise.encode.readers import CORPUS_FORMATS, CorpusSource, scan_corpus
from layerwise.encode.writers import OUTPUT_FORMATS

__all__ = ["CORPUS_FORMATS", "OUTPUT_FORMATS", "CorpusSource", "EncodeResult", "FolderEmbedder", "PoolingSpec",
           "SpecEmbedder", "encode_corpus", "load_embeddings", "scan_corpus"]
