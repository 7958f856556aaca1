"""Export to the tools a pipeline already uses: sentence-transformers folders (more kinds come with issue #14)."""

from layerwise.export.sentence_transformers import EXPORT_MARKER, write_sentence_transformer

__all__ = ["EXPORT_MARKER", "write_sentence_transformer"]
