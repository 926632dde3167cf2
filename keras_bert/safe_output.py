"""The one way every output is written: beside its target, then renamed.

- `replacing(path)` gives a temporary sibling path to write (a file, or a
  folder with `folder=True`: a SavedModel, a TFRecord, a `.keras` file, any
  writer that takes a path); when the block ends without an error it is
  renamed over `path` in one step, else removed. A reader, or a run killed at
  any moment, sees the old output or the new one, never a partial file under
  the final name. `write_text`, `write_bytes`, `write_json`, `copy_file` and
  `open_replacing` are the common cases built on it.
- The system's refusals (disk full, file too large, permission denied,
  read-only file system, quota) become one `OutputError` naming the path and
  what to do (`keras_bert.errors`), with the partial file removed.
- `check_not_input(output, inputs)` refuses an output that is one of the
  inputs (the same path, a hard link, a symbolic link: the same inode).
- `output_lock(path)` refuses an output another running process is writing:
  a lock file `PATH.lock` beside it holds the owner's pid and host; a lock
  whose process is gone (same host, pid not running) is taken over with a
  warning. The lock is re-entrant within a process. Readers of a model folder
  ask `check_not_in_progress(path)` before saying it holds no model.

Remote paths (`gs://...`) go through tf.io.gfile: written beside and renamed
(on GCS a copy, still never a partial object under the final name); they have
no inodes, and locking them is left to the storage (no lock file).
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import json
import os
import re
import shutil
import socket
import stat
import sys
import threading
from typing import Any, Iterable, Iterator, Mapping

from keras_bert.errors import OutputInUseError, OutputIsInputError, UserError, output_error


def is_remote(path: str) -> bool:
    return "://" in str(path)


def temporary_sibling(path: str, keep_extension: bool = False) -> str:
    """`DIR/NAME.partial-PID` (`DIR/NAME.partial-PID.EXT` with `keep_extension`,
    for writers that insist on an extension: Keras' `.keras`, NumPy's `.npz`):
    in the target's folder, so the final rename stays on one file system; the
    pid keeps two processes writing the same target apart."""
    path = str(path).rstrip("/")
    root, extension = os.path.splitext(path) if keep_extension else (path, "")
    return f"{root}.partial-{os.getpid()}{extension}"


# === Renaming into place ===


class Replacement:
    """One output written under a temporary name: `temporary` to write, then
    `commit()` (renamed over `path`) or `abort()` (removed). For several
    outputs that must appear together (a run's shards), commit each once all
    are written."""

    def __init__(
        self,
        path: str,
        folder: bool = False,
        keep_extension: bool = False,
        make_parents: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.folder = folder
        # A device, pipe or socket (/dev/null, /dev/stdout, a FIFO) is written
        # in place: it has no "complete", and renaming over it would replace
        # the node itself.
        self.in_place = not is_remote(self.path) and _is_special(self.path)
        if self.in_place:
            self.temporary = self.path
            return
        if not is_remote(self.path) and os.path.islink(self.path):
            # A symbolic link keeps pointing where it did: its target is replaced.
            self.path = os.path.realpath(self.path)
        self.temporary = temporary_sibling(self.path, keep_extension)
        with reporting_write_errors(self.path):
            parent = _parent(self.path)
            if make_parents and parent:
                _fs(parent).makedirs(parent)
            _remove(self.temporary)  # a killed run of a process with our pid
            remove_stale_partials(self.path, keep_extension)

    def commit(self) -> str:
        if self.in_place:
            return self.path
        with reporting_write_errors(self.path):
            if not self.folder and not is_remote(self.path):
                _sync(self.temporary)
            if self.folder and _fs(self.path).exists(self.path):
                # A folder cannot be renamed over another: move the old one
                # aside first, and back if the new one cannot take its place.
                old = f"{self.path.rstrip('/')}.old-{os.getpid()}"
                _remove(old)
                _fs(self.path).rename(self.path, old)
                try:
                    _fs(self.path).rename(self.temporary, self.path)
                except BaseException:
                    _fs(self.path).rename(old, self.path)
                    raise
                _remove(old)
            else:
                _fs(self.path).rename(self.temporary, self.path)
        return self.path

    def abort(self) -> None:
        if self.in_place:
            return
        try:
            _remove(self.temporary)
        except OSError:
            pass  # e.g. the file system went read-only: the name still says partial


def remove_stale_partials(path: str, keep_extension: bool = False) -> list[str]:
    """Removes `path`'s temporary siblings (`temporary_sibling`) left by
    processes that are gone (killed with SIGKILL, a power cut): they are never
    complete, and left they would pile up or match a reader's glob. Those of
    running processes are theirs. Local paths only; returns what was removed."""
    if is_remote(str(path)):
        return []
    root, extension = os.path.splitext(str(path).rstrip("/")) if keep_extension else (path, "")
    pattern = re.compile(
        re.escape(os.path.basename(f"{root}.partial-")) + r"(\d+)" + re.escape(extension) + "$"
    )
    folder = os.path.dirname(os.path.abspath(str(root)))
    removed = []
    for name in glob.glob(os.path.join(glob.escape(folder), "*.partial-*")):
        match = pattern.match(os.path.basename(name))
        if not match or int(match.group(1)) == os.getpid() or _pid_running(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            _remove(name)
            removed.append(name)
    return removed


def _pid_running(pid: int) -> bool:
    """Whether a process `pid` runs on this host (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # running, under another user
    except OverflowError:
        return False
    return not _is_zombie(pid)


@contextlib.contextmanager
def replacing(
    path: str, folder: bool = False, keep_extension: bool = False, make_parents: bool = True
) -> Iterator[str]:
    """Yields a temporary path beside `path` to write; renamed over `path` when
    the block ends, removed if it raises. Write errors become OutputError."""
    replacement = Replacement(path, folder, keep_extension, make_parents)
    try:
        with reporting_write_errors(replacement.path):
            yield replacement.temporary
        replacement.commit()
    except BaseException:
        replacement.abort()
        raise


@contextlib.contextmanager
def open_replacing(path: str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[Any]:
    """`open(path, mode)` of a temporary sibling, renamed over `path` when done."""
    binary = "b" in mode
    with replacing(path) as temporary:
        if is_remote(path):
            import tensorflow as tf

            with tf.io.gfile.GFile(temporary, mode) as f:
                yield f
        else:
            with open(temporary, mode, encoding=None if binary else encoding) as f:
                yield f


def write_text(path: str, text: str) -> str:
    with open_replacing(path) as f:
        f.write(text)
    return path


def write_bytes(path: str, data: bytes) -> str:
    with open_replacing(path, "wb") as f:
        f.write(data)
    return path


def write_json(path: str, record: Any, indent: int | None = 2, **options: Any) -> str:
    """`record` as JSON (a newline at the end), written whole."""
    return write_text(path, json.dumps(record, indent=indent, **options) + "\n")


def copy_file(source: str, path: str) -> str:
    """A copy of `source` at `path`, written whole (never onto `source` itself)."""
    check_not_input(path, [source])
    with replacing(path) as temporary:
        if is_remote(source) or is_remote(path):
            import tensorflow as tf

            tf.io.gfile.copy(source, temporary, overwrite=True)
        else:
            shutil.copyfile(source, temporary)
    return path


@contextlib.contextmanager
def reporting_write_errors(path: str) -> Iterator[None]:
    """Turns the system's refusal to write `path` (ENOSPC, EFBIG, EACCES, EROFS,
    EDQUOT, EPERM; from Python or TensorFlow) into one OutputError naming it."""
    try:
        yield
    except Exception as e:
        converted = output_error(e, path)
        if converted is None or converted is e:
            raise
        raise converted from e


# === Outputs that are inputs ===


def check_not_input(
    output: str | None, inputs: Iterable[str | None], output_name: str = "the output"
) -> None:
    """Raises OutputIsInputError if `output` is one of `inputs` (or inside an
    input folder's place: the same folder): the same path, or the same file
    under another name (a hard or symbolic link). Inputs may be globs or
    comma-separated lists; remote paths are compared by name only."""
    if not output or (not is_remote(str(output)) and _is_special(str(output))):
        return  # nothing to lose in /dev/null or a pipe
    for pattern in inputs:
        if not pattern:
            continue
        for candidate in _expand(str(pattern)):
            if _same(str(output), candidate):
                spelled_alike = os.path.normpath(str(output)) == os.path.normpath(candidate)
                raise OutputIsInputError(
                    f"{output_name} {output} is the input {candidate}"
                    f"{'' if spelled_alike else ' (the same file under another name)'}"
                    ": writing it would destroy the input; choose another output"
                )
            if _replaces_a_file_inside(str(output), candidate):
                raise OutputIsInputError(
                    f"{output_name} {output} is a file of the input folder {candidate}: "
                    "writing it would destroy part of the input; choose another output"
                )


def check_inputs_outside(
    folder: str | None, inputs: Iterable[str | None], output_name: str = "the output"
) -> None:
    """Raises OutputIsInputError if one of `inputs` lies inside `folder`, an
    output folder that is replaced whole (an export's version folder)."""
    if not folder or is_remote(str(folder)):
        return
    root = os.path.realpath(str(folder))
    for pattern in inputs:
        for candidate in _expand(str(pattern)) if pattern else ():
            if is_remote(candidate):
                continue
            real = os.path.realpath(candidate)
            if real != root and os.path.commonpath([root, real]) == root:
                raise OutputIsInputError(
                    f"{output_name} {folder} holds the input {candidate}: replacing the folder "
                    "would destroy it; choose another output"
                )


def _replaces_a_file_inside(output: str, candidate: str) -> bool:
    """`output` is an existing file somewhere inside the input folder `candidate`
    (a model folder's model.keras). A new name inside it is fine."""
    if is_remote(output) or is_remote(candidate) or not os.path.isdir(candidate):
        return False
    if not os.path.isfile(output):
        return False
    folder, real = os.path.realpath(candidate), os.path.realpath(output)
    return os.path.commonpath([folder, real]) == folder


def _expand(pattern: str) -> list[str]:
    names = []
    for part in pattern.split(","):
        part = part.strip()
        if not part:
            continue
        if not is_remote(part) and glob.has_magic(part):
            names.extend(glob.glob(part))
        else:
            names.append(part)
    return names


def _same(a: str, b: str) -> bool:
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    if os.path.abspath(a) == os.path.abspath(b):
        return True
    try:
        return os.path.samefile(a, b)  # st_ino and st_dev: hard and symbolic links
    except OSError:
        return False  # one of them does not exist yet


# === One process per output ===

_held: dict[str, int] = {}  # lock file -> nesting depth in this process
_held_guard = threading.Lock()


def lock_file(path: str) -> str:
    """Where the lock of the output `path` (a file or a folder) lives: beside it."""
    return os.path.abspath(str(path)).rstrip("/") + ".lock"


@contextlib.contextmanager
def output_lock(path: str, make_parents: bool = True, folder: bool = False) -> Iterator[str | None]:
    """Holds `PATH.lock` while the block runs: another process taking the same
    output fails with OutputInUseError naming the owner's pid and host. A
    lock left by a process that is gone (same host, pid not running) is taken
    over with a warning on stderr. Nested use in one process is allowed.
    Remote outputs and devices (/dev/stdout) are not locked (yields None),
    nor, with `make_parents=False`, an output whose folder does not exist (the
    writer refuses it itself). In a multi-worker cluster only the chief takes
    the lock: the workers write one run together (`is_chief_process`).
    `folder=True`: the output is a folder of many files (a run's output dir),
    so an existing file of that name is refused before anything is written."""
    if folder and not is_remote(path) and os.path.exists(path) and not os.path.isdir(path):
        raise UserError(
            f"{path} is a file, and this output is a folder of files; "
            "choose a folder name that is not taken"
        )
    lock = lock_file(path)
    if (
        is_remote(path)
        or _is_special(path)
        or not is_chief_process()
        or (not make_parents and not os.path.isdir(os.path.dirname(lock)))
    ):
        yield None
        return
    with _held_guard:
        nested = _held.get(lock, 0)
        _held[lock] = nested + 1
    # The folders made to hold the lock, removed with it if the command left
    # them empty (a refused command leaves no empty output folder behind).
    made = [] if nested else _missing_folders(os.path.dirname(lock))
    try:
        if not nested:
            _acquire(lock, path)
        yield lock
    finally:
        with _held_guard:
            _held[lock] -= 1
            last = _held[lock] == 0
            if last:
                del _held[lock]
        if last and not nested:
            _release(lock)
            for folder in made:  # deepest first; stops at the first one in use
                try:
                    os.rmdir(folder)
                except OSError:
                    break


def running_writer(path: str) -> dict | None:
    """The lock record (pid, host, started, command) of the running process
    that writes `path` (its `PATH.lock`), or None: no lock, or a stale one."""
    if not path or is_remote(str(path)):
        return None
    lock = lock_file(path)
    if not os.path.exists(lock):
        return None
    owner = _read_owner(lock)
    if not owner or _is_stale(owner):
        return None
    return owner


def check_not_in_progress(path: str) -> None:
    """Raises OutputInUseError if a running process (a `finetune`, a
    `pretrain`) is writing `path`: what a reader finds there is a run's
    unfinished state, not a model. Readers call it where they would otherwise
    say "not a model folder"."""
    owner = running_writer(path)
    if owner is not None:
        raise OutputInUseError(
            f"{path}: a run is in progress there (process {owner.get('pid')} on "
            f"{owner.get('host')} since {owner.get('started')}: "
            f"{str(owner.get('command', ''))[:200]}); wait for it to finish, then read "
            f"the folder. If that process is gone, remove {lock_file(path)}"
        )


def is_chief_process(environ: Mapping[str, str] | None = None) -> bool:
    """False for the non-chief tasks of a multi-worker cluster (TF_CONFIG: a
    worker other than the chief, or worker 0 when a chief exists; an evaluator
    or a parameter server), which share the chief's output. Read from the
    environment, as tf.distribute does, without importing TensorFlow."""
    environ = os.environ if environ is None else environ
    try:
        tf_config = json.loads(environ.get("TF_CONFIG") or "{}")
        cluster, task = tf_config.get("cluster") or {}, tf_config.get("task") or {}
    except (ValueError, AttributeError):
        return True  # not a cluster we can read: tf.distribute will say so
    kind, index = task.get("type"), task.get("index", 0)
    if not cluster or kind is None:
        return True
    if kind == "chief":
        return True
    return kind == "worker" and index == 0 and "chief" not in cluster


def _acquire(lock: str, path: str) -> None:
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }
    with reporting_write_errors(lock):
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        # The record is written whole under a private name, then linked to the
        # lock's name: the link is atomic and fails if a lock exists, so the
        # lock file is never seen half-written.
        mine = f"{lock}.{os.getpid()}"
        with open(mine, "w", encoding="utf-8") as f:
            json.dump(owner, f)
        try:
            for _ in range(3):
                try:
                    os.link(mine, lock)
                    return
                except FileExistsError:
                    pass
                holder = _read_owner(lock)
                if holder is not None and not _is_stale(holder):
                    raise OutputInUseError(
                        f"{path} is in use by process {holder.get('pid')} on "
                        f"{holder.get('host')} (since {holder.get('started')}: "
                        f"{holder.get('command', '')[:200]}); wait for it to finish or choose "
                        f"another output. If that process is gone, remove {lock}"
                    )
                print(
                    f"warning: taking over the lock of {path}: its process "
                    f"{(holder or {}).get('pid')} on {(holder or {}).get('host')} is no "
                    f"longer running ({lock})",
                    file=sys.stderr,
                    flush=True,
                )
                with contextlib.suppress(FileNotFoundError):
                    os.remove(lock)
            raise OutputInUseError(
                f"{path}: could not take its lock {lock} (other processes "
                "keep taking it); try again"
            )
        finally:
            with contextlib.suppress(OSError):
                os.remove(mine)


def _missing_folders(folder: str) -> list[str]:
    """The folders of the path `folder` that do not exist yet, deepest first."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


def _read_owner(lock: str) -> dict | None:
    try:
        with open(lock, encoding="utf-8") as f:
            owner = json.load(f)
        return owner if isinstance(owner, dict) else None
    except FileNotFoundError:
        return {}  # released meanwhile: not stale, retry the link
    except (OSError, ValueError):
        return None  # unreadable (not ours, or a lock from another tool): stale


def _is_stale(owner: dict) -> bool:
    if not owner:
        return False  # released between our link and our read: just retry
    if owner.get("host") != socket.gethostname():
        return False  # another machine: its pid cannot be checked from here
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if pid == os.getpid():
        return True  # a lock of a former process that had our pid
    return not _pid_running(pid)


def _is_zombie(pid: int) -> bool:
    """A process that has exited but not been reaped still answers kill(pid, 0)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _release(lock: str) -> None:
    holder = _read_owner(lock)
    if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        with contextlib.suppress(OSError):
            os.remove(lock)


# === File system helpers (local, or tf.io.gfile for remote paths) ===


class _Local:
    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)

    @staticmethod
    def exists(path):
        return os.path.lexists(path)

    @staticmethod
    def rename(source, target):
        os.replace(source, target)


class _Remote:
    @staticmethod
    def makedirs(path):
        import tensorflow as tf

        tf.io.gfile.makedirs(path)

    @staticmethod
    def exists(path):
        import tensorflow as tf

        return tf.io.gfile.exists(path)

    @staticmethod
    def rename(source, target):
        import tensorflow as tf

        tf.io.gfile.rename(source, target, overwrite=True)


def _fs(path: str):
    return _Remote if is_remote(path) else _Local


def _parent(path: str) -> str:
    if is_remote(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(path))


def _is_special(path: str) -> bool:
    """A character or block device, FIFO or socket (through symbolic links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _remove(path: str) -> None:
    if is_remote(path):
        import tensorflow as tf

        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        elif tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def _sync(path: str) -> None:
    """The file's bytes on disk before its rename (a power cut after the rename
    would otherwise leave the final name on an empty file, on ext4 and XFS)."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
