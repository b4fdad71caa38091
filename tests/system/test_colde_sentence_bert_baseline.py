"""CoLDE's S-BERT rows (seed paper 003, Table 2) as docs/reproduce.md runs them, fixtures in the releases' layouts.

* The public siamese BERT scored as initialised by ``evaluate --evaluation matching`` (no checkpoint) on CoLDE's AAN,
  WIKI and PAT matching splits, against a naive reference: each paper's first ``max_length`` tokens encoded alone,
  cosine of the pairs, the threshold chosen on the validation pairs and applied to the test pairs.
* The paper's fine-tuned siamese BERT, CoLDE with its own parts off: fitted and tested on AAN, a document's vector
  checked to be BERT's mean over its first chunk alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from journeys import journey_config, with_pieces
from test_journeys import merged

from lit_docemb.commands import main
from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.commands.evaluate import main as evaluate_main
from lit_docemb.data.core.tokens import document_text
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
            tokens = method.tokenizer(document_text(document, True), max_length=method.encoder_spec.max_length,
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
    combined.write_text(yaml.safe_dump(merged(with_pieces(yaml.safe_load((ROOT / corpus_config).read_text()),
                                                          (ROOT / corpus_config).parent),
                                              with_pieces(yaml.safe_load(PIECE.read_text()), PIECE.parent))))
    prepared = journey_config(combined, tiny_encoder_dir, tmp_path)
    results = evaluate_main(["--config", str(prepared), "--evaluation", "matching", "--accelerator", "cpu",
                             "--output", str(tmp_path / "evaluation")])["matching"]
    expected = naive_threshold_metrics(prepared)
    for name in ("precision", "recall", "f1", "accuracy", "threshold"):
        assert results[f"matching/threshold/{name}"] == pytest.approx(expected[name], abs=1e-5), name
    assert 0.0 <= results["matching/threshold/accuracy"] <= 1.0
    assert "as initialised" in (tmp_path / "evaluation" / "evaluation.md").read_text()


SIAMESE = ["--model.init_args.augmentation=false", "--model.init_args.aggregation=mean",
           "--model.init_args.objective=cosine", "--model.init_args.max_chunks_per_section=1",
           "--model.init_args.encoder.pooling=mean"]
"""The paper's S-BERT as docs/reproduce.md fits it: CoLDE with every part of its own switched off (unsplit documents,
no section/chunk embeddings, the mean of a single chunk, no projection), trained with the cosine objective."""


@pytest.mark.slow
def test_the_fine_tuned_siamese_reading_is_bert_on_the_first_chunk(tiny_encoder_dir, tmp_path):
    prepared = journey_config(ROOT / "configs/colde/aan.yaml", tiny_encoder_dir, tmp_path)
    common = ["--config", str(prepared), *SIAMESE]
    main(["fit", *common])
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    tested = main(["test", *common, f"--ckpt_path={last}"]).trainer.callback_metrics
    assert 0.0 <= float(tested["test/matching_accuracy"]) <= 1.0
    cli = DocEmbCLI(args=common, run=False)
    method = cli.model
    method.load_state_dict(torch.load(last, map_location="cpu", weights_only=True)["state_dict"])
    method.eval()
    assert not any(name.startswith("model.structure") or "lstm" in name for name, _ in method.named_parameters())
    documents = [d for d in _aan_documents(cli.datamodule)][:4]
    body = method.hparams.chunk_tokens - 2
    lengths = [len(method.tokenizer(" ".join(s.text for s in d.sections), add_special_tokens=False)["input_ids"])
               for d in documents]
    assert len(documents) >= 2 and max(lengths) > body, lengths  # the first chunk is a cut
    with torch.no_grad():
        embedded = method.embed(method.collator("predict")(documents))
        for document, vector in zip(documents, embedded, strict=True):
            ids = method.tokenizer(" ".join(s.text for s in document.sections), add_special_tokens=False)["input_ids"]
            ids = torch.tensor([[method.tokenizer.cls_token_id, *ids[:body], method.tokenizer.sep_token_id]])
            expected = method.model.encoder(ids, torch.ones_like(ids))[0]  # mean of the first chunk's token states
            torch.testing.assert_close(vector, expected, atol=1e-5, rtol=1e-5)


def _aan_documents(data) -> list:
    data.setup("fit")
    return [data.test_set.documents[i] for i in range(len(data.test_set.documents))]
