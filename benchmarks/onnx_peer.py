"""ONNX Runtime, float32 and dynamic int8, at its best: the peer of `cpu_serving.py`,
in a process of its own (`peer_process`: why, and how the two talk).

The classifier is `hf_reference_classifier.py`'s fine-tune (the weights
keras_bert's exports hold), exported as a user following ONNX Runtime's BERT
guide does:

- `torch.onnx.export` (TorchScript exporter, eager attention, batch and
  sequence axes dynamic), then ONNX Runtime's transformer optimizer
  (`onnxruntime.transformers.optimizer.optimize_model`, model_type "bert":
  fused attention, LayerNorm, GELU and embeddings; what Optimum's O2 does);
- int8: `onnxruntime.quantization.quantize_dynamic` of the optimized model
  (int8 weights, activations quantized per call: ONNX Runtime's VNNI / AMX
  kernels where the CPU has them; the recipe of its BERT int8 notebook);
- sessions with every graph optimization on, intra-op threads = the given
  count (the cores) and no spinning (faster on a shared machine), as its
  performance guide says.

Texts come as strings and are tokenized by the checkpoint's fast tokenizer
(Rust), padded to the batch's longest: the time is end to end, strings in,
as keras_bert's `serving_default`.

Requests: ("time", form, texts, repeats) -> seconds per call (mean over
`repeats` back-to-back calls); ("predict", form, texts) -> label ids;
("logits", form, texts) -> (B, C) array;
("forms",) -> the form names; None: exit.
"""

import os
import time

from peer_process import serve

FORMS = ("onnxruntime float32", "onnxruntime int8")


class OnnxRuntimePeer:
    def __init__(self, classifier, threads, seq_length, folder):
        import numpy as np
        import onnxruntime
        import torch
        import transformers

        self.np = np
        self.seq_length = seq_length
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(classifier, use_fast=True)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            classifier, attn_implementation="eager"
        ).eval()
        paths = export_forms(torch, model, self.tokenizer, folder)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Its threads wait without spinning: on 2 shared cores (load 6.5) spinning
        # threads made MiniLM 2.9x slower at batch 1 (18.7 against 6.4 ms) and
        # 1.3x at batch 32; its best here, as its performance guide suggests
        # for busy machines.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sessions = {
            form: onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            for form, path in paths.items()
        }
        self.threads = threads
        # str(): torch's version is a TorchVersion, which the benchmark's
        # process (no torch) could not unpickle.
        self.versions = {
            "onnxruntime": str(onnxruntime.__version__),
            "torch (export)": str(torch.__version__),
            "transformers": str(transformers.__version__),
        }

    def logits(self, form, texts):
        batch = self.tokenizer(
            list(texts),
            truncation=True,
            max_length=self.seq_length,
            padding=True,
            return_tensors="np",
        )
        session = self.sessions[form]
        wanted = {i.name for i in session.get_inputs()}
        feeds = {
            name: value.astype(self.np.int64) for name, value in batch.items() if name in wanted
        }
        return session.run(["logits"], feeds)[0]

    def serve(self, request):
        kind = request[0]
        if kind == "forms":
            return list(self.sessions)
        if kind == "logits":
            _, form, texts = request
            return self.logits(form, texts)
        if kind == "predict":
            _, form, texts = request
            return self.logits(form, texts).argmax(-1).tolist()
        if kind == "time":
            _, form, texts, repeats = request
            start = time.perf_counter()
            for _ in range(repeats):
                self.logits(form, texts)
            return (time.perf_counter() - start) / repeats
        raise ValueError(f"unknown request {kind!r}")


def export_forms(torch, model, tokenizer, folder):
    """{form: .onnx path}: the exported, optimized and int8-quantized files."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    os.makedirs(folder, exist_ok=True)
    plain = os.path.join(folder, "classifier.onnx")
    example = tokenizer(
        ["a first review", "a second, longer review"], padding=True, return_tensors="pt"
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    torch.onnx.export(
        model,
        (),
        plain,
        kwargs={name: example[name] for name in names},
        input_names=names,
        output_names=["logits"],
        dynamic_axes={**axes, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    config = model.config
    optimized = optimize_model(
        plain,
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
        opt_level=1,
    )
    print(f"onnx_peer: fused operators {optimized.get_fused_operator_statistics()}")
    fused = os.path.join(folder, "classifier_optimized.onnx")
    optimized.save_model_to_file(fused)
    int8 = os.path.join(folder, "classifier_int8.onnx")
    # The fused operators (com.microsoft domain) defeat the quantizer's shape
    # inference: it is told their outputs are float32, which they are.
    quantize_dynamic(
        fused,
        int8,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return {FORMS[0]: fused, FORMS[1]: int8}


if __name__ == "__main__":
    serve(OnnxRuntimePeer)
