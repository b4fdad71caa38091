"""Collation pieces shared by methods: tokenisation into :class:`TokenBatch` and MLM masking."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from lit_docemb.data.core.batches import MaskedTokenBatch, TokenBatch
from lit_docemb.data.core.document import Document

#: Characters kept per token of budget before tokenising. A 512-token window never needs more than
#: 512 * 12 characters of ordinary text; cutting first keeps million-character documents cheap.
CHARS_PER_TOKEN = 12


def tokenize(tokenizer: PreTrainedTokenizerBase, texts: list[str], max_length: int) -> TokenBatch:
    """Tokenises texts into one padded batch of at most ``max_length`` tokens each ((0, 1) for no texts)."""
    if not texts:
        empty = torch.zeros(0, 1, dtype=torch.long)
        return TokenBatch(empty, empty.clone())
    limit = max_length * CHARS_PER_TOKEN
    encoded = tokenizer([t[:limit] for t in texts], max_length=max_length, truncation=True, padding=True,
                        return_tensors="pt")
    return TokenBatch(encoded["input_ids"], encoded["attention_mask"])


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a single text (``[CLS]`` / ``[SEP]`` for BERT)."""
    bare = tokenizer("chunk", add_special_tokens=False)["input_ids"]
    full = tokenizer("chunk")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start:start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    raise ValueError(f"cannot tell the special tokens of {type(tokenizer).__name__}: {full} around {bare}")


def frame_token_ids(tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """The ids that frame a text rather than stand for it: [CLS], [SEP] (or <s>, </s>) and padding."""
    return {i for i in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.bos_token_id,
                        tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}


def has_content(tokens: TokenBatch, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """(N,) bool: whether each row holds a token besides :func:`frame_token_ids`. A text of control or format
    characters has words but no tokens once the tokenizer's normaliser removes them: such a view is empty."""
    frame = torch.tensor(sorted(frame_token_ids(tokenizer)), dtype=torch.long)
    real = tokens.attention_mask.bool() & ~torch.isin(tokens.input_ids, frame)
    return real.any(dim=1)


def document_text(doc: Document, with_title: bool) -> str:
    body = doc.text
    return f"{doc.title}\n\n{body}" if with_title and doc.title else body


def mask_tokens(tokens: TokenBatch, tokenizer: PreTrainedTokenizerBase, probability: float,
                generator: torch.Generator | None = None) -> MaskedTokenBatch:
    """BERT's masking: ``probability`` of the real, non-special tokens are chosen; of those 80% become
    [MASK], 10% a random token and 10% stay. Labels hold the original ids at chosen positions, -100 elsewhere.
    """
    if tokenizer.mask_token_id is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no mask token: set mlm_weight to 0")
    input_ids = tokens.input_ids.clone()
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    for token_id in tokenizer.all_special_ids:
        special |= input_ids == token_id
    candidates = tokens.attention_mask.bool() & ~special
    chosen = (torch.rand(input_ids.shape, generator=generator) < probability) & candidates
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    draw = torch.rand(input_ids.shape, generator=generator)
    input_ids[chosen & (draw < 0.8)] = tokenizer.mask_token_id
    random_positions = chosen & (draw >= 0.8) & (draw < 0.9)
    random_ids = torch.randint(len(tokenizer), input_ids.shape, generator=generator)
    input_ids[random_positions] = random_ids[random_positions]
    return MaskedTokenBatch(input_ids, tokens.attention_mask.clone(), labels)


def pad_ids(sequences: Sequence[Sequence[int]], pad_id: int) -> TokenBatch:
    """Right-padded (N, T) ids and mask of N id lists (T >= 1; (0, 1) for no lists)."""
    length = max([len(s) for s in sequences] + [1])
    input_ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for row, ids in enumerate(sequences):
        input_ids[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[row, :len(ids)] = 1
    return TokenBatch(input_ids, attention_mask)


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


def take_rows(tokens: TokenBatch, index: Tensor) -> TokenBatch:
    """Rows ``index`` of a :class:`TokenBatch` (or subclass: every (N, T) field is taken), trimmed to the
    longest of those rows (right padding only)."""
    index = index.to(tokens.input_ids.device)
    width = max(int(token_lengths(tokens.attention_mask[index]).max()), 1) if len(index) else 1
    return type(tokens)(**{f.name: getattr(tokens, f.name)[index, :width] for f in fields(tokens)})


def split_token_batch(
    tokens: TokenBatch, token_budget: int, sort_by_length: bool = False
) -> tuple[list[TokenBatch], list[Tensor]]:
    """A :class:`TokenBatch` cut into sub-batches within ``token_budget``, each trimmed to its own longest row.

    Returns:
        The sub-batches and their row indices (pass both to :func:`grad_cache_step`).
    """
    rows = split_rows_by_token_budget(token_lengths(tokens.attention_mask), token_budget, sort_by_length)
    return [take_rows(tokens, index) for index in rows], rows
