"""The bootstrap's statistics read from counts: the same values as scikit-learn's on every kind of labelling."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, normalized_mutual_info_score

from lit_docemb.eval.bootstrap import ItemScores, macro_f1, nmi
from lit_docemb.eval.classification import contingency, purity


def labellings(count: int):
    rng = np.random.default_rng(0)
    for _ in range(count):
        n = int(rng.integers(1, 60))
        yield rng.integers(0, rng.integers(1, 6), n) * 3 - 2, rng.integers(0, rng.integers(1, 7), n)
    yield np.zeros(5, int), np.zeros(5, int)  # neither splits the items
    yield np.arange(6), np.zeros(6, int)  # one cluster: no information
    yield np.array([0, 0, 1, 1]), np.array([7, 7, 9, 9])  # a perfect match under other names


@pytest.mark.parametrize("ours, reference", [
    (nmi, normalized_mutual_info_score),
    (macro_f1, lambda labels, predicted: f1_score(labels, predicted, average="macro", zero_division=0.0)),
])
def test_statistics_from_counts_equal_scikit_learns(ours, reference):
    for labels, predicted in labellings(300):
        assert ours(labels, predicted) == pytest.approx(reference(labels, predicted), abs=1e-12), (labels, predicted)


def test_contingency_counts_each_pair_and_purity_reads_it():
    labels, clusters = np.array([1, 1, 2, 2, 2, 5]), np.array([0, 0, 0, 3, 3, 3])
    assert contingency(labels, clusters).tolist() == [[2, 0], [1, 2], [0, 1]]
    assert purity(labels, clusters) == pytest.approx(4 / 6)


def test_a_resample_scores_its_rows_with_repeats():
    scores = ItemScores("nmi", np.array([[0, 0], [0, 0], [1, 1], [1, 0]]))
    rows = np.array([0, 1, 2, 2])
    assert scores.value(rows) == pytest.approx(normalized_mutual_info_score([0, 0, 1, 1], [0, 0, 1, 1]))
