"""The failures a user can fix, and how the command line tells them from bugs.

`keras-bert` (cli/commands.main) prints an expected failure as one line and
exits 2; anything else is a bug and keeps its traceback. Expected are: our
`UserError`s, the built-in errors a library raises for bad input
(`ValueError`, `FileNotFoundError`, `FileExistsError`, ...), an operating
system's refusal to write (disk full, file too large, permission denied,
read-only file system, quota), from Python or from TensorFlow's file ops, and
running out of memory (with what to lower).
"""

from __future__ import annotations

import errno

# An OSError's errno -> what it means for the output and what to do.
WRITE_ERRNOS = {
    errno.ENOSPC: "the disk is full: free some space or write somewhere else",
    errno.EDQUOT: "the disk quota is used up: free some space or write somewhere else",
    errno.EFBIG: "the file is larger than this file system or the process's file size "
    "limit (ulimit -f) allows: raise the limit or write somewhere else",
    errno.EACCES: "permission denied: fix the permissions or choose a place you can write to",
    errno.EPERM: "operation not permitted: fix the permissions or choose a place you can write to",
    errno.EROFS: "the file system is read-only: write somewhere else",
}
# The same refusals as TensorFlow's file ops word them (tf.errors.OpError
# carries no errno: SaveV2, TFRecordWriter and GFile report the message).
_TENSORFLOW_MESSAGES = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "File too large": errno.EFBIG,
    "Permission denied": errno.EACCES,
    "Read-only file system": errno.EROFS,
}


class UserError(Exception):
    """A failure the user can fix; its message says what and how. The command
    line prints it as one line and exits 2."""


class OutputError(UserError, OSError):
    """An output could not be written (disk full, read-only, ...): nothing that
    looks complete was left under its name."""


class OutputInUseError(UserError):
    """Another running process writes to the same output."""


class OutputIsInputError(UserError, ValueError):
    """An output names one of the command's inputs (same path or same file)."""


def write_errno(error: BaseException) -> int | None:
    """The errno of a write refused by the system (one of WRITE_ERRNOS), from
    an OSError or a TensorFlow op error's message; else None."""
    if isinstance(error, OSError) and error.errno in WRITE_ERRNOS:
        return error.errno
    if type(error).__module__.startswith("tensorflow"):
        message = str(error)
        for text, number in _TENSORFLOW_MESSAGES.items():
            if text in message:
                return number
    return None


def output_error(error: BaseException, path: str) -> OutputError | None:
    """`error` as an OutputError naming `path` if it is a refused write, else None."""
    if isinstance(error, OutputError):
        return error
    number = write_errno(error)
    if number is None:
        return None
    return OutputError(
        f"cannot write {path}: {WRITE_ERRNOS[number]} "
        f"([Errno {number}] {errno.errorcode.get(number, '')})"
    )


EXPECTED = (
    UserError,
    ValueError,
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
)


# Out of memory: the run asked for more than the machine (or its limit) has.
MEMORY_ADVICE = (
    "lower the batch size (--batch-size, or batch_size in a recipe; "
    "gradient_accumulation_steps keeps the effective batch) or the sequence length "
    "(--seq-length / seq_length), or free memory"
)


def out_of_memory(error: BaseException) -> str | None:
    """The line for running out of memory: Python's MemoryError (a ulimit, a
    cgroup's limit) or TensorFlow's ResourceExhaustedError "OOM when
    allocating" (a GPU's or TPU's memory); else None."""
    if isinstance(error, MemoryError):
        detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"out of memory{f' ({detail})' if detail else ''}: {MEMORY_ADVICE}"
    if type(error).__name__ == "ResourceExhaustedError" and "OOM" in str(error):
        first_line = str(error).strip().splitlines()[0][:200]
        return f"out of device memory ({first_line}): {MEMORY_ADVICE}"
    return None


def expected_failure(error: BaseException) -> str | None:
    """The one line to print for an expected failure; None for a bug."""
    if isinstance(error, EXPECTED):
        return str(error)
    memory = out_of_memory(error)
    if memory is not None:
        return memory
    number = write_errno(error)
    if number is not None:
        # Not raised through safe_output (an input it could not read, a
        # library's own file): name what the error names.
        where = getattr(error, "filename", None)
        first_line = (str(error).strip().splitlines() or [""])[0]
        return f"{where + ': ' if where else ''}{WRITE_ERRNOS[number]} ({first_line})"
    return None
