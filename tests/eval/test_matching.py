"""Document matching from frozen embeddings (lit_docemb.eval.matching) against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lit_docemb.eval.matching import (
    best_threshold,
    binary_metrics,
    classifier_matching,
    cosine_scores,
    embeddings_by_id,
    pair_features,
    threshold_matching,
)

SCORES = [0.9, 0.8, 0.7, 0.4, 0.3]
LABELS = [1, 1, 0, 1, 0]


def test_binary_metrics_by_hand():
    assert binary_metrics([1, 1, 0, 0], [1, 0, 1, 0]) == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "accuracy": 0.5}
    got = binary_metrics([1, 1, 1, 0], [1, 1, 0, 0])
    assert got["precision"] == pytest.approx(2 / 3) and got["recall"] == 1.0 and got["f1"] == pytest.approx(0.8)
    assert binary_metrics([0, 0], [1, 0]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.5}
    with pytest.raises(ValueError):
        binary_metrics([1], [1, 0])


def test_best_threshold_by_hand():
    # F1 at t = 0.9, 0.8, 0.7, 0.4, 0.3: 1/2, 4/5, 2/3, 6/7, 3/4 -> 0.4
    assert best_threshold(SCORES, LABELS, "f1") == 0.4
    # accuracy: 3/5, 4/5, 3/5, 4/5, 3/5 -> the tie goes to the higher threshold, 0.8
    assert best_threshold(SCORES, LABELS, "accuracy") == 0.8
    # no positive at all: predicting none (a threshold above every score) is best for accuracy
    assert best_threshold([0.2, 0.5], [0, 0], "accuracy") > 0.5
    assert best_threshold([0.5, 0.5, 0.1], [1, 0, 0], "f1") == 0.5  # equal scores form one candidate


def test_best_threshold_matches_brute_force_on_random_scores():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores, labels = rng.integers(0, 6, 15) / 5, rng.integers(0, 2, 15)
        for criterion in ("f1", "accuracy"):
            best = max(binary_metrics(scores >= t, labels)[criterion] for t in [*scores, 2.0])
            chosen = best_threshold(scores, labels, criterion)
            assert binary_metrics(scores >= chosen, labels)[criterion] == pytest.approx(best)


def unit(angle_degrees: float) -> np.ndarray:
    a = math.radians(angle_degrees)
    return np.array([math.cos(a), math.sin(a)])


def test_threshold_matching_chooses_on_validation_and_scores_test():
    emb = {name: unit(angle) for name, angle in
           {"a": 0, "b": 10, "c": 60, "d": 100, "e": 0, "f": 30, "g": 70, "h": 5}.items()}
    emb["a"] = emb["a"] * 7  # cosine ignores the norm
    validation = [("a", "b", 1), ("a", "c", 0), ("a", "d", 0), ("b", "c", 1)]  # cos: .985, .5, -.17, .643
    test = [("e", "f", 1), ("e", "g", 0), ("e", "h", 1), ("f", "g", 1)]  # cos: .866, .342, .996, .766
    scores, _labels = cosine_scores(emb, validation)
    assert scores == pytest.approx([math.cos(math.radians(x)) for x in (10, 60, 100, 50)])
    out = threshold_matching(emb, validation, test, "f1")
    assert out["threshold"] == pytest.approx(math.cos(math.radians(50)))  # both positives, no negative
    assert out == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0, "accuracy": 1.0,
                                 "threshold": math.cos(math.radians(50))})
    with pytest.raises(KeyError, match="no embedding"):
        threshold_matching(emb, validation, [("a", "zz", 1)])


def test_pair_features_and_classifier_on_separable_pairs():
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    assert pair_features(u, v).tolist() == [[1.0, -2.0, 3.0, 1.0, 3.0, -2.0, 2.0, 3.0]]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(40, 8))
    emb = {f"x{i}": vectors[i] for i in range(40)}
    emb |= {f"same{i}": vectors[i] + 0.05 * rng.normal(size=8) for i in range(40)}
    emb |= {f"far{i}": -vectors[i] for i in range(40)}
    pairs = [(f"x{i}", f"same{i}" if i % 2 else f"far{i}", i % 2) for i in range(40)]
    for classifier in ("logistic", "mlp"):
        out = classifier_matching(emb, pairs[20:30], pairs[30:], train=pairs[:20], classifier=classifier)
        assert out["accuracy"] == 1.0 and out["f1"] == 1.0 and out["validation_accuracy"] == 1.0
    assert "validation_accuracy" not in classifier_matching(emb, pairs[:20], pairs[30:])
    with pytest.raises(ValueError, match="both labels"):
        classifier_matching(emb, [p for p in pairs if p[2] == 1], pairs)


def test_embeddings_by_id():
    emb = embeddings_by_id(["a", "b"], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert emb["b"].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError):
        embeddings_by_id(["a"], torch.zeros(2, 2))


def letters_vector(text: str) -> np.ndarray:
    return np.array([text.count(c) + 0.1 for c in "aeiou"])


def test_validation_matching_chooses_on_validation_keeps_it_and_tests_with_it():
    from runs import Letters

    from lit_docemb.data.corpora.aan import PairDataset
    from lit_docemb.data.core.document import Document, Section
    from lit_docemb.errors import ConfigError
    from lit_docemb.eval.evaluation import EvaluationContext
    from lit_docemb.eval.matching import ValidationMatching

    texts = ["aaa", "aab", "eee", "eea", "iii", "ooo", "skip me", "uuu"]
    docs = [Document(f"d{i}", sections=[Section("", t)]) for i, t in enumerate(texts)]
    val = PairDataset(docs, [(0, 1, 1), (2, 3, 1), (0, 4, 0), (1, 5, 0), (6, 0, 1)])  # last: skip is unembeddable
    test = PairDataset(docs, [(4, 5, 1), (2, 7, 0), (0, 3, 1)])
    data = type("Pairs", (), {"val_set": val, "test_set": test})()
    matching, context = ValidationMatching(batch_size=3), EvaluationContext(Letters(), data)
    with pytest.raises(RuntimeError, match="validate first"):
        matching.test(context)

    def cosines(pairs):
        u = np.stack([letters_vector(texts[a]) for a, _, _ in pairs])
        v = np.stack([letters_vector(texts[b]) for _, b, _ in pairs])
        return (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)

    val_scores, val_labels = cosines(val.pairs[:4]), np.array([1, 1, 0, 0])
    threshold = best_threshold(val_scores, val_labels)
    metrics = matching.evaluate(context)
    assert matching.threshold == pytest.approx(threshold)
    expected = binary_metrics(val_scores >= threshold, val_labels)
    assert metrics == pytest.approx({f"val/matching_{k}": v for k, v in expected.items()}
                                    | {"val/matching_threshold": threshold, "val/matching_skipped_pairs": 1.0})
    restored = ValidationMatching()
    restored.load_state_dict(matching.state_dict())  # as from a checkpoint
    tested = restored.test(context)
    expected = binary_metrics(cosines(test.pairs) >= threshold, np.array([1, 0, 1]))
    assert tested == pytest.approx({f"test/matching_{k}": v for k, v in expected.items()}
                                   | {"test/matching_threshold": threshold, "test/matching_skipped_pairs": 0.0})
    with pytest.raises(ConfigError, match="init_args.criterion"):
        ValidationMatching(criterion="auc")


def test_validation_matching_also_scores_the_authors_fixed_thresholds():
    """CoLDE's released code scores pairs at cosines above 0.25, 0.5 and 0.75; ``fixed_thresholds`` logs those beside
    the validation-chosen threshold."""
    from lit_docemb.errors import ConfigError
    from lit_docemb.eval.matching import ValidationMatching

    matching = ValidationMatching(fixed_thresholds=[0.25, 0.5, 0.75])
    matching.threshold = 0.9
    scores, labels = np.array([0.95, 0.6, 0.5, 0.3, 0.1]), np.array([1, 1, 0, 1, 0])
    metrics = matching._metrics("test", scores, labels, 0)
    for fixed in (0.25, 0.5, 0.75):
        expected = binary_metrics(scores > fixed, labels)
        assert {k: metrics[f"test/matching_{k}@{fixed:g}"] for k in expected} == pytest.approx(expected)
    assert metrics["test/matching_accuracy@0.5"] == pytest.approx(0.8)  # 0.5 itself is not above 0.5
    assert metrics["test/matching_f1"] == pytest.approx(0.5)  # the chosen threshold's metrics stay
    plain = ValidationMatching()
    plain.threshold = 0.9
    assert not any("@" in k for k in plain._metrics("val", scores, labels, 0))
    with pytest.raises(ConfigError, match="init_args.fixed_thresholds"):
        ValidationMatching(fixed_thresholds=[1.5])
