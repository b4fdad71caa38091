"""Compiled CPU kernels of Doc2VecC's word-level loss as an optimizer trains it (DECA's Algorithm 1,
:meth:`lit_docemb.models.doc2vecc.Doc2VecC.example_loss`): the weighted bag of words that is each example's hidden
vector, and negative sampling's scores, each with its gradient. They read the rows they need where torch's ops
would gather them into (examples, words, dimension) blocks first, the way ``doc2vecc.c`` reads them; one thread,
float32, compiled by numba. The torch expressions in :mod:`lit_docemb.models.doc2vecc` are the same functions on
other devices and dtypes, and the tests' oracle.
"""

from __future__ import annotations

import numba
import torch
from torch import Tensor

from lit_docemb.models.doc2vecc_sgd import VECTOR_MATH, _add, _dot


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def bag_forward(ids, weights, table, out):  # pragma: no cover - compiled; tests call it through numba
    """``out[e] = sum_s weights[e, s] * table[ids[e, s]]``, id 0 (padding) left out. ids (E, S) int64, weights
    (E, S), table (V + 1, D), out (E, D) zeros."""
    for e in range(ids.shape[0]):
        for s in range(ids.shape[1]):
            if ids[e, s] != 0:
                _add(out[e], table[ids[e, s]], weights[e, s])


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def bag_backward(ids, weights, grad, table_grad):  # pragma: no cover - compiled; tests call it through numba
    """``table_grad[ids[e, s]] += weights[e, s] * grad[e]`` (id 0 never trains): the gradient of
    :func:`bag_forward` for its table, added into ``table_grad`` (V + 1, D)."""
    for e in range(ids.shape[0]):
        for s in range(ids.shape[1]):
            if ids[e, s] != 0:
                _add(table_grad[ids[e, s]], grad[e], weights[e, s])


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def scores_forward(hidden, table, ids, out):  # pragma: no cover - compiled; tests call it through numba
    """``out[e, k] = table[ids[e, k]] . hidden[e]``: hidden (E, D), table (V + 1, D), ids (E, K), out (E, K)."""
    for e in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            out[e, k] = _dot(table[ids[e, k]], hidden[e])


@numba.njit(cache=True, nogil=True, fastmath=VECTOR_MATH)
def scores_backward(hidden, table, ids, grad, hidden_grad, table_grad):  # pragma: no cover - compiled
    """The gradients of :func:`scores_forward` from ``grad`` (E, K): written into ``hidden_grad`` (E, D) and added
    into ``table_grad`` (V + 1, D)."""
    for e in range(ids.shape[0]):
        hidden_grad[e] = 0.0
        for k in range(ids.shape[1]):
            g = grad[e, k]
            if g != 0.0:
                _add(hidden_grad[e], table[ids[e, k]], g)
                _add(table_grad[ids[e, k]], hidden[e], g)


def compiled(*tensors: Tensor) -> bool:
    """Whether the kernels apply: every tensor on the CPU, the float ones float32 (the kernels' one dtype)."""
    return all(t.device.type == "cpu" and (not t.is_floating_point() or t.dtype == torch.float32) for t in tensors)
