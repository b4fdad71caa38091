"""Paired bootstrap confidence intervals of a metric's change between two models scored on the same items.

A metric is kept per item (a query, a document, a document pair) as :class:`ItemScores`: the values whose
statistic is the metric (a mean of per-query reciprocal ranks; NMI or purity of (label, cluster) rows; F1 of
(predicted, label) rows). Both models are scored on the same items in the same order, so one resample of item
indices applies to both, and the interval is that of the difference (after - before) under resampling: the
paired bootstrap of Koehn (2004, "Statistical significance tests for machine translation evaluation") and
Efron & Tibshirani (1993, §13 percentile intervals). The draws come from ``numpy.random.default_rng(seed)``, so
a report is the same on every run and machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import f1_score

from lit_docemb.eval.classification import contingency, purity


def _mean(values: np.ndarray) -> float:
    return float(values.mean())


def _each_column(values: np.ndarray, score: Callable[[np.ndarray, np.ndarray], float]) -> float:
    """``score(labels, column)`` of (label, prediction, prediction, ...) rows, averaged over the prediction
    columns (several k-means runs, several few-shot draws)."""
    return float(np.mean([score(values[:, 0], values[:, column]) for column in range(1, values.shape[1])]))


def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def nmi(labels: np.ndarray, clusters: np.ndarray) -> float:
    """``sklearn.metrics.normalized_mutual_info_score`` (arithmetic mean of the entropies), from the counts."""
    table = contingency(labels, clusters)
    if table.shape[0] == table.shape[1] <= 1:  # neither labelling splits the items: a perfect match
        return 1.0
    n, rows, columns = table.sum(), table.sum(1), table.sum(0)
    i, j = np.nonzero(table)
    joint = table[i, j]
    mi = max(float((joint / n * (np.log(joint * n) - np.log(rows[i] * columns[j]))).sum()), 0.0)
    if mi == 0.0:
        return 0.0
    return mi / ((_entropy(rows) + _entropy(columns)) / 2)


def macro_f1(labels: np.ndarray, predicted: np.ndarray) -> float:
    """``sklearn.metrics.f1_score(labels, predicted, average="macro", zero_division=0)``, from the counts: the
    mean over every value present in either of the per-value F1 (0 where a value is never predicted and never
    true)."""
    values = np.union1d(labels, predicted)
    table = contingency(np.concatenate([labels, values]), np.concatenate([predicted, values]))  # square, + identity
    true_positive = np.diag(table) - 1
    support, predictions = table.sum(1) - 1, table.sum(0) - 1
    denominator = support + predictions
    return float(np.mean(np.where(denominator > 0, 2 * true_positive / np.maximum(denominator, 1), 0.0)))


def _nmi(values: np.ndarray) -> float:
    return _each_column(values, nmi)


def _purity(values: np.ndarray) -> float:
    return _each_column(values, purity)


def _f1(values: np.ndarray) -> float:
    return float(f1_score(values[:, 1], values[:, 0], zero_division=0.0))


def _macro_f1(values: np.ndarray) -> float:
    return _each_column(values, macro_f1)


STATISTICS: dict[str, Callable[[np.ndarray], float]] = {"mean": _mean, "nmi": _nmi, "purity": _purity, "f1": _f1,
                                                        "macro_f1": _macro_f1}
"""Statistic name -> function of the (N,) or (N, 2+) item values: ``mean`` of per-item scores; ``nmi`` and
``purity`` of (label, cluster, cluster, ...) rows, averaged over the cluster columns (several runs of k-means);
``f1`` of (predicted, label) 0/1 rows (of label 1); ``macro_f1`` of (label,
predicted, predicted, ...) rows, the macro-averaged F1 of each prediction column (a probe fitted on several draws
of few-shot examples) averaged over the columns."""


@dataclass
class ItemScores:
    """One metric of one model, kept per item so that it can be resampled.

    Attributes:
        statistic: A name of :data:`STATISTICS`.
        values: (N,) per-item scores for ``mean``; (N, 2+) integer rows for the others.
    """

    statistic: str
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {self.statistic!r}")
        self.values = np.asarray(self.values)
        if not len(self.values):
            raise ValueError("a metric needs at least one item")

    def value(self, rows: np.ndarray | None = None) -> float:
        """The metric on all items, or on the item indices ``rows`` (repeats allowed)."""
        return STATISTICS[self.statistic](self.values if rows is None else self.values[rows])

    def to_json(self) -> dict:
        return {"statistic": self.statistic, "values": self.values.tolist()}

    @classmethod
    def from_json(cls, record: dict) -> ItemScores:
        return cls(record["statistic"], np.asarray(record["values"]))


def paired_bootstrap(before: ItemScores, after: ItemScores, resamples: int = 1000, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float, float]:
    """(difference, low, high): ``after.value() - before.value()`` and the percentile interval of that difference
    over ``resamples`` draws of N item indices with replacement, the same draw for both models.

    Args:
        before: The starting model's per-item scores.
        after: The trained model's, on the same items in the same order.
        resamples: Bootstrap draws.
        seed: Seed of the draws.
        confidence: Coverage of the interval (0.95: the 2.5th and 97.5th percentiles).
    """
    return pooled_paired_bootstrap([(before, after)], resamples, seed, confidence)


def pooled_paired_bootstrap(pairs: list[tuple[ItemScores, ItemScores]], resamples: int = 1000, seed: int = 0,
                            confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean difference, low, high) over independent (before, after) pairs, e.g. one training run per seed, each
    scored on its own items: the mean of the pairs' differences, and its percentile interval when each draw
    resamples every pair's items as :func:`paired_bootstrap` does (one pair: exactly its interval)."""
    for before, after in pairs:
        if before.statistic != after.statistic or len(before.values) != len(after.values):
            raise ValueError(f"paired scores need the same statistic and items, got {before.statistic} on "
                             f"{len(before.values)} and {after.statistic} on {len(after.values)}")
    if not pairs or resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"need pairs, resamples >= 1 and confidence in (0, 1), got {len(pairs)} pairs, "
                         f"{resamples}, {confidence}")
    rng = np.random.default_rng(seed)
    differences = np.zeros(resamples)
    for draw in range(resamples):
        for before, after in pairs:
            rows = rng.integers(0, len(before.values), len(before.values))
            differences[draw] += after.value(rows) - before.value(rows)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(differences / len(pairs), [tail, 100 - tail])
    change = float(np.mean([after.value() - before.value() for before, after in pairs]))
    return change, float(low), float(high)
