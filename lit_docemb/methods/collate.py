"""Collation pieces shared by methods: tokenisation into :class:`TokenBatch` and MLM masking."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from lit_docemb.data.batches import MaskedTokenBatch, TokenBatch
from lit_docemb.data.document import Document

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
