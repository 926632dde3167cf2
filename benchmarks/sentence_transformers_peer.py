"""sentence-transformers' side of bbc_retrieval.py, in a process of its own
(`peer_process`: why, and how the two talk), under a Python that has
sentence-transformers and PyTorch (not keras_bert's environment).

Its backends, as its efficiency guide offers them on a CPU:

- "sentence-transformers torch": the default (PyTorch, float32);
- "sentence-transformers onnx": `backend="onnx"` (Optimum's export, ONNX Runtime);
- "sentence-transformers onnx int8": `export_dynamic_quantized_onnx_model` with
  the quantization config named for this CPU ("avx512_vnni" where it has VNNI,
  else "avx2"), loaded by its file name.

The ONNX ones need the `onnx` extra (optimum-onnx), which installs only beside
some sentence-transformers releases: where it is missing, the backend is left
out and the reason given (`("backends",)`).

Setup: {"checkpoint", "seq_length", "threads", "folder"}. Requests:
("backends",) -> {backend: None, or why it is missing}; ("embed", backend,
texts, batch_size) -> `encode`'s embeddings (N, D) float32; ("time", backend,
texts, batch_size) -> the seconds one encode of them takes; None: exit.
"""

import os
import shutil
import time

from peer_process import serve

DEFAULT = "sentence-transformers torch"


def cpu_flags():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


class SentenceTransformersPeer:
    def __init__(self, checkpoint, seq_length, threads=None, folder=None):
        import sentence_transformers
        import torch

        self.torch = torch
        if threads:
            torch.set_num_threads(int(threads))
        self.threads = torch.get_num_threads()
        self.versions = (
            f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
        )
        self.models = {DEFAULT: sentence_transformers.SentenceTransformer(checkpoint, device="cpu")}
        self.missing = {}
        try:
            self.load_onnx(sentence_transformers, checkpoint, folder)
        except Exception as error:  # the onnx extra is absent or refuses this checkpoint
            self.missing["sentence-transformers onnx"] = f"{type(error).__name__}: {error}"
        for model in self.models.values():
            model.max_seq_length = seq_length

    def load_onnx(self, sentence_transformers, checkpoint, folder):
        import onnxruntime

        # A copy: the export and the quantized file are written into the folder.
        copy = os.path.join(folder, "checkpoint")
        shutil.copytree(checkpoint, copy, dirs_exist_ok=True)
        model = sentence_transformers.SentenceTransformer(copy, device="cpu", backend="onnx")
        model.save_pretrained(copy)  # the exported onnx/model.onnx beside the weights
        self.models["sentence-transformers onnx"] = model
        config = "avx512_vnni" if "avx512_vnni" in cpu_flags() else "avx2"
        sentence_transformers.export_dynamic_quantized_onnx_model(model, config, copy)
        self.models["sentence-transformers onnx int8"] = sentence_transformers.SentenceTransformer(
            copy,
            device="cpu",
            backend="onnx",
            model_kwargs={"file_name": f"onnx/model_qint8_{config}.onnx"},
        )
        self.versions += f", onnxruntime {onnxruntime.__version__} (int8 config {config})"

    def encode(self, backend, texts, batch_size):
        with self.torch.inference_mode():
            return self.models[backend].encode(texts, batch_size=batch_size, convert_to_numpy=True)

    def serve(self, request):
        if request[0] == "backends":
            return {**{name: None for name in self.models}, **self.missing}
        kind, backend, texts, batch_size = request
        if kind == "embed":
            return self.encode(backend, texts, batch_size).astype("float32")
        start = time.perf_counter()
        self.encode(backend, texts, batch_size)
        return time.perf_counter() - start


if __name__ == "__main__":
    serve(SentenceTransformersPeer)
