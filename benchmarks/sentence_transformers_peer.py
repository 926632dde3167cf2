"""sentence-transformers' side of bbc_retrieval.py, in a process of its own
(`peer_process`: why, and how the two talk), under a Python that has
sentence-transformers and PyTorch (not keras_bert's environment).

Setup: {"checkpoint", "seq_length", "threads"}. Requests: ("embed", texts,
batch_size) -> `SentenceTransformer.encode`'s embeddings (N, D) float32;
("time", texts, batch_size) -> the seconds one encode of them takes; None: exit.
"""

import time

from peer_process import serve


class SentenceTransformersPeer:
    def __init__(self, checkpoint, seq_length, threads=None):
        import sentence_transformers
        import torch

        self.torch = torch
        if threads:
            torch.set_num_threads(int(threads))
        self.model = sentence_transformers.SentenceTransformer(checkpoint, device="cpu")
        self.model.max_seq_length = seq_length
        self.threads = torch.get_num_threads()
        self.versions = (
            f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
        )

    def encode(self, texts, batch_size):
        with self.torch.inference_mode():
            return self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True)

    def serve(self, request):
        kind, texts, batch_size = request
        if kind == "embed":
            return self.encode(texts, batch_size).astype("float32")
        start = time.perf_counter()
        self.encode(texts, batch_size)
        return time.perf_counter() - start


if __name__ == "__main__":
    serve(SentenceTransformersPeer)
