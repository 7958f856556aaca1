"""The errors a user can cause, as one small family the command line turns into a one-line message.

A :class:`LayerwiseError` (or a ``ValueError``/``OSError`` raised at a public boundary) is the user's to
fix: its message names the value, what is wrong and the fix. Anything else that escapes is a bug.
"""

from __future__ import annotations

__all__ = ["DataFileError", "LayerwiseError", "ModelFilesError", "ModelNotFoundError", "UsageError"]


class LayerwiseError(Exception):
    """Base class of the errors caused by input: a bad option, a damaged file, a missing folder."""


class UsageError(LayerwiseError, ValueError):
    """An argument or data value is out of range or of the wrong kind."""


class ModelFilesError(LayerwiseError, OSError):
    """A model folder lacks files it needs, or holds files that cannot be read or fail their checksum."""


class DataFileError(UsageError):
    """A data file that cannot be read as asked: one line naming the file (and line or row), what is wrong, the fix.

    The fix names what to change. When that is a column argument of a reader (``score``, ``text2``, ...),
    :attr:`argument` holds its Python name and the message says ``pass score=<column>``;
    :meth:`naming_flags` gives the same error with that part naming a command-line flag instead
    (``pass --score-column COLUMN``), which is what :mod:`layerwise.cli._files` raises.
    """

    #: stands in a message template for the column argument with a value ("score=<column>", "--score-column COLUMN")
    ARGUMENT = "\x00argument\x00"
    #: stands in a message template for the argument's bare name ("score", "--score-column")
    NAME = "\x00name\x00"

    def __init__(self, template: str, *, argument: str | None = None):
        self.template = template
        self.argument = argument
        super().__init__(template.replace(self.ARGUMENT, f"{argument}=<column>").replace(self.NAME, str(argument)))

    def naming_flags(self, flags: dict[str, str]) -> DataFileError:
        """This error with its column argument named as a flag (``flags``: argument -> flag), if it has one there."""
        if self.argument not in flags:
            return self
        err = DataFileError(self.template, argument=self.argument)
        flag = flags[self.argument]
        err.args = (self.template.replace(self.ARGUMENT, f"{flag} COLUMN").replace(self.NAME, flag),)
        return err


class ModelNotFoundError(FileNotFoundError):
    """The model name is neither a local folder nor an installed built-in model."""
