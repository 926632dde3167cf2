"""Runs a script as every worker of a MultiWorkerMirroredStrategy cluster on
127.0.0.1 (free ports, TF_CONFIG per process) and returns what each printed."""

import json
import os
import socket
import subprocess
import sys


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(script, arguments, count=2, timeout=600):
    """`python -c script *arguments` as `count` workers; asserts each exits 0."""
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(count)]
    processes = []
    for index in range(count):
        env = dict(
            os.environ,
            TF_CONFIG=json.dumps(
                {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            ),
        )
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", script, *arguments],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=timeout)[0] for p in processes]
    for p, output in zip(processes, outputs):
        assert p.returncode == 0, output
    return outputs


def printed_json(outputs, prefix):
    """The JSON after `prefix` on each output's lines that start with it."""
    return [
        json.loads(line[len(prefix) :])
        for output in outputs
        for line in output.splitlines()
        if line.startswith(prefix)
    ]
