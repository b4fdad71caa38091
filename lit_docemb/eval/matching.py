"""Document matching from frozen embeddings: is a pair of documents similar? Method-agnostic.

Inputs are one embedding per document id and labelled pairs ``(id1, id2, label)`` split into validation and
test (and optionally train). Two protocols:

* :func:`threshold_matching` (CoLDE Table 2, seed 003 §4.2): the cosine similarity of the two embeddings; a
  pair matches when it is at least a threshold chosen on the validation pairs (the one that maximises the
  chosen criterion there); precision, recall, F1 and accuracy on the test pairs at that threshold.
* :func:`classifier_matching` (the Long Range Arena retrieval task, seed 001 §4.4): a classifier over the
  pair features ``[u, v, u*v, |u-v|]`` of the two frozen embeddings (logistic regression or a small MLP),
  fitted on the train pairs (the validation pairs when there are none), same metrics on the test pairs.

Metrics are of the positive class (label 1); a metric whose denominator is 0 is 0. On a DataModule of labelled
pairs (``AANDataModule`` in ``mode: pairs``, ``SimilarityGroupDataModule`` with ``test_fraction``, CoLDE's AAN and
Wikipedia splits): :class:`DocumentMatching` (both protocols; also ``python -m
lit_docemb matching``) and :class:`ValidationMatching` (CoLDE's ``val/matching_*`` during ``fit``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from torch import Tensor

import lightning as L

from lit_docemb.data.core.contract import EvaluationData, PairSplit
from lit_docemb.errors import ConfigError
from lit_docemb.eval.embedding import embed_documents, embed_rows
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext

Pair = tuple[str, str, int]
Criterion = Literal["f1", "accuracy"]

__all__ = ["DocumentMatching", "ValidationMatching", "best_threshold", "binary_metrics", "classifier_matching",
           "cosine_scores", "dataset_pairs", "embeddings_by_id", "evaluate_pairs", "pair_features", "threshold_matching"]


def binary_metrics(predicted: Sequence[int] | np.ndarray, labels: Sequence[int] | np.ndarray) -> dict[str, float]:
    """Precision, recall, F1 (of label 1) and accuracy of 0/1 predictions."""
    predicted, labels = np.asarray(predicted).astype(bool), np.asarray(labels).astype(bool)
    if predicted.shape != labels.shape or not len(labels):
        raise ValueError(f"need as many predictions as labels (at least one), got {predicted.shape}, {labels.shape}")
    tp = float((predicted & labels).sum())
    precision = tp / predicted.sum() if predicted.sum() else 0.0
    recall = tp / labels.sum() if labels.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1),
            "accuracy": float((predicted == labels).mean())}


def best_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray,
                   criterion: Criterion = "f1") -> float:
    """The threshold t (predict 1 when score >= t) that maximises ``criterion`` on these pairs. Candidates are
    the scores themselves and one above the largest (all 0); ties go to the highest threshold."""
    if criterion not in ("f1", "accuracy"):
        raise ValueError(f"criterion must be 'f1' or 'accuracy', got {criterion!r}")
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    if scores.shape != labels.shape or not len(labels):
        raise ValueError(f"need as many scores as labels (at least one), got {scores.shape}, {labels.shape}")
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_labels = scores[order], labels[order]
    distinct = np.r_[np.flatnonzero(np.diff(sorted_scores)), len(scores) - 1]  # last index of each distinct score
    tp = np.cumsum(sorted_labels)[distinct]  # predicting 1 for scores >= sorted_scores[distinct]
    predicted_positive = distinct + 1
    positives, n = labels.sum(), len(labels)
    candidates = np.r_[sorted_scores[distinct], np.nextafter(sorted_scores[0], np.inf)]
    tp, predicted_positive = np.r_[tp, 0], np.r_[predicted_positive, 0]
    if criterion == "accuracy":
        value = (tp + (n - positives) - (predicted_positive - tp)) / n
    else:
        value = np.where(predicted_positive + positives > 0, 2 * tp / np.maximum(predicted_positive + positives, 1), 0)
    best = np.flatnonzero(value == value.max())
    return float(candidates[best[np.argmax(candidates[best])]])


def _vectors(embeddings: Mapping[str, Tensor | np.ndarray], pairs: Sequence[Pair]) -> tuple[np.ndarray, ...]:
    missing = sorted({i for a, b, _ in pairs for i in (a, b)} - set(embeddings))
    if missing:
        raise KeyError(f"{len(missing)} pair documents have no embedding (first: {missing[0]!r})")
    first = np.stack([np.asarray(embeddings[a], dtype=np.float64) for a, _, _ in pairs])
    second = np.stack([np.asarray(embeddings[b], dtype=np.float64) for _, b, _ in pairs])
    return first, second, np.array([label for _, _, label in pairs], dtype=np.int64)


def cosine_scores(embeddings: Mapping[str, Tensor | np.ndarray], pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity of each pair's two embeddings, and the pairs' labels."""
    first, second, labels = _vectors(embeddings, pairs)
    norms = np.maximum(np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1), 1e-12)
    return (first * second).sum(1) / norms, labels


def threshold_matching(embeddings: Mapping[str, Tensor | np.ndarray], validation: Sequence[Pair],
                       test: Sequence[Pair], criterion: Criterion = "f1") -> dict[str, float]:
    """Cosine threshold chosen on ``validation``, metrics on ``test`` (and the threshold, ``threshold``)."""
    threshold = best_threshold(*cosine_scores(embeddings, validation), criterion=criterion)
    scores, labels = cosine_scores(embeddings, test)
    return binary_metrics(scores >= threshold, labels) | {"threshold": threshold}


def pair_features(first: np.ndarray | Tensor, second: np.ndarray | Tensor) -> np.ndarray:
    """(N, 4D) ``[u, v, u*v, |u-v|]`` of N pairs of D-dimensional embeddings (LRA retrieval)."""
    u, v = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    return np.concatenate([u, v, u * v, np.abs(u - v)], axis=1)


def classifier_matching(embeddings: Mapping[str, Tensor | np.ndarray], validation: Sequence[Pair],
                        test: Sequence[Pair], train: Sequence[Pair] | None = None,
                        classifier: Literal["logistic", "mlp"] = "logistic", hidden_size: int = 128,
                        seed: int = 0) -> dict[str, float]:
    """A pair classifier on the frozen embeddings' features, fitted on ``train`` (``validation`` when None),
    metrics on ``test``; ``validation_accuracy`` is reported when it was not the fitting set."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if classifier not in ("logistic", "mlp"):
        raise ValueError(f"classifier must be 'logistic' or 'mlp', got {classifier!r}")
    fit_pairs = train if train else validation
    first, second, labels = _vectors(embeddings, fit_pairs)
    if len(set(labels.tolist())) < 2:
        raise ValueError("the pairs the classifier is fitted on need both labels")
    model = LogisticRegression(max_iter=2000, random_state=seed) if classifier == "logistic" else MLPClassifier(
        (hidden_size,), max_iter=500, random_state=seed)
    model = make_pipeline(StandardScaler(), model).fit(pair_features(first, second), labels)

    def predict(pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
        u, v, y = _vectors(embeddings, pairs)
        return model.predict(pair_features(u, v)), y

    metrics = binary_metrics(*predict(test))
    if train:
        metrics["validation_accuracy"] = binary_metrics(*predict(validation))["accuracy"]
    return metrics


def embeddings_by_id(ids: Sequence[str], vectors: Tensor | np.ndarray) -> dict[str, np.ndarray]:
    """``{id: vector}`` from parallel ids and (N, D) vectors (e.g. ``predict`` outputs concatenated)."""
    vectors = vectors.detach().float().cpu().numpy() if isinstance(vectors, Tensor) else np.asarray(vectors)
    if len(ids) != len(vectors):
        raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
    return dict(zip(ids, vectors))


def dataset_pairs(dataset) -> list[Pair]:
    """``(id1, id2, label)`` of a :class:`~lit_docemb.data.corpora.aan.PairDataset`."""
    docs = dataset.documents
    return [(docs[a].id, docs[b].id, label) for a, b, label in dataset.pairs]


def evaluate_pairs(method, data: EvaluationData, batch_size: int = 32,
                   classifier: Literal["logistic", "mlp"] = "logistic", criterion: Criterion = "f1") -> dict[str, float]:
    """Both protocols for ``method`` (an :class:`~lit_docemb.methods.base.EmbeddingMethod`) on the train /
    validation / test pairs of ``data`` (set up), every paper embedded once with its predict collator. A training
    split of documents rather than pairs (``SimilarityGroupDataModule``'s matching split) fits the classifier on
    the validation pairs."""
    splits = {"train": data.train_set, "val": data.val_set, "test": data.test_set}
    if splits["test"] is None or not isinstance(splits["val"], PairSplit) or not len(splits["val"]):
        raise ValueError(f"{type(data).__name__} needs validation and test pairs (AANDataModule mode: pairs, or "
                         "SimilarityGroupDataModule with test_fraction)")
    if not isinstance(splits["train"], PairSplit):
        del splits["train"]
    pairs = {name: dataset_pairs(dataset) for name, dataset in splits.items()}
    documents = {}  # each split's documents as that split serves them (test sections may be shuffled, Fig. 8)
    for dataset in splits.values():
        for i in sorted({i for a, b, _ in dataset.pairs for i in (a, b)}):
            documents.setdefault(dataset.documents[i].id, dataset.documents[i])
    embeddings = embeddings_by_id(list(documents), embed_documents(method, list(documents.values()), batch_size))
    threshold = threshold_matching(embeddings, pairs["val"], pairs["test"], criterion)
    learned = classifier_matching(embeddings, pairs["val"], pairs["test"], pairs.get("train"), classifier)
    return {f"threshold/{k}": v for k, v in threshold.items()} | {f"classifier/{k}": v for k, v in learned.items()}


class DocumentMatching(Evaluation):
    """``matching/threshold/<metric>`` (cosine threshold chosen on validation, CoLDE Table 2) and
    ``matching/classifier/<metric>`` (a pair classifier on the frozen embeddings, the Long Range Arena protocol)
    on a DataModule of labelled pairs (``AANDataModule`` in ``mode: pairs``, ``SimilarityGroupDataModule`` with
    ``test_fraction``): ``python -m lit_docemb evaluate
    --evaluation matching``, or under ``trainer.callbacks``.

    Args:
        classifier: Pair classifier: ``"logistic"`` or ``"mlp"``.
        criterion: What the validation threshold maximises: ``"f1"`` or ``"accuracy"``.
        **kwargs: See :class:`~lit_docemb.eval.evaluation.Evaluation`.
    """

    name = "matching"

    def __init__(self, classifier: Literal["logistic", "mlp"] = "logistic", criterion: Criterion = "f1",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if classifier not in ("logistic", "mlp") or criterion not in ("f1", "accuracy"):
            raise ValueError(f"classifier must be logistic|mlp and criterion f1|accuracy, got {classifier}, {criterion}")
        self.classifier, self.criterion = classifier, criterion

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        metrics = evaluate_pairs(context.method, context.data, self.batch_size, self.classifier, self.criterion)
        return {f"matching/{k}": v for k, v in metrics.items()}


class ValidationMatching(Evaluation):
    """CoLDE's matching protocol (§4.2) during ``fit`` and ``test``, on a DataModule of labelled pairs
    (``AANDataModule`` in ``mode: pairs``, ``SimilarityGroupDataModule`` with ``test_fraction``), configured under
    ``trainer.callbacks``.

    At each validation of ``fit`` the documents of the validation pairs are embedded (sharded across ranks) and
    each pair scored by cosine; the threshold that maximises ``criterion`` on them is logged with the metrics at it
    as ``val/matching_{precision,recall,f1,accuracy,threshold,skipped_pairs}`` and kept in this callback's state
    (so in checkpoints); ``test`` logs ``test/matching_*`` on the test pairs at it. Pairs with a document the
    method cannot represent are left out and counted (``skipped_pairs``).

    ``fixed_thresholds`` adds the metrics at set thresholds, ``{stage}/matching_{metric}@{t}``: CoLDE's paper only
    says "above a certain threshold"; the authors' released code (``document_matching.py``, ``predict_zero_one``)
    scores at the fixed cosines 0.25, 0.5 and 0.75, which CoLDE's configs log beside the validation-chosen one.

    Args:
        criterion: What the validation threshold maximises: ``"f1"`` or ``"accuracy"``.
        batch_size: Documents embedded per forward pass.
        fixed_thresholds: Cosine thresholds also scored at, in validation and test (``None``: none).
    """

    name = "validation_matching"

    def __init__(self, criterion: Criterion = "f1", batch_size: int = 64,
                 fixed_thresholds: list[float] | None = None) -> None:
        super().__init__(every_n_epochs=None, batch_size=batch_size)
        if criterion not in ("f1", "accuracy"):
            raise ConfigError(f"{type(self).__name__} init_args.criterion must be 'f1' or 'accuracy', got "
                              f"{criterion!r}")
        if fixed_thresholds is not None and not all(-1 <= t <= 1 for t in fixed_thresholds):
            raise ConfigError(f"{type(self).__name__} init_args.fixed_thresholds must be cosines in [-1, 1], got "
                              f"{fixed_thresholds!r}")
        self.criterion = criterion
        self.fixed_thresholds = list(fixed_thresholds or [])
        self.threshold: float | None = None

    def _scores(self, context: EvaluationContext, dataset) -> tuple[np.ndarray, np.ndarray, int]:
        """Cosine scores and labels of the pairs of ``dataset`` whose documents the method represents, and how
        many pairs were left out."""
        if not isinstance(dataset, PairSplit) or not len(dataset):
            raise ValueError(f"{type(self).__name__} needs labelled pairs (AANDataModule mode: pairs, "
                             "SimilarityGroupDataModule test_fraction), got "
                             f"{type(dataset).__name__}")
        rows = sorted({i for a, b, _ in dataset.pairs for i in (a, b)})
        embedded, kept = embed_rows(context.method, [dataset.documents[i] for i in rows], self.batch_size, True)
        usable = {i for i, ok in zip(rows, kept.tolist()) if ok}
        vectors = embeddings_by_id([str(i) for i in rows], embedded)
        pairs = [(str(a), str(b), label) for a, b, label in dataset.pairs if a in usable and b in usable]
        if not pairs:
            raise ValueError(f"{type(context.method).__name__} could represent no pair of {len(dataset)}")
        scores, labels = cosine_scores(vectors, pairs)
        return scores, labels, len(dataset) - len(pairs)

    def _metrics(self, stage: str, scores: np.ndarray, labels: np.ndarray, skipped: int) -> dict[str, float]:
        metrics = binary_metrics(scores >= self.threshold, labels) | {"threshold": self.threshold,
                                                                      "skipped_pairs": float(skipped)}
        for fixed in self.fixed_thresholds:  # the authors' code predicts 1 above t (a cosine of exactly t: 0)
            metrics |= {f"{k}@{fixed:g}": v for k, v in binary_metrics(scores > fixed, labels).items()}
        return {f"{stage}/matching_{k}": v for k, v in metrics.items()}

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        """Chooses the threshold on the validation pairs: ``val/matching_*``."""
        scores, labels, skipped = self._scores(context, context.data.val_set)
        self.threshold = best_threshold(scores, labels, self.criterion)
        return self._metrics("val", scores, labels, skipped)

    def test(self, context: EvaluationContext) -> dict[str, float]:
        """``test/matching_*`` on the test pairs (the validation pairs when there are none) at the threshold
        chosen on validation."""
        if self.threshold is None:
            raise RuntimeError("test matching needs the threshold chosen on validation pairs: validate first, or "
                               "test a checkpoint saved after a validation")
        data = context.data
        return self._metrics("test", *self._scores(context, data.test_set if data.test_set is not None
                                                   else data.val_set))

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:  # identical on every rank
            pl_module.log_dict(self._run(trainer, pl_module, f"epoch={trainer.current_epoch}"), sync_dist=False)

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        context = EvaluationContext(pl_module, trainer.datamodule, None, self.batch_size)
        pl_module.log_dict(self.test(context), sync_dist=False)  # identical on every rank

    def state_dict(self) -> dict:
        return {"threshold": self.threshold}

    def load_state_dict(self, state_dict: dict) -> None:
        self.threshold = state_dict.get("threshold")
