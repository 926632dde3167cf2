"""keras_bert.safe_output: outputs appear whole or not at all, never onto an
input, one process per output, and the system's refusals as one clear error.

Tests run as root, where chmod does not stop a write: permission and
read-only faults are injected (an OSError with that errno), disk full is the
real thing (a file size limit, RLIMIT_FSIZE, in a child process) or injected.
"""

import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

from keras_bert import errors, safe_output

from harness import output_locked_by_another_process
from repo_paths import REPO_ROOT


def leftovers(folder):
    """Temporary outputs or locks left in `folder`."""
    return sorted(
        name
        for name in os.listdir(folder)
        if ".partial-" in name or name.endswith(".lock") or ".old-" in name
    )


# === Whole or not at all ===


def test_a_file_is_replaced_whole(tmp_path):
    path = str(tmp_path / "answers.jsonl")
    safe_output.write_text(path, "old\n")
    safe_output.write_json(path, {"a": 1})
    assert json.loads(open(path).read()) == {"a": 1}
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "number, says",
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EDQUOT, "the disk quota is used up"),
        (errno.EFBIG, "file size limit"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "the file system is read-only"),
    ],
)
def test_a_refused_write_is_one_error_and_leaves_the_old_file(tmp_path, number, says):
    path = str(tmp_path / "vocab.txt")
    safe_output.write_text(path, "[PAD]\n")
    with pytest.raises(errors.OutputError) as caught:
        with safe_output.open_replacing(path) as f:
            f.write("[PAD]\n[UNK]\n")
            raise OSError(number, os.strerror(number))
    assert path in str(caught.value) and says in str(caught.value)
    assert open(path).read() == "[PAD]\n"  # the old output, untouched
    assert leftovers(tmp_path) == []


def test_a_refused_rename_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    """The folder turned read-only between the write and the rename."""
    path = str(tmp_path / "model.keras")

    def read_only(source, target):
        raise OSError(errno.EROFS, "Read-only file system", target)

    monkeypatch.setattr(os, "replace", read_only)
    with pytest.raises(errors.OutputError, match="read-only"):
        safe_output.write_bytes(path, b"weights")
    assert not os.path.exists(path)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "kind, message, says",
    [
        ("ResourceExhaustedError", "No space left on device", "the disk is full"),
        ("OutOfRangeError", "File too large", "ulimit -f"),  # SaveV2 under a file size limit
        ("PermissionDeniedError", "Permission denied", "permission denied"),
        ("FailedPreconditionError", "Read-only file system", "read-only"),
    ],
)
def test_a_tensorflow_write_error_is_translated(tmp_path, kind, message, says):
    """TensorFlow's file ops (SaveV2, TFRecordWriter, GFile) carry no errno:
    the refusal is read from the message (e.g. a model folder turned
    read-only in the middle of pretraining)."""
    import tensorflow as tf

    path = str(tmp_path / "ckpt")
    with pytest.raises(errors.OutputError, match=says) as caught:
        with safe_output.reporting_write_errors(path):
            raise getattr(tf.errors, kind)(
                None, None, f"{path}/variables.data-00000-of-00001; {message}"
            )
    assert f"cannot write {path}" in str(caught.value)


def test_other_errors_pass_through_unchanged(tmp_path):
    with pytest.raises(KeyError):
        with safe_output.open_replacing(str(tmp_path / "a.txt")) as f:
            f.write("x")
            raise KeyError("a bug")
    assert leftovers(tmp_path) == []
    assert not os.path.exists(tmp_path / "a.txt")


FULL_DISK = textwrap.dedent("""
    import resource, sys
    from keras_bert import errors, safe_output
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # a disk that is full at 4 KiB
    try:
        safe_output.write_text(sys.argv[1], "x" * 100_000)
    except errors.OutputError as e:
        print(e)
        sys.exit(3)
""")


def test_a_real_file_size_limit_is_one_error_and_no_file(tmp_path):
    path = str(tmp_path / "big.txt")
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, path],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert result.returncode == 3, result.stderr
    assert f"cannot write {path}" in result.stdout and "ulimit -f" in result.stdout
    assert not os.path.exists(path)
    assert leftovers(tmp_path) == []


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "export" / "1"
    with safe_output.replacing(str(target), folder=True) as staging:
        os.makedirs(staging)
        open(os.path.join(staging, "saved_model.pb"), "w").write("first")
    with pytest.raises(errors.OutputError):
        with safe_output.replacing(str(target), folder=True) as staging:
            os.makedirs(staging)
            open(os.path.join(staging, "saved_model.pb"), "w").write("second, torn")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert open(target / "saved_model.pb").read() == "first"
    with safe_output.replacing(str(target), folder=True) as staging:
        os.makedirs(staging)
        open(os.path.join(staging, "saved_model.pb"), "w").write("third")
    assert os.listdir(target) == ["saved_model.pb"]
    assert open(target / "saved_model.pb").read() == "third"
    assert leftovers(tmp_path / "export") == []


def test_keep_extension_for_writers_that_insist(tmp_path):
    with safe_output.replacing(str(tmp_path / "model.keras"), keep_extension=True) as partial:
        assert partial.endswith(".keras") and ".partial-" in partial
        open(partial, "w").write("zip")
    assert os.listdir(tmp_path) == ["model.keras"]


# === Never onto an input ===


def test_the_output_may_not_be_an_input(tmp_path):
    source = tmp_path / "a.txt"
    source.write_text("the inputs\n")
    os.link(source, tmp_path / "hard.txt")
    os.symlink(source, tmp_path / "soft.txt")
    for output in (
        str(source),
        str(tmp_path / "." / "a.txt"),
        str(tmp_path / "hard.txt"),
        str(tmp_path / "soft.txt"),
    ):
        with pytest.raises(errors.OutputIsInputError, match="would destroy the input"):
            safe_output.check_not_input(output, [str(source)], "--output")
    with pytest.raises(errors.OutputIsInputError):  # inputs as a glob or a comma list
        safe_output.check_not_input(str(tmp_path / "hard.txt"), [f"x.txt,{tmp_path}/*.txt"])
    safe_output.check_not_input(str(tmp_path / "b.txt"), [str(source)])  # another file: fine
    with pytest.raises(errors.OutputIsInputError):
        safe_output.copy_file(str(source), str(tmp_path / "hard.txt"))
    assert source.read_text() == "the inputs\n"


# === One process per output ===


def test_an_output_in_use_by_another_process_is_refused(tmp_path):
    output = str(tmp_path / "run")
    with output_locked_by_another_process(output) as holder_pid:
        with pytest.raises(errors.OutputInUseError, match=f"in use by process {holder_pid} on "):
            with safe_output.output_lock(output):
                pass
    with safe_output.output_lock(output):  # released: free again
        pass
    assert leftovers(tmp_path) == []


def test_a_stale_lock_is_taken_over_with_a_warning(tmp_path, capsys):
    import socket

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid is no longer running
    output = str(tmp_path / "out.jsonl")
    with open(safe_output.lock_file(output), "w") as f:
        json.dump({"pid": gone.pid, "host": socket.gethostname(), "started": "earlier"}, f)
    with safe_output.output_lock(output) as lock:
        assert json.load(open(lock))["pid"] == os.getpid()
    assert f"taking over the lock of {output}: its process {gone.pid}" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_a_lock_of_another_host_is_not_taken_over(tmp_path):
    output = str(tmp_path / "out")
    with open(safe_output.lock_file(output), "w") as f:
        json.dump({"pid": 1, "host": "some-other-machine", "started": "earlier"}, f)
    with pytest.raises(
        errors.OutputInUseError, match="some-other-machine.*If that process is gone, remove"
    ):
        with safe_output.output_lock(output):
            pass


def test_the_lock_is_reentrant_within_a_process(tmp_path):
    output = str(tmp_path / "out")
    with safe_output.output_lock(output):
        with safe_output.output_lock(output):
            pass
        assert os.path.exists(safe_output.lock_file(output))  # the outer block still holds it
    assert not os.path.exists(safe_output.lock_file(output))


# === Devices and links ===


def test_a_device_is_written_in_place_never_replaced(tmp_path):
    """/dev/null (or /dev/stdout, a pipe) as the output: written to, and the
    device node stays (renaming over it, as root, would replace it with a file)."""
    import stat

    before = os.stat("/dev/null")
    safe_output.write_text("/dev/null", "answers\n")
    with safe_output.output_lock("/dev/null") as lock:
        assert lock is None
    safe_output.check_not_input("/dev/null", ["/dev/null"])  # nothing to lose
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert not [name for name in os.listdir("/dev") if name.startswith("null.")]


def test_a_symbolic_link_keeps_pointing_at_its_replaced_target(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    os.symlink(target, tmp_path / "link.txt")
    safe_output.write_text(str(tmp_path / "link.txt"), "new\n")
    assert os.path.islink(tmp_path / "link.txt") and target.read_text() == "new\n"
    assert leftovers(tmp_path) == []


def test_an_output_may_not_replace_a_file_of_an_input_folder(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.keras").write_text("weights")
    with pytest.raises(errors.OutputIsInputError, match="is a file of the input folder"):
        safe_output.check_not_input(str(model / "model.keras"), [str(model)], "--output")
    # A new name inside the input folder is fine.
    safe_output.check_not_input(str(model / "answers.jsonl"), [str(model)], "--output")
    # A folder replaced whole may not hold an input.
    with pytest.raises(errors.OutputIsInputError, match="holds the input"):
        safe_output.check_inputs_outside(str(tmp_path), [str(model / "model.keras")])
    safe_output.check_inputs_outside(str(tmp_path / "export" / "1"), [str(model)])


def test_only_a_clusters_chief_takes_the_lock(tmp_path, monkeypatch):
    """The workers of one multi-worker run share its output: the lock is the chief's."""

    def tf_config(kind, index, chief=False):
        cluster = {"worker": ["h:1", "h:2"], **({"chief": ["h:0"]} if chief else {})}
        return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})

    assert safe_output.is_chief_process({})
    assert safe_output.is_chief_process({"TF_CONFIG": tf_config("worker", 0)})
    assert not safe_output.is_chief_process({"TF_CONFIG": tf_config("worker", 1)})
    assert safe_output.is_chief_process({"TF_CONFIG": tf_config("chief", 0, chief=True)})
    assert not safe_output.is_chief_process({"TF_CONFIG": tf_config("worker", 0, chief=True)})
    assert not safe_output.is_chief_process({"TF_CONFIG": tf_config("evaluator", 0)})
    output = str(tmp_path / "run")
    with safe_output.output_lock(output):  # the chief holds it ...
        monkeypatch.setenv("TF_CONFIG", tf_config("worker", 1))
        with safe_output.output_lock(output) as lock:  # ... a worker writes beside it
            assert lock is None


def test_remote_paths_go_through_tf_io_gfile():
    """gs:// and other file systems of TensorFlow (here its in-memory ram://):
    written beside and renamed, folders too; no inode, no lock."""
    import tensorflow as tf

    path = "ram://safe_output_test/run/finetune_config.json"
    safe_output.write_json(path, {"task": "classify"})
    with tf.io.gfile.GFile(path) as f:
        assert json.load(f) == {"task": "classify"}
    with pytest.raises(errors.OutputError, match="the disk is full"):
        with safe_output.open_replacing(path) as f:
            f.write("torn")
            raise OSError(errno.ENOSPC, "No space left on device")
    with tf.io.gfile.GFile(path) as f:
        assert json.load(f) == {"task": "classify"}
    assert tf.io.gfile.listdir("ram://safe_output_test/run") == ["finetune_config.json"]
    with safe_output.output_lock("ram://safe_output_test/run") as lock:
        assert lock is None


def test_a_folder_output_that_is_a_file_is_refused_before_writing(tmp_path):
    taken = tmp_path / "train.tsv"
    taken.write_text("label\tsentence\n")
    with pytest.raises(errors.UserError, match="train.tsv is a file, and this output is a folder"):
        with safe_output.output_lock(str(taken), folder=True):
            pass
    assert taken.read_text() == "label\tsentence\n"
    assert not os.path.exists(f"{taken}.lock")
    with safe_output.output_lock(str(tmp_path / "run"), folder=True) as lock:
        assert lock == str(tmp_path / "run.lock")
