"""Clustering, linear and few-shot probes on embeddings with known structure, and purity by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lit_docemb.eval.classification import (
    few_shot_probe,
    kmeans_clustering,
    linear_probe,
    purity,
)


def blobs(n_per_class: int, spread: float, seed: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centres = np.eye(3, 8) * 10
    points = np.concatenate([c + spread * rng.standard_normal((n_per_class, 8)) for c in centres])
    return points, [label for label in "abc" for _ in range(n_per_class)]


def test_purity_by_hand():
    # cluster 0: a a b (majority 2), cluster 1: b c c c (majority 3) -> 5 / 7
    assert purity(list("aabbccc"), [0, 0, 0, 1, 1, 1, 1]) == pytest.approx(5 / 7)


def test_separable_blobs_cluster_and_probe_perfectly():
    train, train_labels = blobs(20, 0.5, 0)
    test, test_labels = blobs(10, 0.5, 1)
    assert kmeans_clustering(torch.tensor(train), train_labels, test, test_labels) == {"nmi": 1.0, "purity": 1.0}
    probe = linear_probe(train, train_labels, test, test_labels)
    assert probe == {"accuracy": 1.0, "error_rate": 0.0, "macro_f1": 1.0}


def test_random_labels_score_near_chance():
    train, _ = blobs(30, 0.5, 0)
    test, _ = blobs(30, 0.5, 1)
    rng = np.random.default_rng(3)
    scores = kmeans_clustering(train, list(rng.choice(list("abc"), 90)), test, list(rng.choice(list("abc"), 90)))
    assert scores["nmi"] < 0.1


def test_few_shot_reports_mean_and_spread_and_needs_enough_examples():
    train, train_labels = blobs(20, 4.0, 0)  # overlapping classes: draws differ
    test, test_labels = blobs(20, 4.0, 1)
    out = few_shot_probe(train, train_labels, test, test_labels, shots=2, repetitions=10)
    assert set(out) == {"accuracy_mean", "accuracy_std", "macro_f1_mean", "macro_f1_std"}
    assert 1 / 3 < out["accuracy_mean"] < 1.0 and out["accuracy_std"] > 0
    with pytest.raises(ValueError, match="21-shot needs 21 training examples"):
        few_shot_probe(train, train_labels, test, test_labels, shots=21)
    labels = ["arts"] + ["sports"] * (len(train_labels) - 1)  # the class is named as the user wrote it
    with pytest.raises(ValueError, match=r"too few for \['arts'\]: keep the classes"):
        few_shot_probe(train, labels, test, test_labels, shots=2)
