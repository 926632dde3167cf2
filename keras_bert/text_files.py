"""The one way keras_bert reads a text file a user gives it (tables, CoNLL,
SQuAD JSON, JSON lines, vocabularies, corpora, predict inputs).

Text is UTF-8. A UTF-8 byte-order mark (what Windows editors and Excel's
"CSV UTF-8" put first) is dropped: it is not part of the first line's text,
and kept it would rename a table's first column to `\\ufefflabel` or make a
vocabulary's `[PAD]` another token. A file in another encoding is refused
with one error naming the file, the line and how to convert it: UTF-16 and
UTF-32 (told by their byte-order mark or their NUL bytes) and text with bytes
that are not UTF-8 (Latin-1, Windows-1252, binary data).

`read_text(path)` reads a whole file (local or gs://); readers of large
files that stream line by line (corpora) call `check_encoding` on the
file's first bytes and `strip_bom` on its first line.
"""

from __future__ import annotations

import codecs
import os

BOM = "\ufeff"
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)  # before UTF-16: FF FE 00 00
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# How much of a file's head `check_encoding` looks at for UTF-16 without a mark.
HEAD_BYTES = 1 << 12


def open_binary(path: str):
    """`open(path, "rb")`, or tf.io.gfile's for a remote path (gs://)."""
    if "://" in str(path):
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def exists(path: str) -> bool:
    if "://" in str(path):
        import tensorflow as tf

        return tf.io.gfile.exists(path)
    return os.path.exists(path)


def check_encoding(head: bytes, path: str) -> None:
    """Raises ValueError naming `path` if its first bytes `head` are UTF-16 or
    UTF-32 text (a byte-order mark, or a NUL byte beside every ASCII one)."""
    if head.startswith(_UTF32_BOMS):
        _refuse_wide(path, "UTF-32", "UTF-32")
    if head.startswith(_UTF16_BOMS):
        _refuse_wide(path, "UTF-16", "UTF-16")
    # UTF-16 without a mark: ASCII text with a NUL in every other byte.
    sample = head[: HEAD_BYTES - HEAD_BYTES % 2]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
            _refuse_wide(path, "UTF-16", "UTF-16LE")
        if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
            _refuse_wide(path, "UTF-16", "UTF-16BE")


def _refuse_wide(path, name, codec):
    raise ValueError(
        f"{path}: {name} text, not UTF-8; save it as UTF-8 (e.g. iconv -f {codec} -t UTF-8 "
        f"{os.path.basename(str(path))} > {os.path.splitext(os.path.basename(str(path)))[0]}"
        f".utf8{os.path.splitext(str(path))[1]})"
    )


def not_utf8(path: str, raw: bytes, error: UnicodeDecodeError, offset: int = 0) -> ValueError:
    """The error for bytes of `path` that are not UTF-8: the line (counted in
    `raw`, which starts at line `offset + 1`), the byte and what to do."""
    line = offset + raw[: error.start].count(b"\n") + 1
    byte = raw[error.start]
    return ValueError(
        f"{path}, line {line}: not valid UTF-8 (byte 0x{byte:02x}: Latin-1 / Windows-1252 text, "
        "or binary data? convert the text to UTF-8, e.g. iconv -f latin1 -t UTF-8)"
    )


def decode(raw: bytes, path: str) -> str:
    """A whole file's bytes as text (see the module docstring)."""
    check_encoding(raw[:HEAD_BYTES], path)
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(path, raw, e) from None


def read_text(path: str, missing: str = "file not found") -> str:
    """The text of the file `path` (local or gs://); FileNotFoundError saying
    `missing: PATH` if there is none."""
    if not exists(path):
        raise FileNotFoundError(f"{missing}: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give a file")
    with open_binary(path) as f:
        raw = f.read()
    return decode(raw, path)


def strip_bom(line: str) -> str:
    """The first line of a file without a byte-order mark."""
    return line[1:] if line.startswith(BOM) else line


def text_lines(content: str) -> list[str]:
    """A file's lines as a text file has them: ends at \\n, \\r\\n or \\r only.
    `str.splitlines()` also ends lines at \\x0b, \\x0c, \\x1c-\\x1e, \\x85,
    U+2028 and U+2029, which would split one line of a file into several."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def read_lines(path: str, missing: str = "file not found") -> list[str]:
    """The lines of the file `path`, without their line ends."""
    return text_lines(read_text(path, missing))
