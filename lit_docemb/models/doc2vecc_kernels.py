"""Compiled CPU kernels of Doc2VecC's word-level loss as an optimizer trains it (DECA's Algorithm 1,
:meth:`lit_docemb.models.doc2vecc.Doc2VecC.example_loss`): each example's words and their weights read from its
document and the step's draws, the weighted bag of words (dropped out) that is its hidden vector, and negative
sampling's losses, each with its gradient. They read the rows they need where torch's ops would gather them into
(examples, words, dimension) blocks first, the way ``doc2vecc.c`` reads them; one thread, float32, compiled by
numba. The torch expressions in :mod:`lit_docemb.models.doc2vecc` are the same functions on other devices and
dtypes, and the tests' oracle.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from torch import Tensor

from lit_docemb.models.doc2vecc_sgd import VECTOR_MATH, _add, _dot


@numba.njit(cache=True, nogil=True)
def gather_examples(words, lengths, starts, documents, positions, shrink, drawn, noise_draws, noise_table, ids,
                    weights, scored):  # pragma: no cover - compiled; tests call it through numba
    """Each example's bag of words and the words it scores, from the step's draws, as ``example_loss``'s torch ops
    compute them. words (N,) int64, the documents' one after the other, lengths and starts (B,); per example (E)
    its document, its target's position, its window's shrink ``b`` and (E, S) float32 uniforms for its document's
    sampled words; (E, K) indices into ``noise_table``. Writes ids (E, W + 1 + S) int64: the context (the positions
    ``t - W + a``, ``b <= a <= W - b``, ``a != W``, not before the document; 0 elsewhere) then the sampled words
    (``floor(u * length)``); weights (E, W + 1 + S) float32: ``1 / (context + 1)`` for each context word, that share
    over S for each sampled one; scored (E, 1 + K): the target, then the noise words."""
    window = ids.shape[1] - drawn.shape[1] - 1
    samples = drawn.shape[1]
    one = np.float32(1.0)
    for e in range(documents.shape[0]):
        d, t, b = documents[e], positions[e], shrink[e]
        first = starts[d]
        context = 0
        for a in range(window + 1):
            c = t - window + a
            inside = b <= a <= window - b and a != window and c >= 0
            ids[e, a] = words[first + c] if inside else 0
            weights[e, a] = one if inside else np.float32(0.0)
            context += inside
        share = one / np.float32(context + 1)
        for a in range(window + 1):
            weights[e, a] *= share
        length = np.float32(lengths[d])
        for s in range(samples):
            ids[e, window + 1 + s] = words[first + int(drawn[e, s] * length)]
            weights[e, window + 1 + s] = share / np.float32(samples)
        scored[e, 0] = words[first + t]
        for k in range(noise_draws.shape[1]):
            scored[e, 1 + k] = noise_table[noise_draws[e, k]]


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def bag_forward(ids, weights, table, uniforms, rate, out):  # pragma: no cover - compiled; tests call it through numba
    """``out[e] = sum_s weights[e, s] * table[ids[e, s]]``, id 0 (padding) left out, then dropped out: each entry
    kept where ``uniforms`` (E, D) is at least ``rate`` and scaled by ``1 / (1 - rate)``, zeroed elsewhere (no
    dropout when ``uniforms`` has no rows). ids (E, S) int64, weights (E, S), table (V + 1, D), out (E, D) zeros."""
    for e in range(ids.shape[0]):
        for s in range(ids.shape[1]):
            if ids[e, s] != 0:
                _add(out[e], table[ids[e, s]], weights[e, s])
        if uniforms.shape[0] > 0:
            _drop(out[e], uniforms[e], rate)


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def _drop(row, uniforms, rate):
    scale = 1.0 / (1.0 - rate)
    for i in range(row.shape[0]):
        row[i] = row[i] * scale if uniforms[i] >= rate else 0.0


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def bag_backward(ids, weights, grad, uniforms, rate, table_grad):  # pragma: no cover - compiled; tests call it
    """``table_grad[ids[e, s]] += weights[e, s] * dropout(grad[e])`` (id 0 never trains), ``dropout`` the mask and
    scale of :func:`bag_forward`: the gradient of :func:`bag_forward` for its table, added into ``table_grad``
    (V + 1, D)."""
    row = np.empty(grad.shape[1], dtype=grad.dtype)
    for e in range(ids.shape[0]):
        row[:] = grad[e]
        if uniforms.shape[0] > 0:
            _drop(row, uniforms[e], rate)
        for s in range(ids.shape[1]):
            if ids[e, s] != 0:
                _add(table_grad[ids[e, s]], row, weights[e, s])


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def scores_backward(hidden, table, ids, grad, hidden_grad, table_grad):  # pragma: no cover - compiled
    """The gradients of the scores ``table[ids[e, k]] . hidden[e]`` (:func:`sampling_forward`'s) from ``grad``
    (E, K): written into ``hidden_grad`` (E, D) and added into ``table_grad`` (V + 1, D)."""
    for e in range(ids.shape[0]):
        hidden_grad[e] = 0.0
        for k in range(ids.shape[1]):
            g = grad[e, k]
            if g != 0.0:
                _add(hidden_grad[e], table[ids[e, k]], g)
                _add(table_grad[ids[e, k]], hidden[e], g)


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def sampling_forward(hidden, table, scored, losses, slopes):  # pragma: no cover - compiled; tests call it
    """Negative sampling's loss of each example (E,): ``-log sigmoid(s)`` of its target's score ``s`` (``scored[e,
    0]``'s row of ``table`` . ``hidden[e]``) and ``-log sigmoid(-s)`` of each noise word's (``scored[e, 1:]``), a
    noise word equal to the target left out; ``slopes`` (E, 1 + K): the loss's derivative by each score (0 for a word
    left out)."""
    for e in range(scored.shape[0]):
        target = scored[e, 0]
        total = 0.0
        for k in range(scored.shape[1]):
            word = scored[e, k]
            if k > 0 and word == target:
                slopes[e, k] = 0.0
                continue
            signed = _dot(table[word], hidden[e]) * (1.0 if k == 0 else -1.0)
            small = math.exp(-abs(signed))  # one exponential for the loss and its slope
            total += math.log1p(small) + max(-signed, 0.0)  # -log sigmoid(signed)
            falling = small / (1.0 + small) if signed > 0 else 1.0 / (1.0 + small)  # sigmoid(-signed)
            slopes[e, k] = -falling if k == 0 else falling  # -sign * sigmoid(-signed)
        losses[e] = total


def compiled(*tensors: Tensor) -> bool:
    """Whether the kernels apply: every tensor on the CPU, the float ones float32 (the kernels' one dtype)."""
    return all(t.device.type == "cpu" and (not t.is_floating_point() or t.dtype == torch.float32) for t in tensors)
