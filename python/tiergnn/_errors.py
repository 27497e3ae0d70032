"""tiergnn's exceptions: one class, TierGNNError, with tiergnn's own message.

Every error of the C library reaches Python as a TierGNNError whose text is tiergnn's message
(it names the file, offset, option or strategy at fault) and whose ``errno`` is the positive
errno the library returned. Two of them are also the built-in exception a caller would catch
anyway: a missing file is a FileNotFoundError, a refused memory budget a MemoryError.
"""

import errno as _errno


class TierGNNError(RuntimeError):
    """An error of libtiergnn; ``errno`` is its positive errno, str() its message."""

    def __init__(self, message, errno=None):
        super().__init__(message)
        self.errno = errno


class TierGNNNotFoundError(TierGNNError, FileNotFoundError):
    """A dataset, file or directory that does not exist (ENOENT)."""

    def __init__(self, message, errno=_errno.ENOENT):
        FileNotFoundError.__init__(self, message)
        self.errno = errno


class TierGNNMemoryError(TierGNNError, MemoryError):
    """A --mem budget too small, or memory the library could not get (ENOMEM)."""


def _make(rc, message):
    """The exception for return code rc (< 0) and tiergnn's message (called from C)."""
    code = -rc if rc < 0 else rc
    if code == _errno.ENOENT:
        return TierGNNNotFoundError(message, code)
    if code == _errno.ENOMEM:
        return TierGNNMemoryError(message, code)
    return TierGNNError(message, code)
