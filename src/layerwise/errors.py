"""The errors a user can cause, as one small family the command line turns into a one-line message.

A :class:`LayerwiseError` (or a ``ValueError``/``OSError`` raised at a public boundary) is the user's to
fix: its message names the value, what is wrong and the fix. Anything else that escapes is a bug.
"""

from __future__ import annotations

__all__ = ["LayerwiseError", "ModelFilesError", "UsageError"]


class LayerwiseError(Exception):
    """Base class of the errors caused by input: a bad option, a damaged file, a missing folder."""


class UsageError(LayerwiseError, ValueError):
    """An argument or data value is out of range or of the wrong kind."""


class ModelFilesError(LayerwiseError, OSError):
    """A model folder lacks files it needs, or holds files that cannot be read or fail their checksum."""
