"""What evaluation, and a method that reads its corpus, asks of a DataModule: typed protocols, one per thing asked.

* :class:`MethodBatches`: a DataModule that batches with the method's collators and reads its token cache
  (every :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`, and ``embed``'s
  :class:`~lit_docemb.eval.embedding_writers.EmbedDataModule`; another library's brings its own ``collate_fn``);
* :class:`DocumentSplits`: the splits of a set-up DataModule and the corpus they index (every
  :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`; a method checks it before reading the splits of a
  trainer's DataModule, which may be another library's);
* :class:`EvaluationData`: what ``evaluate``, ``interpolate`` and the evaluations ask of any DataModule (its
  splits, how it readies itself, whether it ranks queries, whether its splits are pairs), which each corpus answers
  its own way;
* :class:`LabelledDocuments`: a corpus whose documents carry a class label
  (:class:`~lit_docemb.data.corpora.labelled.LabelledTextDataModule`);
* :class:`RankingCorpus`: a retrieval corpus with queries and their judgements (qrels) per split
  (:class:`~lit_docemb.data.retrieval.datamodule.RetrievalDataModule`);
* :class:`PairSplit`: a split of labelled document pairs (:class:`~lit_docemb.data.corpora.aan.PairDataset`: AAN's
  pairs mode, :class:`~lit_docemb.data.corpora.similarity_groups.SimilarityGroupDataModule`'s matching split).

Each DataModule declares what it offers by inheriting these classes; code above the data floor asks through them
(``isinstance`` on the runtime-checkable ones where a DataModule may lack the capability) instead of probing
attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from lit_docemb.data.caches.token_cache import TokenCache
    from lit_docemb.data.core.document import Document
    from lit_docemb.data.retrieval.datamodule import QuerySplit


@runtime_checkable
class MethodBatches(Protocol):
    """A DataModule whose loaders batch with the method's collators (run in dataloader workers)."""

    def connect(self, collator: Callable[[str], Callable], token_cache: TokenCache | None = None) -> None:
        """Takes the method's collator factory (stage -> collator) and, where it reads cached token ids, its token
        cache; the method's ``setup`` calls it."""


@runtime_checkable
class DocumentSplits(Protocol):
    """The splits of a set-up DataModule and the corpus they index.

    Attributes:
        documents: The corpus the splits' indices index (None before ``setup``, and for a ranking corpus read as
            ``corpus`` in retrieval mode); a split whose items are a method's cached rows reads its documents here.
        train_set: The training split.
        val_set: The validation split (held-out documents, or pairs, or validation queries' examples).
        test_set: The test split; None when the corpus has none.
        all_set: Every document the splits draw from (what ``predict`` embeds with ``predict_split: all``).
    """

    documents: Sequence[Document] | None
    train_set: Any
    val_set: Any
    test_set: Any
    all_set: Any

    @property
    def fit_set(self) -> Any:
        """What training reads: the training split, or more (a labelled corpus's ``fit_on: all``)."""


@runtime_checkable
class EvaluationData(DocumentSplits, Protocol):
    """What ``evaluate``, ``interpolate`` and the evaluations ask of a DataModule.

    Attributes:
        data_stats: What the DataModule read and skipped, by part (written into ``evaluation.json``).
    """

    data_stats: dict[str, Any]

    def setup_evaluation(self) -> None:
        """Readies the DataModule for ``evaluate`` and ``interpolate``."""

    def report_evaluation_reading(self) -> None:
        """Reports, after the evaluations, what they read themselves."""

    def ranked_split(self) -> Literal["test", "val"] | None:
        """The query split evaluations rank by default; None: no queries (a :class:`RankingCorpus` answers)."""

    def pair_splits(self) -> bool:
        """Whether validation and test are labelled document pairs (:class:`PairSplit`), which document matching
        scores."""


@runtime_checkable
class LabelledDocuments(Protocol):
    """A corpus whose documents carry a class label (clustering and the linear probe score them)."""

    @property
    def labels(self) -> list[str]:
        """Sorted label names of the training split (after ``setup``)."""


@runtime_checkable
class RankingCorpus(Protocol):
    """A retrieval corpus: documents, and queries with their judgements (qrels) per split.

    Attributes:
        corpus: The documents ranked (None until read).
        max_documents: Read at most this many documents (None: all).
        val_split: The name of the validation query split, None when the corpus has none.
        val_queries_from_train: Training queries held out as the validation split (0: none).
    """

    corpus: Sequence[Document] | None
    max_documents: int | None
    val_split: str | None
    val_queries_from_train: int

    def load_documents(self) -> Sequence[Document]:
        """The corpus, read."""

    def query_split(self, name: Literal["train", "val", "test"]) -> QuerySplit | None:
        """The queries and judgements of split ``name``; None when there is no such split."""

    def ranked_split(self) -> Literal["test", "val"]:
        """The query split evaluations rank by default."""


@runtime_checkable
class PairSplit(Protocol):
    """A split of labelled document pairs.

    Attributes:
        documents: The corpus the pairs index.
        pairs: ``(first row, second row, label)`` triples, label 1 for a match, 0 otherwise.
    """

    documents: Sequence[Document]
    pairs: list[tuple[int, int, int]]
