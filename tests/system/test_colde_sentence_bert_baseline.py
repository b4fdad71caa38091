"""CoLDE's S-BERT row (seed paper 003, Table 2) as its config documents it: a public siamese BERT scored as initialised
by ``evaluate --evaluation matching`` (no checkpoint) on CoLDE's AAN, WIKI and PAT matching splits, fixtures in the
releases' layouts. Checked against a naive reference: each paper's first ``max_length`` tokens encoded alone, cosine
of the pairs, the threshold chosen on the validation pairs and applied to the test pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from journeys import journey_config
from test_journeys import merged

from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.evaluate import main as evaluate_main
from lit_docemb.data.tokens import document_text
from lit_docemb.eval.matching import best_threshold, binary_metrics, dataset_pairs

ROOT = Path(__file__).resolve().parents[2]
PIECE = ROOT / "configs/baselines/sentence-transformers/bert-base-nli-mean-tokens.yaml"


def naive_threshold_metrics(prepared: Path) -> dict[str, float]:
    cli = DocEmbCLI(args=["--config", str(prepared)], run=False)
    method, data = cli.model.eval(), cli.datamodule
    data.setup("fit")
    vectors = {}

    def vector(document) -> np.ndarray:
        if document.id not in vectors:
            tokens = method.tokenizer(document_text(document, True), max_length=method.hparams.max_length,
                                      truncation=True, return_tensors="pt")
            with torch.no_grad():
                vectors[document.id] = method.encoder(tokens["input_ids"], tokens["attention_mask"])[0].numpy()
        return vectors[document.id]

    def scores(dataset) -> tuple[np.ndarray, np.ndarray]:
        by_id = {d.id: d for d in dataset.documents}
        cosines, labels = [], []
        for first, second, label in dataset_pairs(dataset):
            u, v = vector(by_id[first]), vector(by_id[second])
            cosines.append(float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v))))
            labels.append(label)
        return np.asarray(cosines), np.asarray(labels)

    threshold = best_threshold(*scores(data.val_set))
    test_scores, test_labels = scores(data.test_set)
    assert set(test_labels.tolist()) == {0, 1}, "the fixture's test split needs positive and negative pairs"
    return binary_metrics(test_scores >= threshold, test_labels) | {"threshold": threshold}


@pytest.mark.slow
@pytest.mark.parametrize("corpus_config", ["configs/colde/aan.yaml", "configs/colde/wikipedia.yaml",
                                           "configs/colde/patents.yaml"])
def test_sentence_bert_as_initialised_through_the_matching_evaluation(corpus_config, tiny_encoder_dir, tmp_path):
    combined = tmp_path / "combined.yaml"
    combined.write_text(yaml.safe_dump(merged(yaml.safe_load((ROOT / corpus_config).read_text()),
                                              yaml.safe_load(PIECE.read_text()))))
    prepared = journey_config(combined, tiny_encoder_dir, tmp_path)
    results = evaluate_main(["--config", str(prepared), "--evaluation", "matching", "--accelerator", "cpu",
                             "--output", str(tmp_path / "evaluation")])["matching"]
    expected = naive_threshold_metrics(prepared)
    for name in ("precision", "recall", "f1", "accuracy", "threshold"):
        assert results[f"matching/threshold/{name}"] == pytest.approx(expected[name], abs=1e-5), name
    assert 0.0 <= results["matching/threshold/accuracy"] <= 1.0
    assert "as initialised" in (tmp_path / "evaluation" / "evaluation.md").read_text()
