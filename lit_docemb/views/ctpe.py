"""CTPE's batches and collators (seed 004): documents split at ``pos`` into (former, latter) token ids, with a
freshly drawn uncoupled pair per document in training. See :mod:`lit_docemb.methods.ctpe`. The tokenizers whose ids
they split are :mod:`lit_docemb.models.ctpe_tokenizers`; the input models that build them with their token vectors,
:mod:`lit_docemb.models.ctpe`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from lit_docemb.data.core.batches import CoupledDocumentBatch, CoupledPairBatch
from lit_docemb.data.core.document import Document, doc_index
from lit_docemb.data.caches.field_cache import FieldRows
from lit_docemb.errors import BadArgument
from lit_docemb.data.core.tokens import pad_ids
from lit_docemb.models import ctpe_tokenizers
from lit_docemb.models.ctpe_tokenizers import HFTokenIds, WordTokenizer


class PairSplitter:
    """Document → (former ids, latter ids) at ``pos``, or ``None`` (see :func:`split_ids`): from its fields' ids in
    ``cached`` (:class:`FieldIds` rows of the field cache) when the cache holds it, else from its text; both give the
    same ids.

    Args:
        tokenizer: A tokenizer of :mod:`lit_docemb.models.ctpe_tokenizers` (``WordTokenizer``, ``HFTokenIds``,
            ``CharacterIds`` or ``SentenceWordIds``).
        pos: The split position (:func:`check_pos`).
        max_length: Ids kept per part.
        cached: The field cache's rows by document id, made with the same tokenizer; ``None``: always the text.
    """

    def __init__(self, tokenizer, pos: float | str, max_length: int, cached: FieldRows | None = None) -> None:
        self.tokenizer, self.pos, self.max_length, self.cached = tokenizer, pos, max_length, cached

    def __call__(self, doc: Document) -> tuple[list[int], list[int]] | None:
        row = None if self.cached is None else self.cached.get(doc.id)
        unit_end_id = getattr(self.tokenizer, "unit_end_id", None)  # parts of words / sentences: max_length counts them
        if row is not None:
            return split_fields(row.fields(), self.pos, self.max_length, unit_end_id)
        return split_ids(doc, self.pos, self.tokenizer.encode, self.max_length, unit_end_id)


class FieldIds:
    """The encoding that CTPE's field cache stores (:class:`~lit_docemb.data.caches.field_cache.FieldTokenCache`): a
    document → (heading, ids) of each of its :func:`document_fields`, encoded by ``tokenizer``.

    Args:
        tokenizer: A :class:`WordTokenizer` or :class:`HFTokenIds`.
    """

    def __init__(self, tokenizer: WordTokenizer | HFTokenIds) -> None:
        self.tokenizer = tokenizer

    def __call__(self, document: Document) -> list[tuple[str, list[int]]]:
        return [(heading, self.tokenizer.encode(text)) for heading, text in document_fields(document)]

    def key(self) -> str:
        """The tokenizer's key and the sources of this module (the fields) and of
        :mod:`~lit_docemb.models.ctpe_tokenizers` (the word rules)."""
        sources = b"".join(Path(module).read_bytes() for module in (__file__, ctpe_tokenizers.__file__))
        return f"{self.tokenizer.key()}:{hashlib.blake2b(sources, digest_size=16).hexdigest()}"


class CoupledPairCollator:
    """Documents → :class:`CoupledPairBatch` (runs in dataloader workers). In training the partners and the
    side of each uncoupled pair come from torch's RNG, which the training loader seeds per batch from (seed, epoch,
    position: new pairs every epoch, the same after a resume, see ``lit_docemb/data/core/sampling.py``); with
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


def tfidf_neighbours(texts: Sequence[str], k: int = 100, chunk_size: int = 1024) -> np.ndarray:
    """(N, min(k, N - 1)) int64: row i holds the indices of the k texts most similar to text i by the cosine
    of their TF-IDF vectors (scikit-learn's defaults), best first, never i itself."""
    if len(texts) < 2:
        raise ValueError(f"TF-IDF neighbours need at least 2 documents, got {len(texts)}")
    from sklearn.feature_extraction.text import TfidfVectorizer  # here: the package imports without scikit-learn

    k = min(k, len(texts) - 1)
    matrix = TfidfVectorizer().fit_transform(texts)  # (N, V), rows L2-normalised
    rows = []
    for start in range(0, len(texts), chunk_size):
        scores = (matrix[start:start + chunk_size] @ matrix.T).toarray()  # (C, N)
        scores[np.arange(len(scores)), np.arange(start, start + len(scores))] = -np.inf  # never itself
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (C, k), unordered
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        rows.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(rows).astype(np.int64)


class PartnerSampler:
    """Draws, for a document of ``corpus``, another document of ``corpus`` as its negative partner.

    Picklable (it runs in dataloader workers); the draws come from the generator passed in.

    Args:
        corpus: The documents partners come from (indexable).
        ids: ``ids[i]`` is the id of ``corpus[i]``.
        neighbours: Optional (N, k) TF-IDF neighbour indices (:func:`tfidf_neighbours`).
        neighbour_probability: With ``neighbours``, the chance that a partner comes from the document's neighbour
            list rather than uniformly from the corpus (§4.7's random(random(T100), random(D)): 0.5).
    """

    def __init__(self, corpus: Sequence[Document], ids: Sequence[str], neighbours: np.ndarray | None = None,
                 neighbour_probability: float = 0.5) -> None:
        if not 0.0 <= neighbour_probability <= 1.0:
            raise ValueError(f"neighbour_probability must be in [0, 1], got {neighbour_probability}")
        if len(ids) != len(corpus):
            raise ValueError(f"{len(ids)} ids for {len(corpus)} documents")
        if neighbours is not None and len(neighbours) != len(corpus):
            raise ValueError(f"{len(neighbours)} neighbour rows for {len(corpus)} documents")
        self.corpus = corpus
        self.row_of = {doc_id: row for row, doc_id in enumerate(ids)}
        self.neighbours = neighbours
        self.neighbour_probability = neighbour_probability

    def __len__(self) -> int:
        return len(self.corpus)

    def partner_row(self, doc_id: str, generator: torch.Generator) -> int | None:
        """The corpus row of a partner for ``doc_id`` (never its own row); ``None`` when the corpus holds no
        other document."""
        row = self.row_of.get(doc_id)
        n = len(self.corpus)
        if n - (row is not None) < 1:
            return None
        from_neighbours = self.neighbours is not None and row is not None
        if from_neighbours and float(torch.rand((), generator=generator)) < self.neighbour_probability:
            choices = self.neighbours[row]
            return int(choices[int(torch.randint(len(choices), (), generator=generator))])
        if row is None:
            return int(torch.randint(n, (), generator=generator))
        other = int(torch.randint(n - 1, (), generator=generator))
        return other + (other >= row)  # uniform over the rows other than ``row``

    def partner(self, doc_id: str, generator: torch.Generator) -> Document | None:
        row = self.partner_row(doc_id, generator)
        return None if row is None else self.corpus[row]


def check_pos(pos: float | str) -> float | str:
    """Validates ``pos`` (see the module docstring) and returns it."""
    if isinstance(pos, int | float) and not isinstance(pos, bool):
        if not 0.0 < float(pos) < 1.0:
            raise BadArgument("pos", f"a token ratio must lie strictly between 0 and 1, got {pos}")
        return float(pos)
    if pos == "title" or (isinstance(pos, str) and pos.startswith("before:") and pos[len("before:"):].strip()):
        return pos
    raise BadArgument("pos", f"must be 'title', 'before:<section heading>' or a ratio in (0, 1), got {pos!r}")


def document_fields(doc: Document) -> list[tuple[str, str]]:
    """(heading, text) of the title (heading "title") and of every section, in order."""
    fields = [(s.heading.strip().lower(), s.text) for s in doc.sections]
    if doc.title and not any(heading == "title" for heading, _ in fields):
        fields.insert(0, ("title", doc.title))
    return fields


def split_ids(doc: Document, pos: float | str, encode, max_length: int,
              unit_end_id: int | None = None) -> tuple[list[int], list[int]] | None:
    """(former ids, latter ids) of ``doc`` split at ``pos``, each cut to ``max_length`` (:func:`split_fields`);
    ``None`` when it cannot be split (``encode``: text → ids)."""
    return split_fields([(heading, encode(text)) for heading, text in document_fields(doc)], pos, max_length,
                        unit_end_id)


def split_fields(fields: Sequence[tuple[str, Sequence[int]]], pos: float | str, max_length: int,
                 unit_end_id: int | None = None) -> tuple[list[int], list[int]] | None:
    """(former ids, latter ids) of a document's encoded :func:`document_fields` split at ``pos``, each cut to
    ``max_length`` ids, or, with ``unit_end_id`` (ids of sentences, each closed by that id), to ``max_length``
    sentences; ``None`` when it cannot be split (the heading of ``pos`` missing, or an empty part)."""
    if isinstance(pos, float):
        ids = _joined([ids for _, ids in fields])
        cut = round(pos * len(ids))
        former, latter = ids[:cut], ids[cut:]
    else:
        target = "title" if pos == "title" else pos[len("before:"):].strip().lower()
        headings = [heading for heading, _ in fields]
        if target not in headings:
            return None
        boundary = headings.index(target) + (1 if pos == "title" else 0)
        former = _joined([ids for _, ids in fields[:boundary]])
        latter = _joined([ids for _, ids in fields[boundary:]])
    if not len(former) or not len(latter):
        return None
    return _cut(former, max_length, unit_end_id), _cut(latter, max_length, unit_end_id)


def _cut(ids: np.ndarray, max_length: int, unit_end_id: int | None) -> list[int]:
    """The first ``max_length`` ids, or with ``unit_end_id`` the ids of the first ``max_length`` units."""
    if unit_end_id is None:
        return ids[:max_length].tolist()
    ends = np.flatnonzero(ids == unit_end_id)
    return (ids[:ends[max_length - 1] + 1] if len(ends) >= max_length else ids).tolist()


def _joined(parts: list[Sequence[int]]) -> np.ndarray:
    """(N,) int64 the ids of ``parts`` one after the other."""
    return np.concatenate([np.asarray(part, dtype=np.int64) for part in parts]) if parts else np.zeros(0, np.int64)
