"""Retrieval fine-tuning on the ranking corpora (MSMARCO documents, Robust04, WIKIR): examples and negatives.

Their queries, qrels, runs and folds are read by :mod:`lit_docemb.data.retrieval.trec`.

:class:`RetrievalDataModule` (base of the ranking-corpus DataModules, BEIR folders included) has two modes:
``"documents"`` (the corpus alone, as every other DataModule) and ``"retrieval"``: one :class:`RetrievalExample` per (query, relevant
document) pair with ``num_negatives`` negatives drawn by :class:`NegativeSampler`, uniformly from the corpus or
from the top of a run (the corpus's BM25 / official run, or a run an earlier checkpoint wrote with
:func:`~lit_docemb.data.retrieval.trec.write_run`). A negative is never a judged-relevant document of its query
(relevance > 0). Draws depend only on (seed, split, epoch, example), so they are identical across runs, worker
counts, ranks and resumes; training draws new negatives every epoch (the train loader's batches carry the epoch
Lightning sets on its sampler), validation and test keep epoch 0's. Graph-RoBERTa §3.3 switches from BM25 to
checkpoint negatives after 5 epochs: a second ``fit`` with ``negatives_run`` set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from abc import abstractmethod
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from torch.utils.data import Dataset

from lit_docemb.data.core.contract import RankingCorpus
from lit_docemb.data.core.datamodule import DocumentDataModule, DocumentDataset, stable_fraction
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import require_path
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader, SeededBatch
from lit_docemb.errors import ConfigError
from lit_docemb.data.retrieval.trec import RUN_FORMAT, Qrels, QueryRecord, iter_run

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------------
# Examples and negatives
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class RetrievalExample:
    """One training pair for retrieval fine-tuning.

    Attributes:
        query_id: The query's id (two examples of one query share it: mask them as in-batch negatives).
        query: The query text.
        positive: A document judged relevant to the query.
        negatives: ``num_negatives`` documents, none of them judged relevant to the query.
    """

    query_id: str
    query: str
    positive: Document
    negatives: list[Document]


class RaggedRows(Sequence):
    """Corpus rows per query in two flat arrays: ``rows[offsets[q]:offsets[q + 1]]`` are query q's.

    Two arrays rather than one array per query: hundreds of thousands of queries cost no Python objects,
    which forked dataloader workers would copy page by page as they touch reference counts.

    Args:
        offsets: (Q + 1,) start of each query's rows, then the total.
        rows: (total,) the rows, query after query.
    """

    def __init__(self, offsets: np.ndarray, rows: np.ndarray) -> None:
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.rows = np.asarray(rows, dtype=np.int64)

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[int]]) -> RaggedRows:
        sizes = np.fromiter((len(rows) for rows in lists), dtype=np.int64, count=len(lists))
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        return cls(offsets, np.fromiter((r for rows in lists for r in rows), dtype=np.int64, count=int(offsets[-1])))

    @classmethod
    def from_pairs(cls, query: np.ndarray, rows: np.ndarray, num_queries: int) -> RaggedRows:
        """From (query, row) pairs sorted by query."""
        offsets = np.zeros(num_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(query, minlength=num_queries), out=offsets[1:])
        return cls(offsets, rows)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, query: int) -> np.ndarray:
        if not 0 <= query < len(self):
            raise IndexError(f"query {query} of {len(self)}")
        return self.rows[self.offsets[query] : self.offsets[query + 1]]

    def queries(self) -> np.ndarray:
        """(total,) the query of each row."""
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))

    def without(self, other: RaggedRows, corpus_size: int) -> RaggedRows:
        """Each query's rows that are not among ``other``'s rows of the same query."""
        mine, theirs = self.queries(), other.queries()
        keep = ~np.isin(mine * corpus_size + self.rows, theirs * corpus_size + other.rows)
        return RaggedRows.from_pairs(mine[keep], self.rows[keep], len(self))


class NegativeSampler:
    """Draws negatives for queries, by corpus row, never a judged-relevant one.

    With ``pools`` (candidate rows per query, best first, relevant ones already removed), negatives are drawn
    uniformly without replacement from the query's pool; a pool shorter than ``num_negatives`` is topped up
    uniformly from the corpus. Without pools, all negatives are uniform over the corpus. The draw is a pure
    function of (seed, query, key), whatever process asks.

    Args:
        corpus_size: Number of corpus rows.
        relevant: Per query, the corpus rows judged relevant (excluded from every draw): a
            :class:`RaggedRows` or a list of arrays.
        num_negatives: Negatives per draw.
        seed: Seed of every draw.
        pools: Per query, candidate rows (e.g. the top of a BM25 run), or None for uniform sampling.
    """

    def __init__(self, corpus_size: int, relevant: Sequence[np.ndarray], num_negatives: int, seed: int = 0,
                 pools: Sequence[np.ndarray] | None = None) -> None:
        most_relevant = max((len(relevant[q]) for q in range(len(relevant))), default=0)
        if num_negatives < 0 or corpus_size - most_relevant < num_negatives:
            raise ValueError(f"cannot draw {num_negatives} negatives from a corpus of {corpus_size} documents "
                             f"where a query has {most_relevant} relevant ones")
        self.corpus_size = corpus_size
        self.relevant = relevant
        self.num_negatives = num_negatives
        self.seed = seed % 2**64  # SeedSequence takes non-negative integers
        self.pools = pools

    def sample(self, query: int, *key: int) -> list[int]:
        """``num_negatives`` distinct corpus rows for query index ``query``; ``key`` (e.g. epoch, example)
        selects the draw."""
        rng = np.random.default_rng([self.seed, query, *key])
        chosen: list[int] = []
        if self.pools is not None and len(self.pools[query]):
            pool = self.pools[query]
            chosen = [int(r) for r in rng.choice(pool, size=min(self.num_negatives, len(pool)), replace=False)]
        excluded = set(chosen).union(self.relevant[query].tolist())
        while len(chosen) < self.num_negatives:
            row = int(rng.integers(self.corpus_size))
            if row not in excluded:
                chosen.append(row)
                excluded.add(row)
        return chosen


class RetrievalDataset(Dataset):
    """RetrievalExamples of one query split: example i = (its query, its positive, freshly drawn negatives).

    Args:
        documents: The corpus (indexable by row).
        query_ids: Query ids, by query index.
        query_texts: Query texts, by query index.
        example_query: (E,) query index of each example.
        example_positive: (E,) corpus row of each example's positive.
        sampler: Draws the negatives.
    """

    def __init__(self, documents: Sequence[Document], query_ids: list[str], query_texts: list[str],
                 example_query: np.ndarray, example_positive: np.ndarray, sampler: NegativeSampler) -> None:
        self.documents = documents
        self.query_ids = query_ids
        self.query_texts = query_texts
        self.example_query = example_query
        self.example_positive = example_positive
        self.sampler = sampler

    def __len__(self) -> int:
        return len(self.example_query)

    def __getitem__(self, key: int | tuple[int, int]) -> RetrievalExample:
        """Example ``key``, or ``(epoch, example)``: the epoch selects the negatives (epoch 0 for a plain index)."""
        epoch, i = key if isinstance(key, tuple) else (0, key)
        query = int(self.example_query[i])
        negatives = self.sampler.sample(query, int(epoch), int(i))
        return RetrievalExample(self.query_ids[query], self.query_texts[query],
                                self.documents[int(self.example_positive[i])],
                                [self.documents[row] for row in negatives])


class EpochBatchSampler(DistributedBatchSampler):
    """:class:`~lit_docemb.data.core.sampling.DistributedBatchSampler` whose batches hold ``(epoch, index)`` pairs, so
    that a :class:`RetrievalDataset` draws each epoch's negatives in whichever (persistent) worker runs it;
    Lightning sets the epoch on the sampler, which lives in the main process."""

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        epoch = self.epoch
        for batch in super().__iter__():
            yield SeededBatch([(epoch, i) for i in batch], batch.seed)


def read_run_pools(path, row_of: Mapping[str, int], query_index: Mapping[str, int], depth: int, stats: Counter,
                   strict: bool = False) -> RaggedRows:
    """Per query index, the corpus rows of its top ``depth`` run entries (score descending, ties in file order).

    Streams the run keeping 16 bytes per entry of the wanted queries (the 37M-line MSMARCO top-100 file peaks
    near 2 GB and takes a couple of minutes; the DataModule caches the result). Entries of other queries are
    ignored; documents missing from the corpus and repeated entries are counted.
    """
    queries, rows, scores = array("i"), array("i"), array("d")  # int32: corpora and query sets are < 2**31
    for qid, docid, score in iter_run(path, stats, strict):
        q = query_index.get(qid)
        if q is None:
            continue
        row = row_of.get(docid)
        if row is None:
            stats["run_document_missing_from_corpus"] += 1
            continue
        queries.append(q)
        rows.append(row)
        scores.append(score)
    query, row = np.frombuffer(queries, dtype=np.int32), np.frombuffer(rows, dtype=np.int32)
    order = np.lexsort((-np.frombuffer(scores, dtype=np.float64), query))  # stable: ties keep file order
    query, row = query[order], row[order]
    first = np.zeros(len(query), dtype=bool)
    first[np.unique(query.astype(np.int64) * (len(row_of) + 1) + row, return_index=True)[1]] = True
    stats["duplicate_run_entry"] += int(len(query) - first.sum())
    query, row = query[first], row[first]
    rank = np.arange(len(query)) - np.searchsorted(query, query)
    keep = rank < depth
    return RaggedRows.from_pairs(query[keep], row[keep], len(query_index))


def _digest(value) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# DataModule
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class QuerySplit:
    """The queries of one split, their judgements and the run negatives come from (None: the corpus has none)."""

    queries: dict[str, QueryRecord]
    qrels: Qrels
    run: str | None = None


class RetrievalDataModule(DocumentDataModule, RankingCorpus):
    """Base of the ranking-corpus DataModules: the corpus, plus query splits for retrieval fine-tuning.

    A subclass implements ``load_documents()`` and ``load_split(name) -> QuerySplit`` and sets the split names
    ``train_split``, ``val_split`` and ``test_split`` (None: no such split; ``"retrieval"`` mode needs training
    queries). In ``"retrieval"`` mode
    the train / validation / test dataloaders yield :class:`RetrievalExample` records (the method's collator
    turns them into a batch) and ``predict`` yields every corpus document (to embed it for ranking). Queries
    with no relevant document in the corpus are skipped and counted (``<split>/query_without_relevant_document``);
    with ``negatives="run"``, a query with no usable run entry gets uniform negatives
    (``<split>/query_without_run_negatives``), one with too few is topped up uniformly. The run's candidates are
    cached next to an Arrow corpus (reading the 37M-line MSMARCO top-100 file takes minutes, the cache seconds).

    Args:
        mode: ``"documents"``: the corpus as documents, split by id hash as in every DataModule (pre-training,
            embedding); ``"retrieval"``: RetrievalExamples of the query splits.
        num_negatives: Negatives per example (Graph-RoBERTa: 8 uniform for Robust04, 1 from BM25 for MSMARCO
            and WIKIR), besides the in-batch ones.
        negatives: ``"uniform"`` over the corpus, or ``"run"``: from the top ``negatives_depth`` of a run.
        negatives_run: Run file for ``"run"`` negatives of every split, e.g. one written by an earlier checkpoint
            with :func:`~lit_docemb.data.retrieval.trec.write_run`; None uses each split's own run (BM25 / official top 100).
        negatives_depth: Candidates per query taken from the run.
        min_positive_relevance: Lowest relevance that makes an example's positive (negatives always exclude
            every relevance > 0).
        val_queries_from_train: Hold out this many training queries (by a seeded hash of their ids) as the
            validation split instead of ``val_split`` (Graph-RoBERTa §3.3 holds out 100 MSMARCO training queries).
        max_val_queries: Use at most this many validation queries (file order).
        strict: Raise on the first malformed line or record instead of skipping and counting it.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(self, mode: Literal["documents", "retrieval"] = "documents", num_negatives: int = 1,
                 negatives: Literal["uniform", "run"] = "run", negatives_run: str | None = None,
                 negatives_depth: int = 100, min_positive_relevance: int = 1, val_queries_from_train: int = 0,
                 max_val_queries: int | None = None, strict: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        if mode not in ("documents", "retrieval") or negatives not in ("uniform", "run"):
            raise ValueError(f"unknown mode {mode!r} or negatives {negatives!r}")
        if min_positive_relevance < 1:
            raise ValueError(f"min_positive_relevance must be >= 1, got {min_positive_relevance}")
        if mode == "retrieval" and self.predict_split != "all":
            raise ValueError("in retrieval mode predict embeds the whole corpus: predict_split must be 'all'")
        self.mode, self.strict = mode, strict
        self.train_split: str | None = "train"  # None: no training queries (a collection with test qrels only)
        self.val_split: str | None = None
        self.test_split: str | None = None
        self.num_negatives, self.negatives, self.negatives_run = num_negatives, negatives, negatives_run
        self.negatives_depth, self.min_positive_relevance = negatives_depth, min_positive_relevance
        self.val_queries_from_train, self.max_val_queries = val_queries_from_train, max_val_queries
        self.corpus: Sequence[Document] | None = None
        self.cache_dir: str | None = None  # subclasses: where Arrow corpora and run pools are cached
        self.test_set: Dataset | None = None

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        return {"negatives_run": (self.negatives_run, f"a run file in {RUN_FORMAT}")}

    @abstractmethod
    def load_split(self, name: str) -> QuerySplit:
        """Queries, qrels and default run of the split called ``name``."""

    def setup(self, stage: str | None = None) -> None:
        if self.mode == "documents":
            return super().setup(stage)
        if self.train_set is not None:
            return
        documents = self.load_documents()
        if self.max_documents is not None:
            documents = documents[: self.max_documents]
        self.corpus = documents
        row_of = self._rows_by_id(documents)
        splits = self._query_splits()
        self.all_set = DocumentDataset(documents)
        self.train_set = self._retrieval_set("train", splits["train"], documents, row_of)
        self.val_set = self._retrieval_set("val", splits.get("val"), documents, row_of)
        self.test_set = self._retrieval_set("test", splits.get("test"), documents, row_of)
        self.report_reading("examples", len(documents), {"train examples": len(self.train_set),
                            "validation examples": len(self.val_set), "test examples": len(self.test_set)}, self.stats)

    def count(self, prefix: str, stats: Counter) -> None:
        """Adds ``stats`` to ``self.stats`` under ``"<prefix>/<key>"``."""
        self.stats.update({f"{prefix}/{key}": n for key, n in stats.items() if n})

    def query_split(self, name: Literal["train", "val", "test"]) -> QuerySplit | None:
        """The queries and judgements of split ``name`` as training and evaluation use them (the validation
        queries held out of training when ``val_queries_from_train`` is set); None when there is no such split."""
        return self._query_splits()[name]

    def setup_evaluation(self) -> None:
        """Nothing, in either mode: the evaluations read the corpus and the query splits themselves (no examples,
        no negatives); :meth:`report_evaluation_reading` reports the corpus once they have read it."""

    def report_evaluation_reading(self) -> None:
        """Reports the corpus as ``corpus`` when the evaluations read it and no reading was reported before (a
        ``setup``'s)."""
        if not self.data_stats and self.corpus is not None:
            self.report_reading("corpus", len(self.corpus), {}, self.stats)

    def ranked_split(self) -> Literal["test", "val"]:
        """``"test"`` when the corpus has test queries, else ``"val"`` (MSMARCO without the TREC DL topics), whether
        or not it has those: :meth:`query_split` says."""
        return "test" if self.test_split else "val"

    def _query_splits(self) -> dict[str, QuerySplit | None]:
        train = self.load_split(self.train_split) if self.train_split else None
        if self.val_queries_from_train:
            if train is None:
                raise ConfigError(f"data.init_args.val_queries_from_train={self.val_queries_from_train} holds out "
                                  "training queries, but train_split is null: name the training split, or set "
                                  "val_queries_from_train to 0")
            if self.val_queries_from_train >= len(train.queries):
                raise ConfigError(f"data.init_args.val_queries_from_train={self.val_queries_from_train} holds out every "
                                  f"one of the {len(train.queries)} training queries ({self.train_split} split), "
                                  f"leaving none to train on: set it below {len(train.queries)} (or to 0 to validate on "
                                  f"the corpus's own validation split)")
            order = sorted(train.queries, key=lambda q: stable_fraction(q, self.seed))
            held_out = set(order[: self.val_queries_from_train])
            val = _restricted(train, lambda q: q in held_out)
            train = _restricted(train, lambda q: q not in held_out)
        else:
            val = self.load_split(self.val_split) if self.val_split else None
        if val is not None and self.max_val_queries is not None:
            kept = set(list(val.queries)[: self.max_val_queries])
            val = _restricted(val, lambda q: q in kept)
        return {"train": train, "val": val, "test": self.load_split(self.test_split) if self.test_split else None}

    def _rows_by_id(self, documents: Sequence[Document]) -> dict[str, int]:
        row_of: dict[str, int] = {}
        for row, doc_id in enumerate(corpus_ids(documents)):
            if doc_id in row_of:
                self.stats["duplicate_document_id"] += 1
                continue
            row_of[doc_id] = row
        return row_of

    def _retrieval_set(self, name: str, split: QuerySplit | None, documents: Sequence[Document],
                       row_of: dict[str, int]) -> Dataset:
        """Examples of the queries with at least one positive in the corpus, with their negative sampler."""
        if split is None:
            return DocumentDataset([])
        stats: Counter = Counter()
        query_ids, relevant_lists, example_query, example_positive = [], [], [], []
        for qid in split.queries:
            judged = split.qrels.get(qid, {})
            relevant_rows = sorted(row_of[d] for d, rel in judged.items() if rel > 0 and d in row_of)
            stats["relevant_document_missing_from_corpus"] += sum(rel > 0 and d not in row_of
                                                                  for d, rel in judged.items())
            positives = sorted(row_of[d] for d, rel in judged.items() if rel >= self.min_positive_relevance
                               and d in row_of)
            if not positives:
                stats["query_without_relevant_document"] += 1
                continue
            example_query += [len(query_ids)] * len(positives)
            example_positive += positives
            query_ids.append(qid)
            relevant_lists.append(relevant_rows)
        stats["qrels_query_not_in_queries"] += len(set(split.qrels) - set(split.queries))
        relevant = RaggedRows.from_lists(relevant_lists)
        pools = self._pools(name, split, query_ids, relevant, row_of, stats) if self.negatives == "run" else None
        self.count(name, stats)
        sampler = NegativeSampler(len(documents), relevant, self.num_negatives, self.seed + _hash_split(name), pools)
        return RetrievalDataset(documents, query_ids, [split.queries[q].text for q in query_ids],
                                np.asarray(example_query, dtype=np.int64),
                                np.asarray(example_positive, dtype=np.int64), sampler)

    def _pools(self, name: str, split: QuerySplit, query_ids: list[str], relevant: RaggedRows,
               row_of: dict[str, int], stats: Counter) -> RaggedRows:
        """Each query's top run entries minus its relevant documents (cached next to an Arrow corpus)."""
        path = self.negatives_run or split.run
        if path is None:
            raise FileNotFoundError(f"{type(self).__name__}: negatives='run' needs a run file for the {name} split "
                                    f"({RUN_FORMAT}); set negatives_run, or use negatives='uniform'")
        cache = self._pool_cache(require_path(path, "run file", f"a run file in {RUN_FORMAT}"), query_ids)
        if cache is not None and os.path.exists(cache):
            with np.load(cache) as saved:
                pools = RaggedRows(saved["offsets"], saved["rows"])
                stats.update(json.loads(str(saved["stats"])))
        else:
            run_stats: Counter = Counter()
            pools = read_run_pools(path, row_of, {q: i for i, q in enumerate(query_ids)}, self.negatives_depth,
                                   run_stats, self.strict)
            stats.update(run_stats)
            if cache is not None:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                np.savez(cache + ".tmp.npz", offsets=pools.offsets, rows=pools.rows, stats=json.dumps(run_stats))
                os.replace(cache + ".tmp.npz", cache)
        pools = pools.without(relevant, len(row_of) + 1)
        sizes = np.diff(pools.offsets)
        stats["query_without_run_negatives"] += int((sizes == 0).sum())
        stats["run_negatives_fewer_than_num_negatives"] += int(((sizes > 0) & (sizes < self.num_negatives)).sum())
        return pools

    def _pool_cache(self, run: Path, query_ids: list[str]) -> str | None:
        """Where the pools of this run, corpus and query list are saved; None for corpora not cached as Arrow."""
        fingerprint = getattr(getattr(self.corpus, "table", None), "_fingerprint", None)
        if fingerprint is None:
            return None
        import datasets

        stat = run.stat()
        key = _digest([str(run.resolve()), stat.st_size, stat.st_mtime_ns, self.negatives_depth, fingerprint,
                       len(self.corpus), _digest(query_ids)])
        return os.path.join(self.cache_dir or datasets.config.HF_DATASETS_CACHE, "lit_docemb_run_pools", key + ".npz")

    def _loader(self, dataset: Dataset, stage: str, shuffle: bool) -> ResumableLoader:
        """The base class's loader; for training examples its batches carry the epoch (fresh negatives)."""
        if not (isinstance(dataset, RetrievalDataset) and stage == "fit"):
            return super()._loader(dataset, stage, shuffle)
        sampler = EpochBatchSampler(len(dataset), self.batch_size, shuffle=shuffle, seed=self.seed,
                                    drop_last=self.drop_last)
        return ResumableLoader(dataset, sampler, collate_fn=self._collator(stage), num_workers=self.num_workers,
                               persistent_workers=True)

    def test_dataloader(self) -> ResumableLoader:
        if self.mode == "retrieval":
            return self._loader(self.test_set, "validate", shuffle=False)
        return super().test_dataloader()


def corpus_ids(documents: Sequence[Document]) -> list[str]:
    """Document ids by row; a lazily indexed corpus's ``ids`` column is read without converting its rows."""
    ids = getattr(documents, "ids", None)
    return list(ids) if ids is not None else [doc.id for doc in documents]


def _restricted(split: QuerySplit, keep: Callable[[str], bool]) -> QuerySplit:
    return QuerySplit({q: v for q, v in split.queries.items() if keep(q)},
                      {q: v for q, v in split.qrels.items() if keep(q)}, split.run)


def _hash_split(name: str) -> int:
    """A stable small integer per split name, so that splits draw independent negatives under one seed."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big")
