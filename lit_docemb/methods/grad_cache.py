"""GradCache (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup").

A contrastive loss needs the embeddings of the whole batch at once, but its gradient with respect to the
encoder only needs, per row, ``d loss / d embedding``. GradCache therefore

1. encodes the batch in sub-batches without a graph, recording the random state before each;
2. computes the loss (and any cross-rank gather inside it) on the concatenated embeddings, made a leaf, and
   takes ``g = d loss / d embeddings`` once;
3. re-encodes each sub-batch with a graph from its recorded random state (so dropout draws the same masks)
   and backpropagates ``sum(embedding * g)`` (in at least fp32), whose parameter gradient is that sub-batch's
   share of ``d loss / d theta``.

Peak activation memory is that of one sub-batch plus the (N, D) embeddings, whatever N. Under DDP the
gradient all-reduce should run once, on the last sub-batch: ``no_sync`` wraps the others.

The unit is "rows of a batch": ``encode`` maps one sub-batch to (rows, D) embeddings, whatever it does inside
(a flat transformer over tokens, or passages -> graph, chunks -> LSTM). :func:`split_rows_by_token_budget`
forms sub-batches whose padded size ``rows * max row length`` stays within a token budget, so a batch of
long documents gets small sub-batches and a batch of short ones large ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ContextManager

import torch
from torch import Tensor

from lit_docemb.data.batches import TokenBatch


@dataclass
class RandomState:
    """The CPU generator state and, when CUDA is initialised, the state of every CUDA device's generator."""

    cpu: Tensor
    cuda: list[Tensor] | None

    @classmethod
    def capture(cls) -> RandomState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return cls(torch.get_rng_state(), cuda)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


@dataclass
class GradCacheOutput:
    """Result of :func:`grad_cache_backward`.

    Attributes:
        loss: The detached scalar loss of the whole batch.
        embeddings: (N, D) detached embeddings in row order (for metrics).
    """

    loss: Tensor
    embeddings: Tensor


def _at_least_fp32(x: Tensor) -> Tensor:
    return x.to(torch.promote_types(x.dtype, torch.float32))


def grad_cache_backward(
    sub_batches: Sequence[Any],
    encode: Callable[[Any], Tensor],
    loss_fn: Callable[[Tensor], Tensor],
    rows: Sequence[Tensor] | None = None,
    no_sync: Callable[[], ContextManager] | None = None,
    backward: Callable[[Tensor], None] | None = None,
    replay_random_state: bool = True,
) -> GradCacheOutput:
    """Accumulates into the encoder's ``.grad`` the gradient of ``loss_fn(encode(whole batch))``.

    Args:
        sub_batches: The batch cut into sub-batches (any type ``encode`` accepts), encoded one at a time.
        encode: Sub-batch -> (rows, D) embeddings, dim 0 being the sub-batch's rows.
        loss_fn: (N, D) embeddings of the whole batch in row order -> scalar loss. It may gather across
            ranks. It must not own trainable parameters: only the encoder's parameters receive gradients.
        rows: Optional row indices of each sub-batch in the original batch (from
            :func:`split_rows_by_token_budget` with ``sort_by_length=True``); the concatenated embeddings are
            put back into row order before ``loss_fn``. ``None``: the sub-batches are consecutive rows.
        no_sync: Context factory that suspends DDP gradient synchronisation (``ddp_model.no_sync``); it wraps
            the forward and backward of every sub-batch but the last. ``None``: nothing to suspend.
        backward: Runs a backward pass from a scalar (``LightningModule.manual_backward`` under Lightning);
            default ``Tensor.backward``.
        replay_random_state: Restore each sub-batch's random state before re-encoding it. Only tests turn
            this off, to show that dropout masks then differ and the gradient is wrong.

    Returns:
        The detached loss and embeddings.
    """
    if len(sub_batches) == 0:
        raise ValueError("grad_cache_backward needs at least one sub-batch")
    backward = backward or Tensor.backward
    states, cached = [], []
    with torch.no_grad():  # (1) embeddings without a graph
        for sub_batch in sub_batches:
            states.append(RandomState.capture())
            cached.append(encode(sub_batch))
    leaf = _at_least_fp32(torch.cat(cached)).requires_grad_()  # (N, D), in sub-batch order
    embeddings = leaf
    if rows is not None:  # back to row order
        embeddings = leaf[torch.argsort(torch.cat(list(rows))).to(leaf.device)]  # (N, D)
    loss = loss_fn(embeddings)  # (2) the loss of the whole batch, once
    (gradient,) = torch.autograd.grad(loss, leaf)  # (N, D)
    offset = 0
    for i, (sub_batch, state) in enumerate(zip(sub_batches, states)):  # (3) replay with a graph
        count = cached[i].shape[0]
        last = i == len(sub_batches) - 1
        with contextlib.nullcontext() if last or no_sync is None else no_sync():
            if replay_random_state:
                state.restore()
            sub_embeddings = encode(sub_batch)  # (rows, D)
            surrogate = (_at_least_fp32(sub_embeddings) * gradient[offset: offset + count]).sum()
            backward(surrogate)
        offset += count
    return GradCacheOutput(loss.detach(), embeddings.detach())


def split_rows_by_token_budget(lengths: Tensor, token_budget: int, sort_by_length: bool = False) -> list[Tensor]:
    """Row indices of sub-batches whose padded size ``rows * max(length)`` is at most ``token_budget``.

    Args:
        lengths: (N,) cost of each row in tokens once padded on its own (a text's length up to its last real
            token; for a document of chunks, chunks * chunk length).
        token_budget: Most padded tokens per sub-batch. A row longer than the budget forms a sub-batch alone.
        sort_by_length: Group rows longest first, so rows of alike length share a sub-batch (less padding,
            fewer sub-batches); otherwise rows stay in their order.

    Returns:
        (rows_k,) int64 index tensors covering ``0..N-1`` once each; ``[empty]`` for N = 0, so that an
        encoder still runs once (DDP needs every weight used).
    """
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    lengths = lengths.detach().cpu().long().clamp(min=1)
    order = torch.argsort(lengths, descending=True, stable=True) if sort_by_length else torch.arange(len(lengths))
    groups, current, longest = [], [], 0
    for row in order.tolist():
        length = int(lengths[row])
        if current and max(longest, length) * (len(current) + 1) > token_budget:
            groups.append(current)
            current, longest = [], 0
        current.append(row)
        longest = max(longest, length)
    groups.append(current)
    return [torch.tensor(group, dtype=torch.long) for group in groups]


def token_lengths(attention_mask: Tensor) -> Tensor:
    """(N,) index of each row's last real token + 1 (its length once padding on the right is cut)."""
    positions = torch.arange(1, attention_mask.shape[-1] + 1, device=attention_mask.device)  # (T,)
    return (attention_mask.long() * positions).amax(-1)


def split_token_batch(
    tokens: TokenBatch, token_budget: int, sort_by_length: bool = False
) -> tuple[list[TokenBatch], list[Tensor]]:
    """A :class:`TokenBatch` cut into sub-batches within ``token_budget``, each trimmed to its own longest row.

    Returns:
        The sub-batches and their row indices (pass both to :func:`grad_cache_backward`).
    """
    lengths = token_lengths(tokens.attention_mask).cpu()  # (N,)
    rows = split_rows_by_token_budget(lengths, token_budget, sort_by_length)
    parts = []
    for index in rows:
        width = max(int(lengths[index].max()), 1) if len(index) else 1  # trim to the sub-batch's longest row
        index = index.to(tokens.input_ids.device)
        parts.append(TokenBatch(tokens.input_ids[index, :width], tokens.attention_mask[index, :width]))
    return parts, rows
