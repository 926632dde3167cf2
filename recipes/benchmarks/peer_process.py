"""A benchmark peer in a process of its own, asked over a pipe.

Why: with TensorFlow loaded in the same process, PyTorch's CPU work ran 2-10x
slower (and importing triton next to TensorFlow crashed), so a PyTorch peer
timed beside keras_bert would be treated unfairly. The benchmark starts the
peer's script (`PeerProcess`); the script hands its peer class to `serve`.
Requests and replies are pickled; the first request is the peer's constructor
arguments, answered by its facts ({"threads", "versions"}, or {"missing"}
when an import fails); `None` ends the process. Timing happens inside the
peer, so the pipe's cost is not counted.
"""

import os
import pickle
import subprocess
import sys


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
        self.process = subprocess.Popen([python, script], env={**os.environ, **(env or {})},
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.facts = self.ask(setup)

    def ask(self, request):
        pickle.dump(request, self.process.stdin)
        self.process.stdin.flush()
        return pickle.load(self.process.stdout)

    def close(self):
        pickle.dump(None, self.process.stdin)
        self.process.stdin.close()
        self.process.wait()
