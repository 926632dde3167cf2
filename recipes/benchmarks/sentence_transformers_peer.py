"""sentence-transformers' side of bbc_retrieval.py, run by a Python that has
sentence-transformers and PyTorch (not keras_bert's environment):

    python sentence_transformers_peer.py REQUEST.json OUT.npz

REQUEST: {"texts", "checkpoint", "seq_length", "batch_size"}; OUT: the
embeddings of `SentenceTransformer.encode` (N, D), the seconds the timed
encode took (after one untimed warm-up batch), the library versions.
"""

import json
import sys
import time

import numpy as np


def main(request_path, out_path):
    import sentence_transformers
    import torch
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    model = sentence_transformers.SentenceTransformer(request["checkpoint"], device="cpu")
    model.max_seq_length = request["seq_length"]
    texts, batch_size = request["texts"], request["batch_size"]
    with torch.inference_mode():
        model.encode(texts[:batch_size], batch_size=batch_size)
        start = time.perf_counter()
        embeddings = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
        seconds = time.perf_counter() - start
    versions = (f"sentence-transformers {sentence_transformers.__version__}, "
                f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    np.savez(out_path, embeddings=embeddings.astype(np.float32), seconds=seconds,
             versions=versions)


if __name__ == "__main__":
    main(*sys.argv[1:])
