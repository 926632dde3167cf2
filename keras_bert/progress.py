"""Progress of the long steps (vocabulary, corpus, pretraining data, SQuAD
features, evaluation, export), one style everywhere.

On a terminal: one line on stderr, redrawn in place. Into a log file or CI
(stderr is not a terminal): a plain line every `LOG_EVERY_SECONDS` and one at
the end, so a log holds a few lines, not thousands of redrawn frames. Keras'
own loops (`fit`) follow the same rule through `keras_verbose`.

Library calls show progress on a terminal only; the `keras-bert` command turns
it on for logs too (`show_progress(True)`).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

LOG_EVERY_SECONDS = 30.0
REDRAW_EVERY_SECONDS = 0.5
BAR_WIDTH = 30

_shown = None  # None: on a terminal only; True / False: always / never


def show_progress(enabled: bool | None) -> None:
    """Progress lines on (True), off (False) or on a terminal only (None)."""
    global _shown
    _shown = enabled


def _is_terminal(stream):
    return hasattr(stream, "isatty") and stream.isatty()


def keras_verbose(verbose: str | int = "auto") -> str | int:
    """Keras' `verbose` for fit / evaluate: "auto" becomes a redrawn bar (1) on a
    terminal and one line per epoch (2) otherwise (Keras' "auto" draws the bar
    into log files too, a frame every 50 ms)."""
    if verbose != "auto":
        return verbose
    return 1 if _is_terminal(sys.stdout) else 2


class Progress:
    """`with Progress(total, "documents") as bar: bar.update(done, detail)`.

    `total` may be None (unknown): the line then counts without a bar.
    """

    def __init__(
        self,
        total: int | None,
        unit: str,
        detail: str = "",
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.terminal = _is_terminal(self.stream)
        self.enabled = enabled and (_shown if _shown is not None else self.terminal)
        self.total, self.unit = total, unit
        self.start = self._last = time.monotonic()
        self.done, self.detail = 0, detail
        self._drawn = False

    def update(self, done: int, detail: str | None = None, final: bool = False) -> None:
        """`done` so far (of `total`); `detail` replaces the text after the count."""
        self.done = done
        self.detail = self.detail if detail is None else detail
        if not self.enabled:
            return
        now = time.monotonic()
        wait = REDRAW_EVERY_SECONDS if self.terminal else LOG_EVERY_SECONDS
        if not final and now - self._last < wait:
            return
        self._last = now
        line = self._line(now - self.start)
        if self.terminal:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._drawn = True

    def advance(self, count: int = 1, detail: str | None = None) -> None:
        self.update(self.done + count, detail)

    def close(self) -> None:
        self.update(self.done, self.detail, final=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None or self._drawn:
            self.close()
        return False

    def _line(self, elapsed):
        rate = self.done / max(elapsed, 1e-9)
        counted = f"{self.done:,} {self.unit}"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            bar = "#" * int(BAR_WIDTH * fraction)
            counted = f"[{bar:<{BAR_WIDTH}}] {100 * fraction:5.1f} % {counted} of {self.total:,}"
        detail = f", {self.detail}" if self.detail else ""
        return f"{counted}{detail} ({rate:,.0f}/s, {elapsed:.0f} s)"
