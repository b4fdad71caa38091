"""Doc2VecC's own training rule (Chen 2017, the ``doc2vecc.c`` program of her public repository): sparse SGD over
every word of every document, compiled by numba so that it runs at least at the C program's speed.

For each document (read in chunks of :data:`CHUNK_WORDS` words, the program's sentence length), every position t is
a target. Its hidden vector is the mean of

* the CBOW context: a window drawn per target as the program draws it (``b`` uniform in ``[0, window)``, the words
  ``t - window + b .. t - b`` except ``t`` itself: words on the left of the target only), and
* the corrupted document vector: each word of the chunk kept with probability ``keep`` (at most
  :data:`MAX_SAMPLED_WORDS` of them, scanned from the start), the kept ones weighted ``1 / (keep * length)``, an
  unbiased estimate of eq. 1's mean. The program draws a number for each word of the chunk; here the gap to the
  next kept word is drawn (geometric, :func:`_sample_words`): the same distribution from ``keep * length`` draws
  instead of ``length`` (on R8, 127 words a target's chunk on average, the per-word scan was a quarter of the time),

so ``hidden = (sum(context) + document) / (len(context) + 1)``. Negative sampling scores the target (label 1) and
``negative`` noise words drawn from the unigram table to the 3/4 power (label 0; a draw equal to the target is
skipped); each gradient ``g = (label - sigmoid(v . hidden)) * alpha`` updates the output vector at once and is
accumulated into ``e``, which then updates the context words by ``e / n`` and the sampled document words by
``e * weight / n`` (n = context words + 1). The learning rate falls linearly from ``alpha`` to ``alpha * 1e-4`` over
the whole training (word2vec's schedule).

The rule is Hogwild SGD on one thread, one target at a time, as the program runs with ``-threads 1``: what its
figures were measured with. Differences from the program: the random numbers are numba's (seeded per call) and
the document words are drawn by their gaps, the sigmoid is exact (the program reads it from a 1,000-entry table),
an out-of-vocabulary word is never in ``words`` (the program skips it the same way), and the vector helpers let
the compiler reorder their sums (:data:`VECTOR_MATH`, which the program's ``-O3`` build does not), so that dot
products are vectorised: results differ from an in-order sum by rounding only. With both, the rule trains about
1.6 times the program's words a CPU second (R8, one thread).
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: Words of one training chunk: ``doc2vecc.c``'s MAX_SENTENCE_LENGTH (a longer document trains as several chunks).
CHUNK_WORDS = 1000
#: Most document words sampled for one target's corrupted document vector: ``doc2vecc.c``'s MAX_SENTENCE_SAMPLE.
MAX_SAMPLED_WORDS = 100
#: Entries of the noise table (word2vec's is 1e8; 1e6 resolves a probability of 1e-6).
NOISE_TABLE_SIZE = 1_000_000
#: Beyond this score the sigmoid is 0 or 1 in float32 (word2vec's MAX_EXP).
MAX_SCORE = 10.0
#: LLVM's flags for the 100-wide vector helpers: reassociation (and fused multiply-adds) let it vectorise the dot
#: product's sum; no flag that assumes finite values, so a diverging run still shows its inf / nan.
VECTOR_MATH = {"reassoc", "contract"}


def noise_table(word_counts: np.ndarray, size: int = NOISE_TABLE_SIZE) -> np.ndarray:
    """(V,) counts of words 1..V → (size,) int32 word ids, each present in proportion to count^0.75 (word2vec's
    unigram table); words with count 0 never appear."""
    weights = np.asarray(word_counts, dtype=np.float64) ** 0.75
    if weights.sum() <= 0:
        raise ValueError("need at least one word with a positive count")
    edges = np.cumsum(weights) / weights.sum()
    return (np.searchsorted(edges, (np.arange(size) + 0.5) / size) + 1).astype(np.int32)


@numba.njit(cache=True, nogil=True)
def _sigmoid(f: float) -> float:
    return 1.0 / (1.0 + math.exp(-f))


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def _add(out, x, scale):  # out += scale * x
    for i in range(out.shape[0]):
        out[i] += scale * x[i]


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def _scale(out, scale):
    for i in range(out.shape[0]):
        out[i] *= scale


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def _dot(a, b):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * b[i]
    return total


@numba.njit(cache=True, nogil=True)
def _sample_words(chunk, keep, sampled):  # pragma: no cover - compiled; tests call it through numba
    """Writes into ``sampled`` the words of ``chunk`` that a scan keeping each with probability ``keep`` keeps, in
    order, stopping at ``sampled``'s size, and returns how many: the gap before each kept word is geometric
    (failures before a success of probability ``keep``), drawn by inversion, one draw a kept word."""
    if keep >= 1.0:
        n = min(chunk.shape[0], sampled.shape[0])
        sampled[:n] = chunk[:n]
        return n
    log_miss = math.log(1.0 - keep)
    n, t = 0, -1
    while n < sampled.shape[0]:
        t += 1 + int(math.log(1.0 - np.random.random()) / log_miss)  # 1 - U in (0, 1]: the log is finite
        if t >= chunk.shape[0]:
            break
        sampled[n] = chunk[t]
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def train_documents(U, V, words, lengths, starts, table, window, negative, keep, alpha, progress_start,
                    progress_end, seed, learn=True):  # pragma: no cover - compiled; tests call it through numba
    """One pass of Doc2VecC's rule over a batch of documents, updating ``U`` and ``V`` in place.

    Args:
        U: (V+1, D) float32 word vectors (row 0 is padding, never read).
        V: (V+1, D) float32 output vectors.
        words: (N,) int64 word ids 1..V, the documents' one after the other.
        lengths: (B,) int64 words of each document; starts: (B,) int64 where each begins in ``words``.
        table: noise table (:func:`noise_table`).
        window: context window (``-window``); negative: noise words per target (``-negative``);
        keep: probability that a document word enters the document vector (``-sentence-sample``).
        alpha: starting learning rate; the rate of this batch's words falls linearly from
            ``alpha * (1 - progress_start)`` to ``alpha * (1 - progress_end)`` (floored at ``alpha * 1e-4``).
        seed: seeds numba's generator for this call.
        learn: update ``U`` and ``V``; ``False`` only scores (the same draws, nothing written).

    Returns:
        (sum of the negative-sampling losses, number of targets: every word of the batch).
    """
    np.random.seed(seed)
    dim = U.shape[1]
    hidden = np.zeros(dim, dtype=np.float32)
    error = np.zeros(dim, dtype=np.float32)
    context = np.zeros(2 * window, dtype=np.int64)
    sampled = np.zeros(MAX_SAMPLED_WORDS, dtype=np.int64)
    total_words = max(lengths.sum(), 1)
    done = 0
    loss = 0.0
    for d in range(lengths.shape[0]):
        for start in range(0, lengths[d], CHUNK_WORDS):
            chunk = words[starts[d] + start:starts[d] + min(lengths[d], start + CHUNK_WORDS)]
            length = chunk.shape[0]
            weight = 1.0 / keep / length
            for position in range(length):
                rate = alpha * max(1e-4, 1.0 - (progress_start + (progress_end - progress_start) * done / total_words))
                done += 1
                target = chunk[position]
                hidden[:] = 0.0
                error[:] = 0.0
                shrink = np.random.randint(0, window)
                n_context = 0
                for a in range(shrink, window + 1 - shrink):
                    c = position - window + a
                    if a == window or c < 0 or c >= length:
                        continue
                    context[n_context] = chunk[c]
                    n_context += 1
                    _add(hidden, U[chunk[c]], 1.0)
                n_sampled = _sample_words(chunk, keep, sampled)
                for s in range(n_sampled):
                    _add(hidden, U[sampled[s]], weight)
                count = n_context + 1  # the context words and the document
                _scale(hidden, 1.0 / count)
                for k in range(negative + 1):
                    if k == 0:
                        word, label = target, 1.0
                    else:
                        word = table[np.random.randint(0, table.shape[0])]
                        if word == target:
                            continue
                        label = 0.0
                    f = _dot(hidden, V[word])
                    p = _sigmoid(f)
                    if f > MAX_SCORE:
                        g = (label - 1.0) * rate
                    elif f < -MAX_SCORE:
                        g = label * rate
                    else:
                        g = (label - p) * rate
                    loss -= math.log(max(p if label == 1.0 else 1.0 - p, 1e-12))
                    if learn:
                        _add(error, V[word], g)
                        _add(V[word], hidden, g)
                if learn:
                    for c in range(n_context):
                        _add(U[context[c]], error, 1.0 / count)
                    for s in range(n_sampled):
                        _add(U[sampled[s]], error, weight / count)
    return loss, done
