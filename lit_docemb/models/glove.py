"""GloVe (Pennington, Socher and Manning 2014), the rule of its authors' ``glove.c`` (github.com/stanfordnlp/GloVe),
which CTPE's GloVe and GloVe(full) rows ran (seed paper 004, §4.3: 100 dimensions, window 10, 100 iterations).

1. Vocabulary: the words seen at least ``min_count`` times (``vocab_count``'s default 5), most frequent first.
2. Co-occurrence counts (``cooccur``, symmetric window): out-of-vocabulary words are dropped first, then every pair of
   words at most ``window`` apart in one document adds ``1 / distance`` to X[i, j] and to X[j, i].
3. Weighted least squares over the non-zero X[i, j] (``glove``):
   ``J = sum f(X_ij) (w_i . w~_j + b_i + b~_j - log X_ij)^2 / 2`` with ``f(x) = min(1, (x / x_max)^alpha)``,
   x_max 100, alpha 0.75, by AdaGrad one entry at a time in a fresh random order every iteration, learning rate
   0.05, squared-gradient sums starting at 1 and, as ``glove.c`` keeps them, summing the *learning-rate-scaled*
   gradients; weights and biases start uniform in ``[-0.5, 0.5) / dim``.
4. The vectors written are ``W + W~`` (``glove.c``'s ``-model 2``, its default).

Memory: the counts are a scipy sparse matrix in memory (``glove.c`` merges them on disk instead), about 16 bytes per
non-zero count while they are summed and 32 while training (indices, log count, weight, the iteration's order):
21,000 documents of 200 Zipf-drawn words (a CTPE task's size) gave 20.7M non-zeros at window 10; a whole source
gives many times more.

With ``workers`` > 1 the entries of an iteration are split into that many blocks trained on as many threads over the
same tables without locks (Hogwild, as ``glove.c``'s threads); ``workers=1`` is repeatable for a seed.

Plain numpy and numba: no torch, no Lightning, no corpus names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from scipy import sparse

#: Tokens gathered before their windows are counted into the sparse matrix (bounds the memory of one chunk).
CHUNK_TOKENS = 5_000_000


def vocabulary(sentences: Iterable[Sequence[str]], min_count: int = 5, max_size: int | None = None) -> list[str]:
    """The words seen at least ``min_count`` times, by count then alphabetically; at most ``max_size`` of them."""
    counts = Counter(word for sentence in sentences for word in sentence)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return kept[:max_size]


def _count_chunk(ids: np.ndarray, document: np.ndarray, size: int, window: int) -> sparse.csr_matrix:
    """(V, V) counts of one chunk: ``ids`` (N,) the in-vocabulary word ids one document after another,
    ``document`` (N,) the document each belongs to."""
    rows, cols, weights = [], [], []
    for distance in range(1, window + 1):
        same = document[:-distance] == document[distance:]  # (N - distance,) pairs inside one document
        left, right = ids[:-distance][same], ids[distance:][same]
        rows += [left, right]
        cols += [right, left]
        weights += [np.full(2 * len(left), 1.0 / distance)]
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sparse.coo_matrix((np.concatenate(weights), (rows, cols)), shape=(size, size)).tocsr()


def cooccurrence_counts(sentences: Iterable[Sequence[str]], words: Sequence[str], window: int = 10,
                        chunk_tokens: int = CHUNK_TOKENS) -> sparse.coo_matrix:
    """Symmetric (V, V) float64 counts X (step 2 of the module docstring) of the ``words`` of ``sentences``."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    index = {word: i for i, word in enumerate(words)}
    total = sparse.csr_matrix((len(words), len(words)))
    ids: list[int] = []
    document: list[int] = []

    def flush(total):
        if ids:
            total = total + _count_chunk(np.asarray(ids, np.int64), np.asarray(document, np.int64), len(words), window)
            ids.clear()
            document.clear()
        return total

    for number, sentence in enumerate(sentences):
        kept = [index[w] for w in sentence if w in index]
        ids += kept
        document += [number] * len(kept)
        if len(ids) >= chunk_tokens:
            total = flush(total)
    return flush(total).tocoo()


@numba.njit(cache=True, nogil=True)
def _adagrad_block(rows, cols, log_counts, weights, order, vectors, contexts, biases, context_biases, squares,
                   context_squares, bias_squares, context_bias_squares, learning_rate):  # pragma: no cover - numba
    """One pass of glove.c's update over the entries ``order`` names; returns the sum of their costs."""
    cost = 0.0
    dim = vectors.shape[1]
    for k in order:
        i, j = rows[k], cols[k]
        diff = biases[i] + context_biases[j] - log_counts[k]
        for d in range(dim):
            diff += vectors[i, d] * contexts[j, d]
        fdiff = weights[k] * diff
        cost += 0.5 * fdiff * diff
        fdiff *= learning_rate
        for d in range(dim):
            step_w = fdiff * contexts[j, d]
            step_c = fdiff * vectors[i, d]
            vectors[i, d] -= step_w / math.sqrt(squares[i, d])
            contexts[j, d] -= step_c / math.sqrt(context_squares[j, d])
            squares[i, d] += step_w * step_w
            context_squares[j, d] += step_c * step_c
        biases[i] -= fdiff / math.sqrt(bias_squares[i])
        context_biases[j] -= fdiff / math.sqrt(context_bias_squares[j])
        bias_squares[i] += fdiff * fdiff
        context_bias_squares[j] += fdiff * fdiff
    return cost


class GloVe:
    """GloVe's tables and their AdaGrad state over fixed co-occurrence counts (steps 3-4 of the module docstring).

    Args:
        counts: The (V, V) co-occurrence counts (:func:`cooccurrence_counts`).
        dim: Vector dimension (CTPE: 100).
        x_max: Counts at or above it weigh 1 (glove.c: 100).
        alpha: Exponent of the weighting below ``x_max`` (0.75).
        learning_rate: AdaGrad's initial rate (glove.c's ``eta``, 0.05).
        seed: Seed of the initial tables and of every iteration's order.
    """

    def __init__(self, counts: sparse.coo_matrix, dim: int = 100, x_max: float = 100.0, alpha: float = 0.75,
                 learning_rate: float = 0.05, seed: int = 1) -> None:
        if counts.nnz == 0:
            raise ValueError("no two vocabulary words share a window: nothing for GloVe to fit")
        size = counts.shape[0]
        self.rows, self.cols = counts.row.astype(np.int32), counts.col.astype(np.int32)  # V < 2^31 words
        self.log_counts = np.log(counts.data)
        self.weights = np.minimum(1.0, (counts.data / x_max) ** alpha)
        self.rng = np.random.default_rng(seed)
        self.vectors, self.contexts = ((self.rng.random((size, dim)) - 0.5) / dim for _ in range(2))
        self.biases, self.context_biases = ((self.rng.random(size) - 0.5) / dim for _ in range(2))
        self.squares, self.context_squares = np.ones((size, dim)), np.ones((size, dim))
        self.bias_squares, self.context_bias_squares = np.ones(size), np.ones(size)
        self.learning_rate = learning_rate

    def loss(self) -> float:
        """J divided by the number of entries, at the current tables."""
        diff = (np.einsum("nd,nd->n", self.vectors[self.rows], self.contexts[self.cols]) + self.biases[self.rows]
                + self.context_biases[self.cols] - self.log_counts)
        return float(0.5 * (self.weights * diff * diff).sum() / len(diff))

    def epoch(self, workers: int = 1) -> float:
        """One iteration over every entry in a fresh random order; returns its mean cost (glove.c prints it)."""
        order = self.rng.permutation(len(self.rows))
        tables = (self.rows, self.cols, self.log_counts, self.weights)
        state = (self.vectors, self.contexts, self.biases, self.context_biases, self.squares, self.context_squares,
                 self.bias_squares, self.context_bias_squares, self.learning_rate)
        blocks = np.array_split(order, max(1, workers))
        if len(blocks) == 1:
            cost = _adagrad_block(*tables, blocks[0], *state)
        else:
            with ThreadPoolExecutor(len(blocks)) as pool:
                cost = sum(pool.map(lambda block: _adagrad_block(*tables, block, *state), blocks))
        return float(cost / len(order))

    def word_vectors(self) -> np.ndarray:
        """(V, dim) float32 ``W + W~``."""
        return (self.vectors + self.contexts).astype(np.float32)


def train_glove(sentences: Iterable[Sequence[str]], dim: int = 100, window: int = 10, epochs: int = 100,
                min_count: int = 5, max_vocabulary: int | None = None, x_max: float = 100.0, alpha: float = 0.75,
                learning_rate: float = 0.05, workers: int = 1, seed: int = 1,
                log=None) -> tuple[list[str], np.ndarray, list[float]]:
    """GloVe on ``sentences`` (lists of words; an iterable that can be read twice): (the words, their (V, dim) vectors,
    the mean cost of every iteration). ``log(epoch, cost)`` is called after each iteration when given."""
    words = vocabulary(sentences, min_count, max_vocabulary)
    if not words:
        raise ValueError(f"no word occurs {min_count} times or more: lower min_count or give a larger corpus")
    model = GloVe(cooccurrence_counts(sentences, words, window), dim, x_max, alpha, learning_rate, seed)
    costs = []
    for epoch in range(epochs):
        costs.append(model.epoch(workers))
        if log is not None:
            log(epoch + 1, costs[-1])
    return words, model.word_vectors(), costs
