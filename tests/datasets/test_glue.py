"""GLUE readers: original TSV layouts parsed as TFDS's own GLUE builder parses
them (its `_generate_examples` is the reference), TFDS reading through mock
data, and each task's metrics."""

import numpy as np
import pytest
import sklearn.metrics
import tensorflow_datasets as tfds

from keras_bert.datasets import glue

# A few rows of each original file, in its original column layout.
TSV = {
    "cola": (
        "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
        "gj04\t0\t*\tThey drank the pub.\n"
    ),
    "sst2": "sentence\tlabel\nit 's a charming and often affecting journey . \t1\n"
    "unflinchingly bleak and desperate \t0\n",
    "qqp": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    '1\t3\t4\tHow do I learn "Python"?\tWhat is the best way to learn Python?\t1\n'
    "2\t5\t6\tWhy is the sky blue?\tWho painted the Mona Lisa?\t0\n",
    "stsb": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard hat is "
    "dancing.\tA man wearing a hard hat is dancing.\t5.000\n"
    "1\tmain-captions\tMSRvid\t2012test\t0002\tnone\tnone\tA man is slicing a "
    "tomato.\tA man is playing a flute.\t0.200\n",
    "mnli": "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
    "0\t63735\t63735n\tslate\tThe new rights are nice enough\tEveryone really likes "
    "the newest benefits \tneutral\tneutral\n"
    "1\t91383\t91383c\tgovernment\tThis site includes a list.\tThe site has no "
    "list.\tcontradiction\tcontradiction\n"
    "2\t755\t755e\ttelephone\tyeah i know\tI am aware.\tentailment\tentailment\n",
    "qnli": "index\tquestion\tsentence\tlabel\n"
    "0\tWhat came into force after the new constitution was herald?\tAs of that day, "
    "the new constitution heralding the Second Republic came into force.\tentailment\n"
    "1\tWhat is the first major city in the stream?\tThe Rhine flows west.\tnot_entailment\n",
    "rte": "index\tsentence1\tsentence2\tlabel\n"
    "0\tDana Reeve, the widow of the actor, died at 44.\tChristopher Reeve had an "
    "accident.\tnot_entailment\n"
    "1\tYet, we now are discovering that antibiotics are losing power.\tBacteria is "
    "winning the war.\tentailment\n",
    "wnli": "index\tsentence1\tsentence2\tlabel\n"
    "0\tI stuck a pin through a carrot. When I pulled the pin out, it had a hole."
    "\tThe carrot had a hole.\t1\n"
    "1\tJohn couldn't see the stage with Billy in front of him because he is so short."
    "\tJohn is so short.\t0\n",
}


@pytest.mark.parametrize("task_name", sorted(TSV))
def test_tsv_reader_matches_tfds_glue_builder(task_name, tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text(TSV[task_name])
    ours = glue.read_glue_tsv(task_name, str(path))
    builder = tfds.builder(f"glue/{task_name}")
    reference = [row for _, row in builder._generate_examples(str(path), "dev")]
    task = glue.GLUE_TASKS[task_name]
    assert len(ours) == len(reference) >= 2
    for i, row in enumerate(reference):
        texts = [row[name] for name in task.tfds_texts]
        assert ours.texts_a[i] == texts[0]
        if len(texts) > 1:
            assert ours.texts_b[i] == texts[1]
        else:
            assert ours.texts_b is None
        if task.regression:
            assert ours.labels[i] == pytest.approx(row["label"])
        else:
            label = row["label"]
            index = label if isinstance(label, (int, np.integer)) else task.label_names.index(label)
            assert task.label_names.index(ours.labels[i]) == index


def test_mrpc_tsv_columns(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text(
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t1355540\t1355592\tHe said the foodservice pie business doesn't fit."
        "\tThe foodservice pie business does not fit.\n"
        "0\t2029631\t2029565\tMagnarelli said Racicot hated the Iraqi regime."
        '\tHis wife said he was "100 percent behind George Bush".\n'
    )
    examples = glue.read_glue_tsv("mrpc", str(path))
    assert examples.labels == ["equivalent", "not_equivalent"]
    assert examples.texts_b[1] == 'His wife said he was "100 percent behind George Bush".'


def test_bad_labels_and_names_are_clear_errors(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(ValueError, match="maybe"):
        glue.read_glue_tsv("rte", str(path))
    with pytest.raises(ValueError, match="unknown GLUE task"):
        glue.get_task("squad")


@pytest.mark.parametrize(
    "task_name,split",
    [
        ("cola", "train"),
        ("mnli", "validation_mismatched"),
        ("stsb", "validation"),
        ("qqp", "validation"),
    ],
)
def test_tfds_reader_with_mock_data(task_name, split):
    with tfds.testing.mock_data(num_examples=6):
        examples = glue.read_glue_tfds(task_name, split)
    task = glue.GLUE_TASKS[task_name]
    assert len(examples) == 6
    assert (examples.texts_b is None) == (len(task.tfds_texts) == 1)
    if task.regression:
        assert all(isinstance(label, float) for label in examples.labels)
    else:
        assert all(label in task.label_names for label in examples.labels)


def test_glue_metrics_follow_the_task():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 100)
    predictions = np.where(rng.random(100) < 0.8, labels, 1 - labels)
    cola = glue.glue_metrics("cola", labels, predictions)
    assert cola["matthews_corrcoef"] == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions)
    )
    assert glue.glue_metrics("mrpc", labels, predictions)["f1"] == pytest.approx(
        sklearn.metrics.f1_score(labels, predictions)
    )
    assert set(glue.glue_metrics("rte", labels, predictions)) == {"accuracy"}
    assert set(glue.glue_metrics("sts-b", labels * 5.0, predictions * 4.0)) == {
        "pearson",
        "spearman",
    }
