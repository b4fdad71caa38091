"""GradCache (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup").

A contrastive loss needs the embeddings of the whole batch at once, but its gradient with respect to the
encoder only needs, per row, ``d loss / d embedding``. GradCache therefore

1. encodes the batch in sub-batches without a graph, recording the random state before each; in a batch of
   at most :data:`KEEP_LAST_GRAPH_UP_TO` sub-batches the last one is encoded with its graph, which step 3 uses
   instead of encoding it again (with 2 sub-batches a quarter of the forward work);
2. computes the loss (and any cross-rank gather inside it) on the concatenated embeddings, made a leaf, and
   takes ``g = d loss / d embeddings`` once;
3. backpropagates ``sum(embedding * g)`` (in at least fp32) through that kept graph, if any, then re-encodes
   every other sub-batch with a graph from its recorded random state (so dropout draws the same masks) and does
   the same; each such parameter gradient is that sub-batch's share of ``d loss / d theta``.

Peak activation memory is that of one sub-batch plus the (N, D) embeddings, whatever N, plus one buffer the
size of the trainable parameters. Under DDP the gradient all-reduce runs once per step (see
:func:`grad_cache_step` for how), and a method turns all of this on from config
(``EmbeddingMethod(grad_cache_token_budget=...)``) by describing its batch as a :class:`CacheableBatch`.

The unit is "rows of a batch": ``encode`` maps one sub-batch to (rows, D) embeddings, whatever it does inside
(a flat transformer over tokens, or passages -> graph, chunks -> LSTM). :func:`split_rows_by_token_budget`
forms sub-batches whose padded size ``rows * max row length`` stays within a token budget, so a batch of
long documents gets small sub-batches and a batch of short ones large ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor



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
class CacheableBatch:
    """A batch as GradCache sees it: N rows, each encoded on its own into one embedding, then one loss.

    A method that supports GradCache returns this from ``EmbeddingMethod.cacheable(batch)``.

    Attributes:
        costs: (N,) padded tokens each row costs to encode (a view's length; passages x passage length for a
            document graph; chunks x chunk length for CoLDE), used to form sub-batches within a token budget.
        take: Row indices (int64) -> a sub-batch, in whatever form ``encode`` accepts.
        encode: Sub-batch -> (rows, D) embeddings, or ``(embeddings, terms)`` where ``terms`` are *additive*
            loss terms of those rows (e.g. the sub-batch's share of the MLM loss: summed over sub-batches they
            give the batch's term). Additive terms are read only from the pass with a graph; a method may
            skip computing them when ``torch.is_grad_enabled()`` is false.
        loss: (N, D) embeddings of the whole batch in row order -> named terms (``*_loss`` and metrics). It
            may gather across ranks, and it may own trainable parameters (a classifier's head): it runs once per
            step, and their gradient is taken with the embeddings' (see :func:`grad_cache_step`).
    """

    costs: Tensor
    take: Callable[[Tensor], Any]
    encode: Callable[[Any], Tensor | tuple[Tensor, dict[str, Tensor]]]
    loss: Callable[[Tensor], dict[str, Tensor]]


@dataclass
class GradCacheOutput:
    """Result of :func:`grad_cache_step`.

    Attributes:
        backward_loss: Scalar to call ``backward()`` on once (Lightning does it with the returned loss). Its
            gradient with respect to every parameter is exactly ``d loss / d theta``; its *value* is
            meaningless (log ``loss`` instead).
        loss: The detached scalar loss of the whole batch (weighted ``*_loss`` sum, additive terms included).
        terms: The detached named terms: those of the batch loss and the summed additive terms.
        embeddings: (N, D) detached embeddings in row order.
        sub_batches: How many sub-batches the batch was encoded in.
    """

    backward_loss: Tensor
    loss: Tensor
    terms: dict[str, Tensor]
    embeddings: Tensor
    sub_batches: int


KEEP_LAST_GRAPH_UP_TO = 4
"""Batches of at most this many sub-batches keep the last one's first graph instead of encoding it again: that
saves at least a quarter of the forward work there. In bigger batches the saving is small, and holding that
graph while the loss and the gradient buffer are allocated made the CPU heap grow, so they re-encode every
sub-batch (figures: docs/performance.md)."""


def _at_least_fp32(x: Tensor) -> Tensor:
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _split_output(out) -> tuple[Tensor, dict[str, Tensor]]:
    return out if isinstance(out, tuple) else (out, {})


def grad_cache_step(
    sub_batches: Sequence[Any],
    encode: Callable[[Any], Tensor | tuple[Tensor, dict[str, Tensor]]],
    loss_fn: Callable[[Tensor], dict[str, Tensor]],
    parameters: Sequence[Tensor],
    rows: Sequence[Tensor] | None = None,
    total: Callable[[dict[str, Tensor]], Tensor] | None = None,
    replay_random_state: bool = True,
    accumulate_in_place: bool = False,
) -> GradCacheOutput:
    """GradCache for one batch: returns a scalar whose single ``backward()`` gives the full-batch gradient.

    In small batches the last sub-batch keeps the graph of its first encoding; every sub-batch's surrogate but
    that of the last one re-encoded is differentiated with ``torch.autograd.grad`` into a buffer, which fires
    no backward hooks, so DDP's reducer stays untouched; the returned scalar is that last re-encoded
    sub-batch's surrogate plus ``sum(p * buffer_p)`` over the parameters, whose gradient is the buffer. One
    ``backward()`` of it therefore reaches every parameter once: under DDP the all-reduce runs once per step
    and sees every weight used; gradient accumulation, clipping and bf16 autocast work as for any loss. Parameters
    that ``loss_fn`` itself uses get their gradient from the loss's one differentiation, into the same buffer. An
    encoder whose embeddings carry no graph (every weight frozen: only the loss trains) is not encoded again.

    Args:
        sub_batches: The batch cut into sub-batches (any type ``encode`` accepts), encoded one at a time.
        encode: Sub-batch -> (rows, D) embeddings, or ``(embeddings, additive terms)`` (see
            :class:`CacheableBatch`).
        loss_fn: (N, D) fp32 embeddings of the whole batch in row order -> named terms.
        parameters: The trainable parameters (``requires_grad``) that receive gradients.
        rows: Row indices of each sub-batch in the original batch (from :func:`split_rows_by_token_budget`
            with ``sort_by_length=True``); embeddings are put back in row order before ``loss_fn``. ``None``:
            the sub-batches are consecutive rows.
        total: Named terms -> the scalar to differentiate (the method's weighted sum of ``*_loss`` terms);
            default: the sum of the terms whose names end in ``_loss``.
        replay_random_state: Restore each sub-batch's random state before re-encoding it. Only tests turn
            this off, to show that dropout masks then differ and the gradient is wrong.
        accumulate_in_place: Gather the buffer by backpropagating the sub-batches but the last into ``.grad``
            (set aside before and restored after) instead of with ``torch.autograd.grad``. Right only where
            nothing hooks the backward pass (no DDP); it allocates no fresh parameter-sized gradient per
            sub-batch, a churn that makes glibc's heap grow with the number of sub-batches on CPU.
    """
    if len(sub_batches) == 0:
        raise ValueError("grad_cache_step needs at least one sub-batch")
    total = total or (lambda terms: sum(v for k, v in terms.items() if k.endswith("_loss")))
    if len(sub_batches) == 1:  # the batch fits in one sub-batch: nothing to cache, one forward with a graph
        return _single_sub_batch(sub_batches[0], encode, loss_fn, rows, total)
    parameters = [p for p in parameters if p.requires_grad]
    states, cached = [], []
    keep = len(sub_batches) <= KEEP_LAST_GRAPH_UP_TO  # the last sub-batch's graph is used, not rebuilt
    replayed = sub_batches[:-1] if keep else sub_batches
    with torch.no_grad():  # (1) embeddings without a graph
        for sub_batch in replayed:
            states.append(RandomState.capture())
            cached.append(_split_output(encode(sub_batch))[0])
    if keep:
        kept, kept_additive = _split_output(encode(sub_batches[-1]))
        cached.append(kept.detach())
    leaf = _at_least_fp32(torch.cat(cached)).requires_grad_()  # (N, D), in sub-batch order
    embeddings = leaf
    if rows is not None:  # back to row order
        embeddings = leaf[torch.argsort(torch.cat(list(rows))).to(leaf.device)]  # (N, D)
    terms = loss_fn(embeddings)  # (2) the loss of the whole batch, once
    gradient, *own = torch.autograd.grad(total(terms), [leaf, *parameters], allow_unused=True)  # (N, D), the
    terms = {k: v.detach() for k, v in terms.items()}  # loss's own parameters' gradients (None for the encoder's)
    buffer: list[Tensor | None] = [None] * len(parameters)
    if accumulate_in_place:  # .grad collects this batch's sub-batches; what it held comes back at the end
        previous = [p.grad for p in parameters]
        for p in parameters:
            p.grad = None

    def surrogate_of(sub_embeddings: Tensor, additive: dict[str, Tensor], offset: int) -> Tensor:
        surrogate = (_at_least_fp32(sub_embeddings) * gradient[offset: offset + sub_embeddings.shape[0]]).sum()
        if additive:
            surrogate = surrogate + total(additive)
            for name, value in additive.items():
                terms[name] = terms[name] + value.detach() if name in terms else value.detach()
        return surrogate

    def into_buffer(surrogate: Tensor) -> None:
        if accumulate_in_place:
            surrogate.backward()
            return
        grads = torch.autograd.grad(surrogate, parameters, allow_unused=True)
        for j, g in enumerate(grads):
            if g is not None:
                buffer[j] = g if buffer[j] is None else buffer[j].add_(g)

    # (3) the last sub-batch's graph first, so that it is freed before the others are re-encoded ...
    surrogate = None
    trains = not keep or kept.requires_grad  # False: a frozen encoder, nothing to backpropagate into it
    if keep and trains:
        into_buffer(surrogate_of(kept, kept_additive, leaf.shape[0] - kept.shape[0]))
    if keep:
        del kept, kept_additive
    offset = 0
    for i, (sub_batch, state) in enumerate(zip(replayed, states) if trains else ()):  # ... then the others, replayed
        if replay_random_state:
            state.restore()
        sub_embeddings, additive = _split_output(encode(sub_batch))  # (rows, D)
        if not sub_embeddings.requires_grad:  # a frozen encoder, seen on its first re-encoding
            break
        surrogate = surrogate_of(sub_embeddings, additive, offset)
        offset += sub_embeddings.shape[0]
        if i < len(replayed) - 1:
            into_buffer(surrogate)
    if accumulate_in_place:
        buffer = [p.grad for p in parameters]
        for p, grad in zip(parameters, previous):
            p.grad = grad
    buffer = [b if g is None else g if b is None else b + g for b, g in zip(buffer, own)]
    carried = [(p * b).sum() for p, b in zip(parameters, buffer) if b is not None]
    backward_loss = sum(carried, surrogate if surrogate is not None else leaf.new_zeros(()))
    return GradCacheOutput(backward_loss, total(terms).detach(), terms, embeddings.detach(), len(sub_batches))


def _single_sub_batch(sub_batch, encode, loss_fn, rows, total) -> GradCacheOutput:
    """What :func:`grad_cache_step` computes when there is one sub-batch, without the no-grad pass."""
    sub_embeddings, additive = _split_output(encode(sub_batch))
    embeddings = _at_least_fp32(sub_embeddings)  # (N, D)
    if rows is not None:
        embeddings = embeddings[torch.argsort(rows[0]).to(embeddings.device)]
    terms = loss_fn(embeddings)
    backward_loss = total(terms) + total(additive) if additive else total(terms)
    terms = {k: v.detach() for k, v in {**terms, **additive}.items()}
    return GradCacheOutput(backward_loss, total(terms).detach(), terms, embeddings.detach(), 1)
