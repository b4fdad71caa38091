"""Evaluations of frozen document embeddings with labels: k-means clustering, a linear probe, few-shot probes.

As the papers compute them: clustering (Graph-RoBERTa Table 1, DECA Table 4) fits k-means on the training
embeddings and assigns the test embeddings to its centroids, scored by NMI and purity against the labels;
the linear probe (DECA Tables 3/5, DocSplit Table 1) is a logistic regression on the training embeddings,
scored on the test set by accuracy, error rate and macro-F1 (either reads a SciPy sparse matrix as it is: TF-IDF); the few-shot probe repeats the probe on k training
examples per class, 10 draws, and reports mean and standard deviation. That probe is a cheap reading, not DocSplit
Table 2's protocol, which trains Table 1's classifier on the k examples (``grids/docsplit_table2_few_shot.yaml``,
``few_shot_per_class`` of the labelled DataModules).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, normalized_mutual_info_score
from sklearn.preprocessing import LabelEncoder


def _as_array(embeddings) -> np.ndarray | sparse.csr_matrix:
    """(N, D) float64 rows: a tensor or array as a dense array, a SciPy sparse matrix as CSR (kept sparse: the
    logistic regression and k-means read it as it is)."""
    if sparse.issparse(embeddings):
        array = sparse.csr_matrix(embeddings, dtype=np.float64)
    else:
        array = embeddings.detach().float().cpu().numpy() if hasattr(embeddings, "detach") else np.asarray(embeddings)
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"need (N, D) embeddings with N > 0, got shape {array.shape}")
    return array.astype(np.float64)


def contingency(labels: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(classes, predicted values) counts of the rows' pairs, the values present in each taken in sorted order.
    Computed with ``bincount``: a resample's score is read in microseconds where scikit-learn's checks take
    milliseconds, and an interval takes a thousand of them per measure and run."""
    classes, rows = np.unique(labels, return_inverse=True)
    values, columns = np.unique(predicted, return_inverse=True)
    return np.bincount(rows * len(values) + columns, minlength=len(classes) * len(values)).reshape(
        len(classes), len(values)).astype(np.float64)


def purity(labels: Sequence, clusters: Sequence[int]) -> float:
    """Share of items whose cluster's majority label is their own label."""
    return float(contingency(np.asarray(labels), np.asarray(clusters)).max(0).sum() / len(labels))


def kmeans_assignments(train, train_labels: Sequence, test, num_clusters: int | None = None, seed: int = 0,
                       n_init: int = 10) -> np.ndarray:
    """(N_test,) cluster of each ``test`` row under k-means (k = number of training labels unless given) fitted on
    ``train``."""
    train, test = _as_array(train), _as_array(test)
    k = num_clusters or len(set(train_labels))
    return KMeans(n_clusters=k, random_state=seed, n_init=n_init).fit(train).predict(test)


def kmeans_clustering(train, train_labels: Sequence, test, test_labels: Sequence, num_clusters: int | None = None,
                      seed: int = 0, n_init: int = 10) -> dict[str, float]:
    """k-means (k = number of training labels unless given) fitted on ``train``, applied to ``test``:
    ``{"nmi", "purity"}`` of the test assignments."""
    clusters = kmeans_assignments(train, train_labels, test, num_clusters, seed, n_init)
    return {"nmi": float(normalized_mutual_info_score(test_labels, clusters)),
            "purity": float(purity(test_labels, clusters))}


def probe_predictions(train, train_labels: Sequence, test, c: float = 1.0, max_iter: int = 2000) -> np.ndarray:
    """(N_test,) label predicted for each ``test`` row by a logistic regression (inverse regularisation ``c``)
    fitted on the ``train`` rows and their labels."""
    train, test = _as_array(train), _as_array(test)
    encoder = LabelEncoder().fit(list(train_labels))
    model = LogisticRegression(C=c, max_iter=max_iter).fit(train, encoder.transform(list(train_labels)))
    return encoder.inverse_transform(model.predict(test))


def linear_probe(train, train_labels: Sequence, test, test_labels: Sequence, c: float = 1.0,
                 max_iter: int = 2000) -> dict[str, float]:
    """Logistic regression on frozen embeddings: ``{"accuracy", "error_rate", "macro_f1"}`` on the test set.
    Test labels unseen in training count as errors."""
    predicted = probe_predictions(train, train_labels, test, c, max_iter)
    accuracy = float(accuracy_score(list(test_labels), predicted))
    return {"accuracy": accuracy, "error_rate": 1.0 - accuracy,
            "macro_f1": float(f1_score(list(test_labels), predicted, average="macro"))}


def few_shot_probe(train, train_labels: Sequence, test, test_labels: Sequence, shots: int, repetitions: int = 10,
                   seed: int = 0) -> dict[str, float]:
    """The linear probe on ``shots`` training examples per class, drawn ``repetitions`` times:
    ``{"accuracy_mean", "accuracy_std", "macro_f1_mean", "macro_f1_std"}``."""
    train, labels = _as_array(train), np.asarray(list(train_labels))
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    short = [str(c) for c in classes if (labels == c).sum() < shots]
    if short:
        raise ValueError(f"{shots}-shot needs {shots} training examples of every class; too few for {short[:5]}: "
                         f"keep the classes that have them with data.init_args.classes")
    runs = []
    for _ in range(repetitions):
        rows = np.concatenate([rng.choice(np.flatnonzero(labels == c), shots, replace=False) for c in classes])
        runs.append(linear_probe(train[rows], labels[rows], test, test_labels))
    out = {}
    for name in ("accuracy", "macro_f1"):
        values = np.array([r[name] for r in runs])
        out[f"{name}_mean"], out[f"{name}_std"] = float(values.mean()), float(values.std())
    return out
