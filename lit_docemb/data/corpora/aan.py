"""ACL Anthology Network: Long Range Arena retrieval pairs (document matching) and the network corpus."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from torch.utils.data import Dataset

from lit_docemb.data.corpora.aan_formats import iter_aan_network, iter_lra_documents
from lit_docemb.data.core.arrow import ArrowDocuments, row_to_document
from lit_docemb.data.core.contract import PairSplit
from lit_docemb.data.core.datamodule import DocumentDataModule, DocumentDataset, stable_fraction
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.reading import ReadContext, cached_documents, require_path
from lit_docemb.errors import ConfigError

log = logging.getLogger(__name__)

LRA_SPLITS = ("train", "eval", "test")
LAYOUT = """\
  LRA retrieval: <source>/new_aan_pairs.{train,eval,test}.tsv (lra_release.gz, folder tsv_data/), or one such file
  network corpus: <source>/papers_text/<paper id>.txt and <source>/<citations_file> ('<id> ==> <id>' lines),
                  optionally <source>/<metadata_file> (acl-metadata.txt)"""


@dataclass
class DocumentPair:
    """Two documents and whether they match: the item of AAN's pair mode (a batch is a list of them).

    Attributes:
        first: The first document.
        second: The second document.
        label: 1 when they match (AAN: a citation links the two papers), 0 otherwise.
    """

    first: Document
    second: Document
    label: int


class PairDataset(Dataset, PairSplit):
    """Document pairs over an indexable corpus: ``(first index, second index, label)`` triples."""

    def __init__(self, documents: Sequence[Document], pairs: Sequence[tuple[int, int, int]]) -> None:
        self.documents, self.pairs = documents, list(pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> DocumentPair:
        first, second, label = self.pairs[i]
        return DocumentPair(self.documents[first], self.documents[second], label)


class AANDataModule(DocumentDataModule):
    """AAN papers as documents, or the LRA retrieval task's document pairs.

    Where users get the data: the LRA TSVs are in ``lra_release.gz`` of
    github.com/google-research/long-range-arena (folder ``lra_release/tsv_data``); the network corpus is the AAN
    release (clair.eecs.umich.edu/aan, ``aan.tar.gz``: ``papers_text/``, ``release/<year>/acl.txt``,
    ``release/<year>/acl-metadata.txt``). ``source``::

      LRA retrieval: <source>/new_aan_pairs.{train,eval,test}.tsv (lra_release.gz, folder tsv_data/), or one such file
      network corpus: <source>/papers_text/<paper id>.txt and <source>/<citations_file> ('<id> ==> <id>' lines),
                      optionally <source>/<metadata_file> (acl-metadata.txt)

    Formats, the citation-based similarity rule and the ids are described in :mod:`lit_docemb.data.corpora.aan_formats`.

    * ``mode="documents"``: each paper once (LRA: the papers of ``document_splits``, deduplicated by id; network:
      every text file, with ``metadata["citations" | "cited_by" | "similar"]``); validation held out by id hash.
      CoLDE's own AAN set (§4.1.1: citation groups, an 80/10/10 split and matching pairs) is this corpus under
      :class:`~lit_docemb.data.corpora.similarity_groups.SimilarityGroupDataModule` with ``test_fraction``.
    * ``mode="pairs"`` (LRA only): items are :class:`DocumentPair`; train / validation / test are the
      ``train`` / ``eval`` / ``test`` files (without an ``eval`` file, validation pairs are held out of
      ``train`` by hash); ``max_documents`` caps the pairs per split; ``predict`` embeds every paper.
      Pairs whose paper was dropped (empty text) are counted as ``"pair_without_document"``. Here
      ``batch_size`` counts *pairs*: a batch holds up to twice as many documents (CoLDE groups them by their
      matching links within the batch); CoLDE's "batch of N documents" is the network corpus's batch.

    Args:
        source: See above.
        layout: ``"auto"`` (by what ``source`` holds), ``"lra"`` or ``"network"``.
        mode: ``"documents"`` or ``"pairs"``.
        document_splits: LRA splits whose papers documents mode yields (``None``: ``["train"]``).
        lra_file_pattern: Name of the LRA file of a split.
        papers_dir: Network corpus: folder of ``<paper id>.txt`` (relative to ``source`` or absolute).
        citations_file: Network corpus: the citation list (e.g. ``release/2014/acl.txt``).
        metadata_file: Network corpus: ``acl-metadata.txt`` for titles, authors, venue and year (``None``: none).
        remove_abstract_references: Network corpus: drop each paper's abstract and references (CoLDE §4.1.1;
            found by their headings, see :func:`~lit_docemb.data.corpora.aan_formats.remove_abstract_and_references`).
        min_shared_references: Similarity rule: references two coupled papers share at least.
        min_reference_jaccard: Similarity rule: Jaccard similarity of their reference sets at least.
        strict: Raise on a malformed line instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (Arrow files); ``None`` uses its default.
        fit_on: Pairs mode: what ``fit`` trains and validates on: ``"pairs"`` (the training / validation pairs,
            for a method that reads them: CoLDE) or ``"papers"`` (each paper of the training / validation pairs
            once, for a method that trains on documents: DocSplit, Graph-RoBERTa). Evaluation and ``test`` read
            the pairs either way.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(
        self,
        source: str,
        layout: Literal["auto", "lra", "network"] = "auto",
        mode: Literal["documents", "pairs"] = "documents",
        document_splits: list[str] | None = None,
        lra_file_pattern: str = "new_aan_pairs.{split}.tsv",
        papers_dir: str = "papers_text",
        citations_file: str = "acl.txt",
        metadata_file: str | None = None,
        remove_abstract_references: bool = False,
        min_shared_references: int = 2,
        min_reference_jaccard: float = 0.5,
        strict: bool = False,
        cache_dir: str | None = None,
        fit_on: Literal["pairs", "papers"] = "pairs",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if fit_on not in ("pairs", "papers") or (fit_on == "papers" and mode != "pairs"):
            raise ConfigError(f"data.init_args.fit_on {fit_on!r}: 'pairs' or 'papers', and 'papers' only with mode: "
                              f"pairs (mode is {mode!r}, whose items are papers already): remove fit_on")
        self.fit_on = fit_on
        self.source, self.layout, self.mode = Path(source).expanduser(), layout, mode
        self.document_splits = list(document_splits or ["train"])
        self.lra_file_pattern, self.papers_dir = lra_file_pattern, papers_dir
        self.citations_file, self.metadata_file = citations_file, metadata_file
        self.remove_abstract_references = remove_abstract_references
        self.similarity = {"min_shared_references": min_shared_references,
                           "min_reference_jaccard": min_reference_jaccard}
        self.strict, self.cache_dir = strict, cache_dir
        self.test_set: Dataset | None = None

    def config_paths(self) -> dict[str, tuple[str, str]]:
        return {"source": (str(self.source), "the AAN folder (LRA TSVs or the network release)")}

    def _resolved_layout(self) -> str:
        require_path(self.source, "AAN source", LAYOUT)
        if self.layout != "auto":
            return self.layout
        if self.source.is_file() or any(self.source.glob(self.lra_file_pattern.format(split="*"))):
            return "lra"
        if (self.source / self.papers_dir).is_dir():
            return "network"
        raise FileNotFoundError(f"neither LRA TSVs nor {self.papers_dir}/ in {str(self.source)!r}. Expected:\n{LAYOUT}")

    def _read(self, reader, kwargs: dict, inputs: list) -> tuple[ArrowDocuments, ReadContext]:
        context = ReadContext(strict=self.strict)
        documents = cached_documents(reader, kwargs, inputs=inputs, context=context, cache_dir=self.cache_dir)
        self.stats.update(context.stats)
        return documents, context

    def _read_lra(self) -> tuple[ArrowDocuments, dict[str, list[list]]]:
        if self.source.is_file():
            paths = {"train": str(self.source)}
        else:
            candidates = {split: self.source / self.lra_file_pattern.format(split=split) for split in LRA_SPLITS}
            paths = {split: str(path) for split, path in candidates.items() if path.exists()}
            require_path(candidates["train"], "LRA training pairs", LAYOUT)
        documents, context = self._read(iter_lra_documents, {"paths": paths}, list(paths.values()))
        return documents, context.extra["pairs"]

    def _network_inputs(self) -> dict[str, str | None]:
        def existing(name: str, what: str) -> str:
            return str(require_path(self.source / name, what, LAYOUT))

        return {"papers_dir": existing(self.papers_dir, "AAN papers folder"),
                "citations_file": existing(self.citations_file, "AAN citation list"),
                "metadata_file": None if self.metadata_file is None else existing(self.metadata_file, "AAN metadata")}

    def load_documents(self) -> ArrowDocuments:
        if self._resolved_layout() == "network":
            inputs = self._network_inputs()
            paths = [path for path in inputs.values() if path is not None]
            options = {**inputs, **self.similarity, "remove_abstract_references": self.remove_abstract_references}
            return self._read(iter_aan_network, options, paths)[0]
        documents, pairs = self._read_lra()
        unknown = set(self.document_splits) - set(pairs)
        if unknown:
            raise ValueError(f"document_splits {sorted(unknown)} not among the LRA files read ({sorted(pairs)})")
        wanted = {paper for split in self.document_splits for pair in pairs[split] for paper in pair[:2]}
        indices = [i for i, paper in enumerate(documents.ids) if paper in wanted]
        return ArrowDocuments(documents.table.select(indices), row_to_document)

    def setup(self, stage: str | None = None) -> None:
        if self.mode == "documents" or self.train_set is not None:
            return super().setup(stage)
        if self._resolved_layout() != "lra":
            raise ValueError("mode='pairs' needs the LRA retrieval TSVs; the network corpus gives documents with "
                             "metadata['similar'] instead")
        documents, pairs = self._read_lra()
        position = {paper: i for i, paper in enumerate(documents.ids)}
        if "eval" not in pairs:
            held_out = [stable_fraction(f"{a}|{b}", self.seed) < self.val_fraction for a, b, _ in pairs["train"]]
            pairs["eval"] = [pair for pair, out in zip(pairs["train"], held_out, strict=True) if out]
            pairs["train"] = [pair for pair, out in zip(pairs["train"], held_out, strict=True) if not out]
        triples = {}
        for split, rows in pairs.items():
            kept = [(position[a], position[b], label) for a, b, label in rows if a in position and b in position]
            self.stats["pair_without_document"] += len(rows) - len(kept)
            triples[split] = kept
        cap = slice(self.max_documents)
        self.train_set = PairDataset(documents, triples["train"][cap])
        self.val_set = PairDataset(documents, triples["eval"][cap])
        self.test_set = PairDataset(documents, triples["test"][cap]) if "test" in triples else None
        self.all_set = DocumentDataset(documents)
        pair_counts = {"train pairs": len(self.train_set), "validation pairs": len(self.val_set)}
        if self.test_set is not None:
            pair_counts["test pairs"] = len(self.test_set)
        self.report_reading("pairs", len(documents), pair_counts, self.stats)

    def _papers(self, pairs: PairDataset) -> DocumentDataset:
        """Each paper of ``pairs`` once, in corpus order."""
        return DocumentDataset(pairs.documents, sorted({i for a, b, _ in pairs.pairs for i in (a, b)}))

    def train_dataloader(self):
        """The training pairs, or with ``fit_on: papers`` their papers."""
        if self.fit_on == "papers":
            return self._loader(self._papers(self.train_set), "fit", shuffle=True)
        return super().train_dataloader()

    def val_dataloader(self):
        """The validation pairs, or with ``fit_on: papers`` their papers."""
        if self.fit_on == "papers":
            return self._loader(self._papers(self.val_set), "validate", shuffle=False)
        return super().val_dataloader()

    def pair_splits(self) -> bool:
        """Pairs mode: validation and test are the LRA pairs."""
        return self.mode == "pairs"

    def test_dataloader(self):
        """Pairs mode: the LRA test pairs; documents mode: the held-out validation documents."""
        return self._loader(self.test_set if self.test_set is not None else self.val_set, "validate", shuffle=False)
