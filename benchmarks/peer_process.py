"""A benchmark peer in a process of its own, asked over a pipe.

Why: with TensorFlow loaded in the same process, PyTorch's CPU work ran 2-10x
slower (and importing triton next to TensorFlow crashed), so a PyTorch peer
timed beside keras_bert would be treated unfairly. The benchmark starts the
peer's script (`PeerProcess`); the script hands its peer class to `serve`.
Requests and replies are pickled; the first request is the peer's constructor
arguments, answered by its facts ({"threads", "versions"}, or {"missing"}
when an import fails); `None` ends the process. Timing happens inside the
peer, so the pipe's cost is not counted.

The peer's Python is the peers' environment (benchmarks/README.md builds it
from benchmarks/requirements-peers.txt): `--peer-python`, else
$KERAS_BERT_PEER_PYTHON.
"""

import os
import pickle
import subprocess
import sys

PEER_PYTHON_VARIABLE = "KERAS_BERT_PEER_PYTHON"


def add_peer_python_argument(parser):
    parser.add_argument(
        "--peer-python",
        default=os.environ.get(PEER_PYTHON_VARIABLE),
        help="the Python of the PyTorch peers' environment (default: "
        f"${PEER_PYTHON_VARIABLE}; benchmarks/README.md builds it)",
    )


def peer_python(value):
    """The peers' interpreter from `--peer-python` / $KERAS_BERT_PEER_PYTHON, or
    SystemExit saying how to get one."""
    if not value:
        raise SystemExit(
            f"no Python for the PyTorch peers: pass --peer-python or set {PEER_PYTHON_VARIABLE} "
            "to the python of an environment built from benchmarks/requirements-peers.txt "
            "(benchmarks/README.md, 'The peers' environments')"
        )
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        raise SystemExit(
            f"--peer-python / {PEER_PYTHON_VARIABLE}: {value!r} is not an executable Python"
        )
    return value


def serve(make_peer):
    """The peer process's loop: build `make_peer(**setup)`, then answer
    `peer.serve(request)` for each request."""
    replies = os.fdopen(os.dup(1), "wb")
    sys.stdout = sys.stderr  # library chatter must not reach the reply stream
    requests = sys.stdin.buffer
    setup = pickle.load(requests)
    try:
        peer = make_peer(**setup)
        pickle.dump({"threads": peer.threads, "versions": peer.versions}, replies)
    except ImportError as error:
        pickle.dump({"missing": str(error)}, replies)
        replies.flush()
        return
    replies.flush()
    while (request := pickle.load(requests)) is not None:
        pickle.dump(peer.serve(request), replies)
        replies.flush()


class PeerProcess:
    """The benchmark's side: starts `script` under `python` (with `env` added
    to this process's environment), sends `setup`; `facts` holds the peer's
    answer."""

    def __init__(self, script, setup, python=sys.executable, env=None):
        self.process = subprocess.Popen(
            [python, script],
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.facts = self.ask(setup)

    def ask(self, request):
        pickle.dump(request, self.process.stdin)
        self.process.stdin.flush()
        return pickle.load(self.process.stdout)

    def close(self):
        pickle.dump(None, self.process.stdin)
        self.process.stdin.close()
        self.process.wait()
