"""benchmarks/real_text.py: its per-item scores against sklearn's, the targets it checks, the fit config it writes."""

import numpy as np
import pytest
from benchmark_scripts import benchmark_module
from sklearn.metrics import f1_score, normalized_mutual_info_score

from lit_docemb.commands.loading import build_datamodule, build_method
from lit_docemb.eval.bootstrap import ItemScores, paired_bootstrap


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("real_text") as module:
        yield module


def test_macro_f1_of_several_prediction_columns_is_their_mean():
    labels = np.array([0, 0, 1, 1, 2, 2])
    first, second = np.array([0, 1, 1, 1, 2, 0]), np.array([0, 0, 1, 2, 2, 2])
    scores = ItemScores("macro_f1", np.stack([labels, first, second], axis=1))
    expected = (f1_score(labels, first, average="macro") + f1_score(labels, second, average="macro")) / 2
    assert scores.value() == pytest.approx(expected)
    assert scores.value(np.array([0, 2, 4])) == pytest.approx((1.0 + 1.0) / 2)  # rows resampled, columns kept
    change, low, high = paired_bootstrap(ItemScores("macro_f1", np.stack([labels, first], 1)), scores, 200)
    assert low <= change <= high


def test_labelled_scores_are_sklearns_on_separable_and_shuffled_data(bench):
    rng = np.random.default_rng(0)
    classes = ["a", "b", "c"]
    centres = np.eye(3) * 10
    fit_y = np.repeat(classes, 20)
    test_y = np.repeat(classes, 10)
    fit_x = centres[[classes.index(y) for y in fit_y]] + rng.normal(size=(60, 3))
    test_x = centres[[classes.index(y) for y in test_y]] + rng.normal(size=(30, 3))
    scores = bench.labelled_scores(fit_x, fit_y, test_x, test_y, classes, shots=5, draws=3, seed=0)
    assert {name: s.value() for name, s in scores.items()} == pytest.approx({
        "clustering/nmi": 1.0, "clustering/purity": 1.0, "probe/accuracy": 1.0, "probe/macro_f1": 1.0,
        "few_shot_5/accuracy": 1.0, "few_shot_5/macro_f1": 1.0}, abs=1e-12)
    noise = bench.labelled_scores(rng.normal(size=(60, 3)), fit_y, rng.normal(size=(30, 3)), test_y, classes, 5, 3, 0)
    rows = noise["clustering/nmi"].values
    assert rows.shape == (30, 1 + bench.KMEANS_RUNS)  # the label, then each k-means run's clusters, averaged
    assert noise["clustering/nmi"].value() == pytest.approx(np.mean([normalized_mutual_info_score(rows[:, 0], rows[:, c])
                                                                     for c in range(1, rows.shape[1])]))
    assert noise["probe/accuracy"].value() < 0.8
    assert noise["few_shot_5/macro_f1"].values.shape == (30, 4)  # the label and one column per draw


def test_a_target_needs_one_measure_up_and_none_down(bench):
    def row(low, high):
        return {"low": low, "high": high}

    assert bench.target_verdict({"a": row(0.01, 0.05), "b": row(-0.02, 0.03)})[0]
    assert not bench.target_verdict({"a": row(-0.01, 0.05), "b": row(-0.02, 0.03)})[0]  # nothing clearly up
    ok, detail = bench.target_verdict({"a": row(0.01, 0.05), "b": row(-0.04, -0.01)})
    assert not ok and detail == "up: a; down: b"


def test_the_fit_config_is_a_config_the_package_builds(bench, tmp_path, tiny_encoder_dir):
    """The config a run writes builds its method and its DataModule (here with a tiny BERT for MiniLM)."""
    bench.ENCODER["name"] = str(tiny_encoder_dir)
    try:
        for method in ("DocSplit", "GraphRoBERTa", "SimCSE", "MLM"):
            run = bench.Run("bbc", method, seed=3, steps=7, batch_size=4)
            config = bench.fit_config(run, tmp_path / "data", gpu=False)
            assert config["trainer"]["max_steps"] == 7 and config["data"]["init_args"]["seed"] == 3
            assert config["data"]["init_args"]["source"] == str(tmp_path / "data" / "bbc")
            path = tmp_path / f"{method}.yaml"
            path.write_text(__import__("yaml").safe_dump(config))
            assert type(build_method([path])).__name__ == config["model"]["class_path"].rsplit(".", 1)[1]
        imdb = bench.fit_config(bench.Run("imdb", "DocSplit", 0, 7, 4), tmp_path / "data", gpu=False)["data"]
        assert imdb["init_args"]["source"] == str(tmp_path / "data" / "aclImdb")
        bench.FOLDERS["imdb"] = str(tmp_path / "elsewhere" / "aclImdb")
        imdb = bench.fit_config(bench.Run("imdb", "DocSplit", 0, 7, 4), tmp_path / "data", gpu=False)["data"]
        assert imdb["init_args"]["source"] == str(tmp_path / "elsewhere" / "aclImdb")
        folds = bench.fit_config(bench.Run("hyperpartisan", "DocSplit", 0, 7, 4, fold=3), tmp_path, gpu=False)["data"]
        assert folds["init_args"]["cross_validation_fold"] == 3
        whole = bench.fit_config(bench.Run("20news", "DocSplit", 0, 0, 32), tmp_path, gpu=True)["trainer"]
        assert (whole["max_steps"], whole["max_epochs"], whole["precision"]) == (-1, 1, "bf16-mixed")
        (tmp_path / "bbc").mkdir()
        for label in ("sport", "tech"):
            (tmp_path / "bbc" / label).mkdir()
            for i in range(5):
                (tmp_path / "bbc" / label / f"{i:03d}.txt").write_text(f"A {label} story {i}.\n\nIts body.\n")
        data = build_datamodule([tmp_path / "DocSplit.yaml"])
        data.source = str(tmp_path / "bbc")
        data.setup("fit")
        assert len(data.test_set) == 2 and len(data.train_set) == 8  # the stratified 80/20 split
    finally:
        bench.ENCODER["name"], bench.FOLDERS["imdb"] = bench.MINILM, "{root}/aclImdb"


@pytest.mark.slow
def test_table_2_fine_tunes_three_classifiers_from_one_pretraining_run(bench, tmp_path, tiny_encoder_dir):
    """``--classify`` on a BBC-layout folder: Graph-RoBERTa pretrained by ``fit``, then the plain encoder,
    Graph-RoBERTa without and with that pretraining fine-tuned end to end by ``fit``, each scored on the same test
    documents; the tables and targets printed, the JSON written, the checkpoints removed."""
    words = {"sport": "goal match team league coach player season win", "tech": "chip software phone network "
             "computer data internet device"}
    for label, vocabulary in words.items():
        (tmp_path / "bbc" / label).mkdir(parents=True)
        for i in range(10):
            body = " ".join(vocabulary.split()[(i + j) % 8] for j in range(40))
            (tmp_path / "bbc" / label / f"{i:03d}.txt").write_text(f"A {label} story {i}.\n\n{body}.\n")
    output = tmp_path / "out"
    status = bench.main(["--sets", "bbc", "--methods", "GraphRoBERTa", "--classify", "--steps", "2", "--draws", "2",
                         "--resamples", "20", "--encoder", tiny_encoder_dir, "--data_root", str(tmp_path),
                         "--output", str(output), "--batch_size", "4"])
    bench.ENCODER["name"] = bench.MINILM
    assert status == 0
    import json

    [record] = json.loads((output / "classification.json").read_text())
    assert record["run"] == "bbc/classify/default/seed0" and record["items"] == 4 and record["steps"] == 2
    assert set(record["rows"]) == {"encoder", "graph_roberta_wo_cl", "graph_roberta"}
    assert all(0.0 <= row["accuracy"] <= 1.0 for row in record["rows"].values())
    assert set(record["comparisons"]) == set(bench.CLASSIFIER_COMPARISONS)
    fitted = yaml_of(output / "bbc" / "classify-graph_roberta" / "default" / "seed0" / "config.yaml")
    pretrained = output / "bbc" / "GraphRoBERTa" / "default" / "seed0"
    assert fitted["model"]["init_args"]["checkpoint"] == str(pretrained / "checkpoints" / "last.ckpt")
    assert fitted["model"]["init_args"]["labels"] == ["sport", "tech"]
    assert yaml_of(output / "bbc" / "classify-encoder" / "default" / "seed0" / "config.yaml")["model"]["init_args"][
        "backbone"]["class_path"] == "lit_docemb.methods.DocSplit"
    assert not list(output.rglob("*.ckpt"))
    text = (output / "table.md").read_text()
    assert "## Graph-RoBERTa Table 2" in text and "bbc/classify/default (1 runs)" in text


def yaml_of(path):
    import yaml

    return yaml.safe_load(path.read_text())


def test_seeds_are_judged_together_from_their_kept_scores(bench, tmp_path):
    """Two seeds of one method: one pooled row per measure from each run's scores.json, and the target judged on it
    (one seed clearly up, one flat: up over both); a run without a second seed is judged alone."""
    rng = np.random.default_rng(0)
    records = []
    for seed, shift in ((0, 0.2), (1, 0.0), (2, 0.5)):
        run = f"bbc/DocSplit/default/seed{seed}" if seed < 2 else "20news/DocSplit/default/seed2"
        start = rng.random(40)
        scores = {"start": ItemScores("mean", start), "trained": ItemScores("mean", start + shift)}
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "scores.json").write_text(
            __import__("json").dumps({k: {"probe/accuracy": v.to_json()} for k, v in scores.items()}))
        change, low, high = paired_bootstrap(scores["start"], scores["trained"], 50)
        records.append({"run": run, "corpus": run.split("/")[0], "method": "DocSplit", "setting": "default",
                        "kmeans_runs": 5, "rows": {"probe/accuracy": {"change": change, "low": low, "high": high}}})
    [group] = bench.pooled(records, tmp_path, resamples=50)
    assert group["runs"] == ["bbc/DocSplit/default/seed0", "bbc/DocSplit/default/seed1"]
    row = group["rows"]["probe/accuracy"]
    assert row["items"] == 80 and row["change"] == pytest.approx(0.1) and row["low"] > 0
    assert bench.target_verdict(group["rows"])[0] and not bench.target_verdict(records[1]["rows"])[0]
    text = bench.pooled_table([group])
    assert "| bbc/DocSplit/default over 2 runs | probe/accuracy | 80 |" in text and "over 2 runs: met" in text


def test_records_of_two_processes_on_one_output_are_kept(bench, tmp_path):
    """Two runs of the script on one --output: each adds its record to the file as it is now, not as it was when
    that process started (the first one's record would be lost)."""
    path = tmp_path / "results.json"
    bench.add_record(path, {"run": "a", "value": 1})
    seen_at_start = bench.read_records(path)
    bench.add_record(path, {"run": "b", "value": 2})  # the other process
    assert [r["run"] for r in seen_at_start] == ["a"]
    assert bench.add_record(path, {"run": "a", "value": 3}) == [{"run": "b", "value": 2}, {"run": "a", "value": 3}]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
