"""The HuggingFace (PyTorch) peers of `inference.py`, in a process of their own
(`peer_process`: why, and how the two talk).

Requests: ("setup", options) -> facts; ("peers",) -> the peer names;
("time", peer, texts) -> seconds; ("logits", peer, texts) -> array
(the pipeline's: the bare model's); ("length", texts) -> padded length;
None: exit.
"""

import os
import time

from peer_process import serve

SEQ_LENGTH = 128


class TorchPeers:
    def __init__(self, checkpoint, head_kernel, head_bias, threads, config=None, compile=True):
        import numpy as np
        import torch
        import transformers

        self.torch = torch
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint, use_fast=True)
        if config is None:
            self.model = transformers.AutoModelForSequenceClassification.from_pretrained(
                checkpoint, num_labels=head_kernel.shape[1]
            ).eval()
        else:  # another size (--preset): random weights; speed does not depend on them
            self.model = transformers.BertForSequenceClassification(
                transformers.BertConfig(**config, num_labels=head_kernel.shape[1])
            ).eval()
        with torch.no_grad():  # the same head as keras_bert's classifier
            self.model.classifier.weight.copy_(
                torch.from_numpy(np.ascontiguousarray(head_kernel.T))
            )
            self.model.classifier.bias.copy_(torch.from_numpy(head_bias))
        self.pipe = transformers.pipeline(
            "text-classification", model=self.model, tokenizer=self.tokenizer, device="cpu"
        )
        self.padding = "longest"
        self.threads = self.best_threads() if threads == "best" else int(threads)
        torch.set_num_threads(self.threads)
        self.versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
        self.compiled = self.compile() if compile else None

    def compile(self):
        """The model under `torch.compile` (inductor) with freezing: weights as
        constants, prepacked for oneDNN, elementwise ops fused into generated
        C++; dynamic shapes, as lengths vary. PyTorch's fastest CPU inference
        here (MiniLM reviews, 2 cores, without `mkl_shim`: b1 3.7 ms, b32 289
        seq/s, against eager 7.8 ms and 151 seq/s). None when it cannot compile
        (it needs a C++ compiler)."""
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True
        compiled = self.torch.compile(self.model, dynamic=True)
        try:
            with self.torch.inference_mode():
                for texts in (["a warm-up review"], ["a warm-up review"] * 32):
                    compiled(**self.encode(texts))
        except Exception as error:  # noqa: BLE001 (any backend failure: report, go on)
            print(f"hf compiled: unavailable ({type(error).__name__}: {error})"[:300])
            return None
        return compiled

    def best_threads(self):
        """The faster of 1 .. all cores on a batch-1 and a batch-8 call: on a
        shared 2-core machine one thread often beats two (OpenMP barriers wait
        for a descheduled thread)."""
        texts = ["Mana gives us compelling, damaged characters who we want to help -- or hurt."]
        best, best_time = 1, float("inf")
        for threads in range(1, (os.cpu_count() or 1) + 1):
            self.torch.set_num_threads(threads)
            for batch in (texts, texts * 8):
                self.run("hf model", batch)
            seconds = min(
                sum(self.seconds("hf model", batch) for batch in (texts, texts * 8))
                for _ in range(10)
            )
            if seconds < best_time:
                best, best_time = threads, seconds
        return best

    def encode(self, texts):
        return self.tokenizer(
            texts, padding=self.padding, truncation=True, max_length=SEQ_LENGTH, return_tensors="pt"
        )

    def products_alone(self, x, texts):
        """The bare model's linear layers alone, eager (`inference.py`'s
        `products alone` rows), chained from `x`: one row per position it computes
        (every position of the padded batch, in every layer). `hf compiled` can
        be faster than this: freezing runs its products on prepacked weights."""
        functional = self.torch.nn.functional
        for layer in self.model.bert.encoder.layer:
            for linear in (
                layer.attention.self.key,
                layer.attention.self.value,
                layer.attention.self.query,
                layer.attention.output.dense,
                layer.intermediate.dense,
                layer.output.dense,
            ):
                x = functional.linear(x, linear.weight, linear.bias)
        pooler = self.model.bert.pooler.dense
        return functional.linear(x[: len(texts)], pooler.weight, pooler.bias).numpy()

    def run(self, peer, texts):
        with self.torch.inference_mode():
            if peer == "products alone: hf eager":
                return self.products_alone(self.floor_input(texts), texts)
            if peer == "hf model":
                return self.model(**self.encode(texts)).logits.numpy()
            if peer == "hf compiled":
                return self.compiled(**self.encode(texts)).logits.numpy()
            return self.pipe(
                texts,
                batch_size=len(texts),
                truncation=True,
                max_length=SEQ_LENGTH,
                padding=self.padding,
            )

    def floor_input(self, texts):
        rows = self.encode(texts)["input_ids"].numel()
        return self.torch.full((rows, self.model.config.hidden_size), 0.1)

    def seconds(self, peer, texts):
        if peer == "products alone: hf eager":  # the products only, rows known beforehand
            x = self.floor_input(texts)
            with self.torch.inference_mode():
                start = time.perf_counter()
                self.products_alone(x, texts)
                return time.perf_counter() - start
        start = time.perf_counter()
        self.run(peer, texts)
        return time.perf_counter() - start

    def serve(self, request):
        kind = request[0]
        if kind == "padding":
            self.padding = request[1]
            return None
        if kind == "time":
            return self.seconds(request[1], request[2])
        if kind == "logits":
            return self.run(request[1] if request[1] != "hf pipeline" else "hf model", request[2])
        if kind == "peers":
            compiled = ["hf compiled"] if self.compiled is not None else []
            return ["hf model", "hf pipeline"] + compiled + ["products alone: hf eager"]
        if kind == "length":
            return (
                SEQ_LENGTH
                if self.padding == "max_length"
                else self.encode(request[1])["input_ids"].shape[1]
            )
        raise ValueError(f"unknown request {kind}")


def main():
    serve(TorchPeers)


if __name__ == "__main__":
    main()
