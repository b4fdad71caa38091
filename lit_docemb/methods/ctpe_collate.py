"""CTPE's batches and collators (seed 004): documents split at ``pos`` into (former, latter) token ids, with a
freshly drawn uncoupled pair per document in training. See :mod:`lit_docemb.methods.ctpe`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lit_docemb.data.batches import TokenBatch
from lit_docemb.data.document import Document
from lit_docemb.methods.ctpe_sampling import PartnerSampler
from lit_docemb.methods.collate import pad_ids
from lit_docemb.methods.ctpe_text import split_ids
from lit_docemb.methods.docsplit import doc_index


@dataclass
class CoupledPairBatch:
    """B training examples: a coupled pair and an uncoupled pair each (row i of every field is example i).

    Attributes:
        former, latter: (B, T) tokens of f_i and b_i.
        negative_former, negative_latter: (B, T) tokens of the uncoupled pair (f_i, b_j) or (f_j, b_i).
        skipped: documents of the incoming list that could not be split or found no splittable partner.
    """

    former: TokenBatch
    latter: TokenBatch
    negative_former: TokenBatch
    negative_latter: TokenBatch
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.former)


@dataclass
class CoupledDocumentBatch:
    """Documents to represent: former and latter part tokens (B, T) and the B ids of the split documents."""

    former: TokenBatch
    latter: TokenBatch
    ids: list[str]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.former)


class PairSplitter:
    """Document → (former ids, latter ids) at ``pos``, or ``None`` (see :func:`ctpe_text.split_ids`)."""

    def __init__(self, tokenizer, pos: float | str, max_length: int) -> None:
        self.tokenizer, self.pos, self.max_length = tokenizer, pos, max_length

    def __call__(self, doc: Document) -> tuple[list[int], list[int]] | None:
        return split_ids(doc, self.pos, self.tokenizer.encode, self.max_length)


class CoupledPairCollator:
    """Documents → :class:`CoupledPairBatch` (runs in dataloader workers). In training the partners and the
    side of each uncoupled pair come from torch's RNG, which the training loader seeds per batch from (seed, epoch,
    position: new pairs every epoch, the same after a resume, see ``lit_docemb/data/sampling.py``); with
    ``deterministic`` they are a function of the document id."""

    max_partner_draws = 10

    def __init__(self, splitter: PairSplitter, sampler: PartnerSampler, pad_id: int, deterministic: bool) -> None:
        self.splitter, self.sampler, self.pad_id, self.deterministic = splitter, sampler, pad_id, deterministic

    def _partner(self, doc: Document, generator: torch.Generator) -> tuple[list[int], list[int]] | None:
        for _ in range(self.max_partner_draws):
            partner = self.sampler.partner(doc.id, generator)
            pair = None if partner is None else self.splitter(partner)
            if pair is not None:
                return pair
        return None

    def __call__(self, documents: list[Document]) -> CoupledPairBatch:
        batch_generator = None
        if not self.deterministic:  # one draw from torch's RNG per batch, then a private generator
            batch_generator = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))
        rows = []
        for doc in documents:
            generator = batch_generator if batch_generator is not None else \
                torch.Generator().manual_seed(doc_index(doc.id))
            pair = self.splitter(doc)
            partner = None if pair is None else self._partner(doc, generator)
            if partner is None:
                continue
            swap_latter = bool(torch.randint(2, (), generator=generator))  # (f_i, b_j) else (f_j, b_i)
            negative = (pair[0], partner[1]) if swap_latter else (partner[0], pair[1])
            rows.append((*pair, *negative))
        columns = [pad_ids([row[c] for row in rows], self.pad_id) for c in range(4)]
        return CoupledPairBatch(*columns, skipped=len(documents) - len(rows))


class CoupledDocumentCollator:
    """Documents → :class:`CoupledDocumentBatch` for representation; unsplittable ones are dropped and counted."""

    def __init__(self, splitter: PairSplitter, pad_id: int) -> None:
        self.splitter, self.pad_id = splitter, pad_id

    def __call__(self, documents: list[Document]) -> CoupledDocumentBatch:
        pairs = [(doc.id, self.splitter(doc)) for doc in documents]
        kept = [(doc_id, pair) for doc_id, pair in pairs if pair is not None]
        former = pad_ids([pair[0] for _, pair in kept], self.pad_id)
        latter = pad_ids([pair[1] for _, pair in kept], self.pad_id)
        return CoupledDocumentBatch(former, latter, [doc_id for doc_id, _ in kept], len(documents) - len(kept))
