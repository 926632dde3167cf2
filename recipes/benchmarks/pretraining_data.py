"""Benchmark: `keras-bert create-pretraining-data` against the original.

The original is Model Garden's copy of google-research/bert's script
(`python -m official.nlp.data.create_pretraining_data`). Both run in this
process's children on the same corpus (the six Austen novels prepared by
`keras-bert prepare-corpus`), with the same settings (dupe factor 5, sequence
length 128, the other flags at their defaults). Throughput is instances per
second of wall-clock time of the whole command (start-up included); ours is the
best of `--repeats` runs. Peak RSS is that of the largest process of a run
(`ru_maxrss` of the waited-for children), measured on the corpus and on it
repeated 8 times, to show that memory does not grow with the corpus.

    python recipes/benchmarks/pretraining_data.py [--repeats 3] [--skip-original]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AUSTEN = os.path.join(ROOT, "..", "shared", "datasets", "austen")
VOCAB = os.path.join(ROOT, "data", "vocab", "bert_uncased_vocab.txt")

# Runs a command and prints the peak RSS (KiB) of its largest process.
MEASURE = ("import resource, subprocess, sys; "
           "code = subprocess.run(sys.argv[1:]).returncode; "
           "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
           "file=sys.stderr); sys.exit(code)")


def run(command):
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True,
                            text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    seconds = time.perf_counter() - started
    output = result.stdout + result.stderr
    if result.returncode:
        raise SystemExit(f"failed: {' '.join(command)}\n{output[-3000:]}")
    peak = int(re.search(r"PEAK_RSS_KB (\d+)", output).group(1))
    return seconds, peak, output


def ours(corpus_file, out_dir):
    seconds, peak, output = run([
        sys.executable, "-m", "keras_bert.cli", "create-pretraining-data",
        "--input-file", corpus_file, "--output-file", os.path.join(out_dir, "ours.tfrecord"),
        "--vocab-file", VOCAB, "--dupe-factor", "5", "--max-seq-length", "128", "--quiet"])
    instances = int(re.search(r"^instances: (\d+)", output, re.M).group(1))
    not_next = re.search(r"^NotNext: ([\d.]+) %", output, re.M).group(1)
    return seconds, peak, instances, not_next


def original(corpus_file, out_dir):
    seconds, peak, output = run([
        sys.executable, "-m", "official.nlp.data.create_pretraining_data",
        f"--input_file={corpus_file}", f"--output_file={os.path.join(out_dir, 'orig.tfrecord')}",
        f"--vocab_file={VOCAB}", "--dupe_factor=5", "--max_seq_length=128"])
    instances = int(re.search(r"Wrote (\d+) total instances", output).group(1))
    return seconds, peak, instances


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timing runs of ours (best kept)")
    parser.add_argument("--skip-original", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from keras_bert.corpus import prepare_corpus

    with tempfile.TemporaryDirectory() as tmp:
        corpus_1x = os.path.join(tmp, "austen.txt")
        documents, sentences = prepare_corpus("books", [AUSTEN], corpus_1x)
        corpus_8x = os.path.join(tmp, "austen_x8.txt")
        text = open(corpus_1x, encoding="utf-8").read()
        with open(corpus_8x, "w", encoding="utf-8") as f:
            f.write("\n".join([text] * 8))
        print(f"corpus: six Austen novels, {documents} documents (chapters), {sentences} "
              f"sentences, {os.path.getsize(corpus_1x) / 1e6:.1f} MB; {os.cpu_count()} cores")
        print("settings: --dupe-factor 5 --max-seq-length 128, other flags at their defaults")

        runs = [ours(corpus_1x, tmp) for _ in range(args.repeats)]
        seconds, peak_1x, instances, not_next = min(runs)
        ours_rate = instances / seconds
        print(f"ours:     {instances} instances in {seconds:.1f} s (best of {args.repeats}) = "
              f"{ours_rate:.0f} instances/s, peak RSS {peak_1x / 1024:.0f} MiB, "
              f"NotNext {not_next} %")
        seconds_8x, peak_8x, instances_8x, _ = ours(corpus_8x, tmp)
        print(f"ours x8:  {instances_8x} instances in {seconds_8x:.1f} s = "
              f"{instances_8x / seconds_8x:.0f} instances/s, peak RSS {peak_8x / 1024:.0f} MiB "
              f"(x{peak_8x / peak_1x:.2f} the 1x peak for 8x the corpus)")
        if not args.skip_original:
            seconds, peak, instances = original(corpus_1x, tmp)
            rate = instances / seconds
            print(f"original: {instances} instances in {seconds:.1f} s = {rate:.0f} instances/s, "
                  f"peak RSS {peak / 1024:.0f} MiB")
            print(f"ratio:    ours / original = {ours_rate / rate:.1f}x")


if __name__ == "__main__":
    main()
