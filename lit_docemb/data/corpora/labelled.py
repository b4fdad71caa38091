"""Any labelled text-classification set: Hugging Face datasets, CSV/TSV/JSON-lines files or one folder per class."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np

from lit_docemb.data.core.arrow import ArrowDocuments
from lit_docemb.data.core.contract import LabelledDocuments
from lit_docemb.data.core.datamodule import ConcatDocuments, DocumentDataModule, DocumentDataset
from lit_docemb.data.core.few_shot import ids_at, keep_few_shot, labels_at
from lit_docemb.data.core.held_out import TEST, TRAIN, VALIDATION, draw_parts, texts_at
from lit_docemb.data.corpora.labelled_formats import (
    hyperpartisan_ground_truth_path,
    hyperpartisan_splits_overlap,
    iter_class_folders,
    iter_hf_labelled,
    iter_labelled_table,
    iter_rt_polarity,
    iter_semeval_hyperpartisan,
    iter_text_gcn,
    read_hyperpartisan_splits,
    table_format_of,
    text_gcn_corpus,
)
from lit_docemb.data.corpora.nyt_annotated import LABEL_FIELDS, iter_nyt_annotated
from lit_docemb.data.core.reading import (MissingPathError, ReadContext, cached_documents, load_hf_splits,
                                          looks_like_local_path, require_path)
from lit_docemb.errors import ConfigError, require

log = logging.getLogger(__name__)

LAYOUT = """\
  a Hugging Face dataset name (e.g. SetFit/20_newsgroups, stanfordnlp/imdb, ccdv/arxiv-classification), a
  save_to_disk folder, or a folder of parquet files; or
  <file>.csv | .tsv | .jsonl (optionally .gz/.bz2/.xz): one document per record; or
  <folder>/{train,test}.csv|.tsv|.jsonl, or <folder>/{train,test}/<label>/<document file>; or
  <folder>/<label>/<document file> (no test split); or
  source_format text_gcn: Yao et al.'s <data>/<name>.txt (<document name><TAB><train|test><TAB><label> a line) with
  <data>/corpus/<name>.clean.txt (or <name>.txt, text_gcn_corpus: raw), line for line; or
  source_format rt_polarity: a folder holding rt-polarity.pos and rt-polarity.neg (no test split); or
  source_format semeval_hyperpartisan: SemEval-2019 task 4's articles-<part>.xml, its ground-truth-<part>.xml beside
  it, and optionally Longformer's hp-splits.json (splits_file); or
  source_format nyt_annotated: LDC2008T19's nyt_corpus folder, data/<year>/<month>.tgz archives of
  <month>/<day>/<id>.xml NITF articles (no test split)"""


class LabelledTextDataModule(DocumentDataModule, LabelledDocuments):
    """Documents with string labels for classification probes and supervised training.

    Where users get the sets: the Hugging Face hub (20 Newsgroups ``SetFit/20_newsgroups``, IMDB
    ``stanfordnlp/imdb``, BBC News ``SetFit/bbc-news``, arXiv-11 ``ccdv/arxiv-classification``, R8/R52/Ohsumed/MR
    in several community conversions) or the original archives, which are folder-per-class
    (``20news-bydate-train/<newsgroup>/<n>``, ``aclImdb/train/{neg,pos}/*.txt``, ``bbc/<topic>/*.txt``).
    ``source`` is one of:

    * a Hugging Face dataset name, a ``save_to_disk`` folder, or a folder of parquet/arrow files;
    * a ``.csv`` / ``.tsv`` / ``.jsonl`` file (optionally ``.gz``/``.bz2``/``.xz``), one document per record;
    * a folder holding ``train.<ext>`` and ``test.<ext>`` tables, or ``train/`` and ``test/`` class-folder trees
      (the names are ``train_split`` / ``test_split``);
    * a folder ``<label>/<document file>`` (no test split);
    * with ``source_format: text_gcn``, the list file ``<data>/<name>.txt`` of Yao et al.'s text_gcn repository
      (R8, R52, mr, ohsumed, 20ng: ``<document name>\t<train|test>\t<label>`` a line), its text read line for line
      from ``<data>/corpus/<name>.clean.txt`` (``text_gcn_corpus``); the splits are the list's (a split field
      containing ``train_split`` / ``test_split``, as text_gcn reads it);
    * with ``source_format: rt_polarity``, the folder of ``rt-polarity.pos`` / ``rt-polarity.neg`` (Pang and Lee's
      sentence polarity release, Latin-1: ``encoding: latin-1``; no test split);
    * with ``source_format: semeval_hyperpartisan``, the articles file of the SemEval-2019 task 4 release
      (Hyperpartisan News Detection, Zenodo record 1489920: ``articles-training-byarticle-20181122.xml``), read with
      the ground-truth file beside it (:func:`~lit_docemb.data.corpora.labelled_formats.iter_semeval_hyperpartisan`). With
      ``splits_file`` (Longformer's ``hp-splits.json``: ``train`` / ``dev`` / ``test``, 516 / 64 / 65 articles),
      ``train_split``, ``val_split`` and ``test_split`` name its splits; without, the file is the training split
      and ``test_source`` may name the release's test articles (``articles-test-byarticle-20181207.xml``);
    * with ``source_format: nyt_annotated``, the New York Times Annotated Corpus as LDC ships it (LDC2008T19's
      ``nyt_corpus`` folder: ``data/<year>/<month>.tgz`` archives of NITF articles), each article labelled by the
      topic its ``label_column`` field gives (``topics``;
      :func:`~lit_docemb.data.corpora.nyt_annotated.iter_nyt_annotated`); no test split (``test_fraction``).

    A test split is read when the source has one (``test_split``; a hub split, a ``test`` file or folder beside
    ``train``, or ``test_source``); it is served by ``test_dataloader``, and validation documents are held out
    of the training split by id hash. Ids: ``id_column`` if given, else ``"<split>:<row>"`` (hub),
    ``"<file name>:<line>"`` (tables) or ``"<split>/<label>/<file>"`` (folders). Bad records are skipped and
    counted (see :mod:`lit_docemb.data.core.reading`).

    Args:
        source: One of the sources listed above.
        source_format: ``"auto"`` (by what ``source`` is), ``"hf"``, ``"csv"``, ``"tsv"``, ``"jsonl"``,
            ``"folders"``, ``"text_gcn"``, ``"rt_polarity"``, ``"semeval_hyperpartisan"`` or ``"nyt_annotated"``.
        subset: Configuration name of a hub dataset.
        train_split: Split (hub) or file / folder name (local) of the training documents.
        test_split: Same for the test documents; ``None`` reads no test split.
        val_split: Same for published validation documents (Hyperpartisan's ``dev``, from Longformer's
            ``hp-splits.json``); ``None`` holds validation out of the training split by id hash
            (``val_fraction``), which must then be 0.
        test_source: A local test file or folder elsewhere (overrides ``test_split`` for local sources).
        text_column: Column of the text, or several columns, each becoming a section headed by its name.
        label_column: Column of the label; ``None`` reads unlabelled text. ``source_format: nyt_annotated``: the
            article field the topics are read from, ``"online_sections"``, ``"taxonomic_classifier"`` or
            ``"desk"`` (:data:`~lit_docemb.data.corpora.nyt_annotated.LABEL_FIELDS`).
        id_column: Column of unique document ids; ``None`` derives ids from the position.
        title_column: Column of the title, if any.
        column_names: Column names of a CSV/TSV file without header line.
        delimiter: Field separator of a delimited file (``None``: by extension).
        csv_quoting: Honour ``"``-quoted fields (``None``: for ``.csv``, not for ``.tsv``).
        classes: Read only documents of these classes: the folder layout's class folders (e.g. ``["neg", "pos"]``
            for aclImdb); in any other source, the rows whose label is one of them (the others skipped and counted
            as ``other_class``), so that every model and evaluation of a config sees the same class set (FakeNews:
            the release's 11 documented types, not its stray ones).
        encoding: Encoding of local files (``"latin-1"`` for the original 20 Newsgroups).
        fallback_encoding: Encoding of a local file (one per class folder) or line (tables, text_gcn, rt-polarity)
            that ``encoding`` cannot decode, counted as ``<unit>_decoded_with_fallback_encoding`` and reported in
            the reading line; Latin-1 (the default) decodes any bytes, so no document is dropped or altered for its
            bytes, and it is how the releases that are not UTF-8 were written (BBC News' pound signs, text_gcn's
            raw ``mr.txt``, which text_gcn's own scripts decode as Latin-1). ``None`` replaces such bytes by U+FFFD.
        strict: Raise on a malformed record instead of skipping and counting it.
        cache_dir: Cache of ``datasets`` (converted Arrow tables); ``None`` uses its default.
        text_gcn_corpus: ``source_format: text_gcn``: ``"clean"`` (``corpus/<name>.clean.txt``, text_gcn's cleaned
            text) or ``"raw"`` (``corpus/<name>.txt``).
        fit_on: Documents an unsupervised method trains on: ``"train"`` (the training split, validation held
            out) or ``"all"`` (the training, validation and test documents and the ``unlabelled_class`` ones;
            DECA §4.1 "we first use all documents to learn an embedding for each one", IMDB's 50,000 unlabelled
            reviews included). Training is served the training split's labels only (a classifier's targets,
            CoLDE's groups): the other documents come without theirs. The probes still fit on the training split's
            labels and score the test split's.
        unlabelled_class: A class folder of the training split holding unlabelled documents, read only with
            ``fit_on: all`` (aclImdb's ``unsup``; folder layout only).
        splits_file: ``source_format: semeval_hyperpartisan``: Longformer's ``hp-splits.json`` (split name → 0-based
            positions of the articles in the file), read as Longformer reads it: each split's positions as listed,
            overlaps included (the released file's test split shares 51 of its 65 articles with train and 7 with
            dev, and 58 of the 645 articles are in no split: one warning line says so; ``cross_validation_folds``
            gives a test on unseen articles). ``None``: no split file.
        ground_truth: ``source_format: semeval_hyperpartisan``: the ground-truth file (``None``: the
            ``ground-truth-<part>.xml`` beside ``articles-<part>.xml``).
        test_fraction: For a source without a test split (FakeNews, a class-folder tree): share of the training
            split's documents held out as the test split, disjoint from validation (``test_split`` must then find
            nothing: ``null``); ``0`` holds none out.
        group_duplicates: Keep documents whose normalised text (title and text, whitespace collapsed) is the same on
            one side of every split this DataModule draws (validation, ``test_fraction``, the folds): BBC News has
            98 groups of duplicate articles, which a split by id puts on both sides. The draw stays seeded and
            deterministic, a group keyed by its smallest id (:mod:`~lit_docemb.data.core.held_out`). Needs a source
            without a published test or validation split (those are taken as they are).
        cross_validation_folds: Stratified k-fold cross-validation over every document of the training split (a
            source without a test split: Hyperpartisan's 645 articles without ``splits_file``, BBC's folders): in
            each class the documents, ordered by their seeded id hash (``seed``), are dealt to ``k`` folds so that
            every fold keeps the class proportions; fold ``cross_validation_fold`` is the test split, the other
            folds train (validation, ``val_fraction``, held out of them). Run every fold and report the mean and
            standard deviation of the test scores (``grids/hyperpartisan_cross_validation.yaml`` runs the 5 folds of
            Hyperpartisan with ``python -m lit_docemb grid``). ``None``: no cross-validation.
        cross_validation_fold: The test fold, ``0 <= cross_validation_fold < cross_validation_folds``.
        stratified: Hold validation (``val_fraction``) and test (``test_fraction``) out per label: in each class
            the documents are ordered by their seeded id hash (``seed``), the first ``round(test_fraction * n)``
            become test, the next ``round(val_fraction * n)`` validation, so every split keeps the class
            proportions exactly (the default id-hash split keeps them on average only). Deterministic for a given
            ``seed`` and set of ids, whatever the file order.
        topics: ``source_format: nyt_annotated``: topic → the ``label_column`` values that give it (a value
            gives a topic when equal to one of them or below it, ``Top/News/Business/Markets`` below
            ``Top/News/Business``); ``None``: DocSplit's five NYT classes
            (:data:`~lit_docemb.data.corpora.nyt_annotated.PAPER_TOPICS`).
        sample_size: ``source_format: nyt_annotated``: keep this many labelled articles, a uniform draw by a
            hash of their id seeded with ``seed`` (DocSplit's NYT set has 13,081); ``None`` keeps all.
        few_shot_per_class: Train on this many documents of each class only (DocSplit Table 2, Appendix A.1: 10
            per class for FakeNews and arXiv, 5 for the others), drawn from the training split after every other
            split and filter, so validation and test stay those of the full run; every class (``classes``, else
            every label of the training split) must have that many. ``None`` trains on the whole split.
        few_shot_seed: Which draw: in each class the training documents are ordered by a hash of their id seeded
            with it and the first ``few_shot_per_class`` kept, so a seed gives the same documents whatever the file
            order, and the paper's 10 repeats are seeds 0-9 (``grids/docsplit_table2_few_shot.yaml``).
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule`.
    """

    def __init__(
        self,
        source: str,
        source_format: Literal["auto", "hf", "csv", "tsv", "jsonl", "folders", "text_gcn", "rt_polarity",
                               "semeval_hyperpartisan", "nyt_annotated"] = "auto",
        subset: str | None = None,
        train_split: str = "train",
        test_split: str | None = "test",
        test_source: str | None = None,
        val_split: str | None = None,
        text_column: str | list[str] = "text",
        label_column: str | None = "label",
        id_column: str | None = None,
        title_column: str | None = None,
        column_names: list[str] | None = None,
        delimiter: str | None = None,
        csv_quoting: bool | None = None,
        classes: list[str] | None = None,
        encoding: str = "utf-8",
        fallback_encoding: str | None = "latin-1",
        strict: bool = False,
        cache_dir: str | None = None,
        text_gcn_corpus: Literal["clean", "raw"] = "clean",
        fit_on: Literal["train", "all"] = "train",
        unlabelled_class: str | None = None,
        splits_file: str | None = None,
        ground_truth: str | None = None,
        test_fraction: float = 0.0,
        stratified: bool = False,
        group_duplicates: bool = False,
        cross_validation_folds: int | None = None,
        cross_validation_fold: int = 0,
        topics: dict[str, list[str]] | None = None,
        sample_size: int | None = None,
        few_shot_per_class: int | None = None,
        few_shot_seed: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.source, self.source_format, self.subset = source, source_format, subset
        self.train_split, self.test_split, self.test_source = train_split, test_split, test_source
        self.columns = {"text_column": text_column, "label_column": label_column, "id_column": id_column,
                        "title_column": title_column}
        self.table_options = {"column_names": column_names, "delimiter": delimiter, "quoting": csv_quoting}
        self.classes, self.encoding, self.strict, self.cache_dir = classes, encoding, strict, cache_dir
        self.fallback_encoding = fallback_encoding
        self.test_set: DocumentDataset | None = None
        self.val_split = val_split
        if val_split is not None and self.val_fraction:
            raise ConfigError(f"data.init_args.val_split is {val_split!r} (published validation documents) but "
                              f"data.init_args.val_fraction is {self.val_fraction}: set val_fraction to 0, or "
                              f"val_split to null to hold validation out of the training split")
        require(fit_on in ("train", "all"), "fit_on", "'train' or 'all'", fit_on)
        if unlabelled_class is not None and fit_on != "all":
            raise ConfigError("data.init_args.unlabelled_class: the unlabelled documents are read only to train on "
                              "them: set fit_on: all, or remove unlabelled_class")
        if unlabelled_class is not None and (classes is None or unlabelled_class in classes):
            raise ConfigError(f"data.init_args.classes: name the labelled class folders (aclImdb: [neg, pos]) so that "
                              f"{unlabelled_class!r} is read once, unlabelled, got {classes}")
        require(text_gcn_corpus in ("clean", "raw"), "text_gcn_corpus", "'clean' or 'raw'", text_gcn_corpus)
        self.fit_on, self.unlabelled_class, self.text_gcn_corpus = fit_on, unlabelled_class, text_gcn_corpus
        require(0.0 <= test_fraction and self.val_fraction + test_fraction < 1.0, "test_fraction",
                "in [0, 1 - val_fraction)", test_fraction)
        if stratified and not (self.val_fraction or test_fraction):
            raise ConfigError("data.init_args.stratified holds validation and test documents out per label, but "
                              "val_fraction and test_fraction are both 0: set one of them, or stratified: false")
        self.test_fraction, self.stratified = test_fraction, stratified
        self._check_held_out(group_duplicates, cross_validation_folds, cross_validation_fold, test_source, val_split,
                             splits_file, label_column)
        self.group_duplicates = group_duplicates
        self.cross_validation_folds, self.cross_validation_fold = cross_validation_folds, cross_validation_fold
        if (splits_file is not None or ground_truth is not None) and source_format != "semeval_hyperpartisan":
            raise ConfigError("data.init_args.splits_file and ground_truth belong to source_format: "
                              f"semeval_hyperpartisan (source_format is {source_format!r}): remove them")
        self.splits_file, self.ground_truth = splits_file, ground_truth
        if (topics is not None or sample_size is not None) and source_format != "nyt_annotated":
            raise ConfigError("data.init_args.topics and sample_size belong to source_format: nyt_annotated "
                              f"(source_format is {source_format!r}): remove them")
        if source_format == "nyt_annotated":
            require(label_column in LABEL_FIELDS, "label_column", f"one of {list(LABEL_FIELDS)} (the NITF field "
                    "the topics are read from) with source_format nyt_annotated", label_column)
            require(sample_size is None or sample_size >= 1, "sample_size", ">= 1 or null", sample_size)
            require(topics is None or (bool(topics) and all(isinstance(v, list) and v for v in topics.values())),
                    "topics", "a mapping of topic -> non-empty list of field values", topics)
        self.topics, self.sample_size = topics, sample_size
        require(few_shot_per_class is None or few_shot_per_class >= 1, "few_shot_per_class", ">= 1 or null",
                few_shot_per_class)
        if few_shot_per_class is not None and (fit_on != "train" or label_column is None):
            raise ConfigError("data.init_args.few_shot_per_class draws labelled training documents: it needs "
                              "fit_on: train and a label_column")
        self.few_shot_per_class, self.few_shot_seed = few_shot_per_class, few_shot_seed
        self.unlabelled_set: DocumentDataset | None = None
        self._hyperpartisan_splits: dict[str, list[int]] | None = None

    def _check_held_out(self, group_duplicates: bool, folds: int | None, fold: int, test_source: str | None,
                        val_split: str | None, splits_file: str | None, label_column: str | None) -> None:
        """One-line ConfigErrors for cross-validation and duplicate grouping that cannot do what they say."""
        if folds is None:
            if fold != 0:
                raise ConfigError(f"data.init_args.cross_validation_fold is {fold} but cross_validation_folds is "
                                  "null: set cross_validation_folds (e.g. 5), or remove cross_validation_fold")
        else:
            require(folds >= 2, "cross_validation_folds", ">= 2 or null", folds)
            require(0 <= fold < folds, "cross_validation_fold", f"in [0, {folds}) (cross_validation_folds {folds})",
                    fold)
            taken = {"test_fraction": self.test_fraction or None, "test_source": test_source,
                     "splits_file": splits_file, "val_split": val_split}
            clash = next((key for key, value in taken.items() if value is not None), None)
            if clash is not None:
                raise ConfigError(f"data.init_args.cross_validation_folds: the folds are the test split, but "
                                  f"{clash} ({taken[clash]!r}) sets splits too: remove {clash}, or "
                                  "cross_validation_folds")
            if label_column is None:
                raise ConfigError("data.init_args.cross_validation_folds draws the folds per label, but label_column "
                                  "is null: name the label column, or remove cross_validation_folds")
        if group_duplicates:
            if test_source is not None or val_split is not None or splits_file is not None:
                raise ConfigError("data.init_args.group_duplicates keeps duplicates together in the splits drawn here, "
                                  "but test_source, val_split or splits_file gives published ones: remove them, or "
                                  "group_duplicates")
            if not (self.val_fraction or self.test_fraction or folds):
                raise ConfigError("data.init_args.group_duplicates: nothing is drawn (val_fraction and test_fraction "
                                  "are 0, no cross_validation_folds): set one of them, or group_duplicates: false")

    # ------------------------------------------------------------------------------------------------- sources
    def _local_split(self, split: str) -> Path | None:
        """The file or class-folder tree of a split of a local ``source``, None when there is none."""
        if split == self.test_split and self.test_source is not None:
            return Path(self.test_source).expanduser()
        root = Path(self.source).expanduser()
        if root.is_file():
            return root if split == self.train_split else None
        found = self._split_entry(root, split)
        if found is None and split == self.train_split:
            if self.test_split is not None and self._split_entry(root, self.test_split) is not None:
                raise FileNotFoundError(f"{self.source!r} has a {self.test_split!r} split but no "
                                        f"{self.train_split!r}. Expected:\n{LAYOUT}")
            return root  # <folder>/<label>/<file>
        return found

    @staticmethod
    def _split_entry(root: Path, split: str) -> Path | None:
        candidates = [root / split, *sorted(p for p in root.glob(f"{split}.*") if table_format_of(p))]
        return next((p for p in candidates if p.exists()), None)

    def config_paths(self) -> dict[str, tuple[str | None, str]]:
        local = looks_like_local_path(self.source)
        return {"source": (self.source if local else None, "a labelled-text file or folder, or a hub name"),
                "test_source": (self.test_source, "a local test file or folder"),
                "splits_file": (self.splits_file, "Longformer's hp-splits.json"),
                "ground_truth": (self.ground_truth, "SemEval-2019 task 4's ground-truth-<part>.xml")}

    def _is_hf(self) -> bool:
        if self.source_format != "auto":
            return self.source_format == "hf"
        path = Path(self.source).expanduser()
        if not path.exists():
            if looks_like_local_path(self.source):
                raise FileNotFoundError(f"labelled-text source not found at {self.source!r}. Expected:\n{LAYOUT}")
            return True  # a hub name
        if path.is_file():
            return path.suffix in (".parquet", ".arrow")
        hf_files = [*path.glob("*.parquet"), *path.glob("*.arrow"), *path.glob("data/*.parquet")]
        return bool(hf_files) or (path / "state.json").exists() or (path / "dataset_dict.json").exists()

    def _read_split(self, split: str) -> ArrowDocuments | None:
        context = ReadContext(strict=self.strict, encoding=self.encoding, fallback_encoding=self.fallback_encoding)
        if self.source_format == "semeval_hyperpartisan":
            documents = self._read_semeval(split, context)
        elif self.source_format in ("text_gcn", "rt_polarity", "nyt_annotated"):
            documents = self._read_release(split, context)
        elif self._is_hf():
            splits = load_hf_splits(self.source, self.subset, self.cache_dir)
            if split not in splits:
                if split == self.train_split:
                    raise ValueError(f"{self.source!r} has no split {split!r} (splits: {sorted(splits)})")
                return None
            kwargs = {"source": self.source, "subset": self.subset, "split": split, "cache_dir": self.cache_dir}
            documents = cached_documents(iter_hf_labelled, {**kwargs, **self.columns}, inputs=[], context=context,
                                         cache_dir=self.cache_dir, identity=[splits[split]._fingerprint],
                                         description=f"{self.source}[{split}]")
        else:
            path = self._local_split(split)
            if path is None:
                return None
            path = Path(path)
            if not path.exists():
                raise FileNotFoundError(f"{split} split not found at {str(path)!r}. Expected:\n{LAYOUT}")
            documents = self._read_local(path, split, context)
        self.stats.update(context.stats)
        return self._of_classes(documents) if documents is not None and self.classes is not None else documents

    def _of_classes(self, documents: ArrowDocuments) -> ArrowDocuments:
        """The documents whose label is one of ``classes``; the others are counted as ``other_class``. A source
        with no other label (class folders, which the reader already chose) is returned as it is, without a pass."""
        keep = set(self.classes)
        if set(documents.table.unique("label")) <= keep:
            return documents
        table = documents.table.filter(lambda labels: [label in keep for label in labels], input_columns="label",
                                       batched=True, batch_size=10_000, keep_in_memory=True,
                                       desc="keeping data.init_args.classes")
        self.stats["other_class"] += len(documents) - len(table)
        return ArrowDocuments(table, documents.to_document, documents.id_column)

    def _read_semeval(self, split: str, context: ReadContext) -> ArrowDocuments | None:
        """A split of the SemEval-2019 task 4 release: the split file's positions, the whole file (training) or
        ``test_source`` (test), each with its ground truth."""
        articles = Path(self.source).expanduser()
        positions = None
        if self.splits_file is not None:
            splits_file = Path(self.splits_file).expanduser()
            splits = self._read_splits_file(articles)
            if split not in splits:
                if split == self.train_split:
                    raise ConfigError(f"data.init_args.train_split {split!r} is not in {str(splits_file)!r} "
                                      f"(splits: {sorted(splits)})")
                return None
            positions = splits[split]
        elif split == self.test_split and self.test_source is not None:
            articles = Path(self.test_source).expanduser()
        elif split != self.train_split:
            return None
        if self.ground_truth is not None and articles == Path(self.source).expanduser():
            truth = Path(self.ground_truth).expanduser()
        else:
            try:
                truth = hyperpartisan_ground_truth_path(articles)
            except ValueError as err:
                raise ConfigError(f"data.init_args.ground_truth: {err}") from None
        kwargs = {"articles_path": str(articles), "ground_truth_path": str(truth), "positions": positions}
        inputs = [articles, truth] + ([Path(self.splits_file)] if self.splits_file is not None else [])
        return cached_documents(iter_semeval_hyperpartisan, kwargs, inputs=inputs, context=context,
                                cache_dir=self.cache_dir)

    def _read_splits_file(self, articles: Path) -> dict[str, list[int]]:
        """``splits_file`` read once (:func:`read_hyperpartisan_splits`), with one warning line when its lists are not
        a partition of the articles (Longformer's released file), read as Longformer reads it all the same."""
        if self._hyperpartisan_splits is None:
            splits_file = require_path(Path(self.splits_file).expanduser(), "Hyperpartisan splits file", LAYOUT)
            count = sum(1 for _ in _article_positions(articles))
            try:
                splits = read_hyperpartisan_splits(splits_file, count)
            except ValueError as err:
                raise ConfigError(f"data.init_args.splits_file: {err}") from None
            others = [name for name in (self.train_split, self.val_split) if name is not None]
            overlap = hyperpartisan_splits_overlap(splits, count, self.test_split, others)
            if overlap is not None:
                log.warning("%s is not a partition of the articles and is read as Longformer reads it (each split's "
                            "positions as listed): %s; for a test on unseen articles, drop splits_file and set "
                            "cross_validation_folds", splits_file, overlap)
            self._hyperpartisan_splits = splits
        return self._hyperpartisan_splits

    def _read_release(self, split: str, context: ReadContext) -> ArrowDocuments | None:
        """A split of a text_gcn list, of the rt-polarity folder or of the NYT corpus (``source_format``)."""
        path = Path(self.source).expanduser()
        if self.source_format == "nyt_annotated":
            if split != self.train_split:
                return None
            require_path(path, "NYT Annotated Corpus folder (LDC2008T19's nyt_corpus)", LAYOUT)
            kwargs = {"root": str(path), "label_field": self.columns["label_column"], "topics": self.topics,
                      "sample_size": self.sample_size, "seed": self.seed}
            return cached_documents(iter_nyt_annotated, kwargs, inputs=[path], context=context,
                                    cache_dir=self.cache_dir, description=f"NYT Annotated Corpus at {path}")
        if self.source_format == "rt_polarity":
            if split != self.train_split:
                return None
            return cached_documents(iter_rt_polarity, {"root": str(path)}, inputs=[path], context=context,
                                    cache_dir=self.cache_dir)
        if not path.is_file():
            raise MissingPathError(f"text_gcn list file not found at {str(path)!r}: source is text_gcn's "
                                    f"data/<name>.txt (e.g. data/R8.txt). Expected:\n{LAYOUT}")
        corpus = text_gcn_corpus(path, self.text_gcn_corpus)
        kwargs = {"list_path": str(path), "corpus_path": str(corpus), "split": split}
        return cached_documents(iter_text_gcn, kwargs, inputs=[path, corpus], context=context,
                                cache_dir=self.cache_dir)

    def _read_local(self, path: Path, split: str, context: ReadContext) -> ArrowDocuments:
        fmt = self.source_format if self.source_format not in ("auto", "hf") else None
        if path.is_dir() and fmt in (None, "folders"):
            prefix = f"{split}/" if path != Path(self.source).expanduser() else ""
            kwargs = {"root": str(path), "classes": self.classes, "id_prefix": prefix}
            return cached_documents(iter_class_folders, kwargs, inputs=[path], context=context,
                                    cache_dir=self.cache_dir)
        fmt = fmt or table_format_of(path)
        if fmt is None or path.is_dir():
            raise ValueError(f"cannot tell the format of {str(path)!r}; set source_format. Expected:\n{LAYOUT}")
        kwargs = {"path": str(path), "table_format": fmt, **self.columns, **self.table_options}
        return cached_documents(iter_labelled_table, kwargs, inputs=[path], context=context, cache_dir=self.cache_dir)

    # ------------------------------------------------------------------------------------------------- splits
    def load_documents(self) -> ArrowDocuments:
        return self._read_split(self.train_split)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        super().setup(stage)  # reads the training split
        before = Counter(self.stats)
        test = self._read_split(self.test_split) if self.test_split is not None else None
        self.test_set = DocumentDataset(test) if test is not None else None
        if test is not None:
            self.report_reading("test", len(test), {"test": len(test)}, self.stats - before)
        if self.val_split is not None:
            before = Counter(self.stats)
            val = self._read_split(self.val_split)
            if val is None:
                raise ConfigError(f"data.init_args.val_split: {self.source!r} has no {self.val_split!r} split; "
                                  f"name its validation split, or set val_split to null")
            self.val_set = DocumentDataset(val)
            self.report_reading("validation", len(val), {"validation": len(val)}, self.stats - before)
        if self.test_fraction or self.stratified or self.group_duplicates or self.cross_validation_folds:
            self._hold_out()
        if self.unlabelled_class is not None:
            before = Counter(self.stats)
            unlabelled = self._read_unlabelled()
            self.unlabelled_set = DocumentDataset(unlabelled)
            self.report_reading("unlabelled", len(unlabelled), {"unlabelled": len(unlabelled)}, self.stats - before)
        if self.few_shot_per_class is not None:
            keep_few_shot(self, self.few_shot_per_class, self.few_shot_seed, self.classes)

    def _hold_out(self) -> None:
        """Re-splits the training split's documents (those the base split held out for validation included) into
        training, validation and test (:func:`~lit_docemb.data.core.held_out.draw_parts`): a cross-validation fold
        or ``test_fraction`` as test, per label when ``stratified``, duplicates together when ``group_duplicates``."""
        drawn = "cross_validation_folds" if self.cross_validation_folds else "test_fraction" if self.test_fraction \
            else "group_duplicates" if self.group_duplicates else None
        if drawn not in (None, "group_duplicates") and self.test_set is not None:
            value = self.test_fraction if drawn == "test_fraction" else self.cross_validation_folds
            undo = "test_fraction to 0" if drawn == "test_fraction" else "cross_validation_folds to null"
            raise ConfigError(f"data.init_args.{drawn} {value} holds a test split out of the training documents, "
                              f"but {self.source!r} has its own test split ({self.test_split!r}): set {undo}, or "
                              "test_split to null")
        if self.group_duplicates and self.test_set is not None:
            raise ConfigError(f"data.init_args.group_duplicates keeps duplicates on one side of the splits drawn here, "
                              f"but {self.source!r} has its own test split ({self.test_split!r}): set test_split to "
                              "null (and test_fraction), or group_duplicates: false")
        held_val = self.val_split is None  # a published validation split stays as read
        pool = np.sort(np.concatenate([self.train_set.indices, self.val_set.indices])) if held_val \
            else self.train_set.indices
        labels = labels_at(self.documents, pool) if self.stratified or self.cross_validation_folds else None
        texts = texts_at(self.documents, pool) if self.group_duplicates else None
        part = draw_parts(ids_at(self.documents, pool), labels, self.seed,
                          val_fraction=self.val_fraction if held_val else 0.0, test_fraction=self.test_fraction,
                          stratified=self.stratified, folds=self.cross_validation_folds,
                          fold=self.cross_validation_fold,
                          texts=texts)
        if not (part == TRAIN).any():
            raise ConfigError(f"data.init_args.test_fraction {self.test_fraction} and val_fraction "
                              f"{self.val_fraction} leave no training document (of {len(pool)}): lower them")
        held_test = bool(self.test_fraction or self.cross_validation_folds)
        self.train_set = DocumentDataset(self.documents, pool[part == TRAIN])
        if held_val:
            val = pool[part == VALIDATION]
            if self.max_val_documents is not None:
                val = val[: self.max_val_documents]
            self.val_set = DocumentDataset(self.documents, val)
            self.all_set = DocumentDataset(self.documents, np.sort(np.concatenate([pool[part == TRAIN], val])))
        if held_test:
            self.test_set = DocumentDataset(self.documents, pool[part == TEST])
        self._open_token_cache()
        if held_test:
            self.test_set.documents = self.train_set.documents
        splits = {"train": len(self.train_set), "validation": len(self.val_set),
                  "test": len(self.test_set) if self.test_set is not None else 0}
        name = (f"cross-validation fold {self.cross_validation_fold} of {self.cross_validation_folds}"
                if self.cross_validation_folds else "stratified split" if self.stratified else "test split"
                if self.test_fraction else "validation split")
        if texts is not None:
            copies = Counter(Counter(texts).values())
            name += (f" (duplicates kept together: {sum(n for size, n in copies.items() if size > 1)} groups of "
                     f"{sum(size * n for size, n in copies.items() if size > 1)} documents)")
        self.report_reading(name, len(pool), splits, Counter())

    def _open_token_cache(self) -> None:
        """The training split's cached rows for the training documents; a published validation split, like
        the test split, stays documents (their own rows are made by the collator)."""
        if self.val_split is None:
            return super()._open_token_cache()
        if self.documents is None:
            return
        items = self.documents if self.token_cache is None else self.token_cache.open(self.documents)
        for dataset in (self.train_set, self.all_set):
            dataset.documents = items

    def _read_unlabelled(self) -> ArrowDocuments:
        path = self._local_split(self.train_split) if not self._is_hf() else None
        if path is None or not Path(path).is_dir() or not (Path(path) / self.unlabelled_class).is_dir():
            raise ConfigError(f"data.init_args.unlabelled_class: no folder {self.unlabelled_class!r} in the training "
                              f"split of {self.source!r} (aclImdb: source aclImdb, unlabelled_class unsup, classes "
                              f"[neg, pos])")
        context = ReadContext(strict=self.strict, encoding=self.encoding, fallback_encoding=self.fallback_encoding)
        kwargs = {"root": str(path), "classes": [self.unlabelled_class], "unlabelled": True,
                  "id_prefix": f"{self.train_split}/" if Path(path) != Path(self.source).expanduser() else ""}
        documents = cached_documents(iter_class_folders, kwargs, inputs=[path], context=context,
                                     cache_dir=self.cache_dir)
        self.stats.update(context.stats)
        return documents

    @property
    def fit_set(self):
        """What ``train_dataloader`` serves: the training split, or with ``fit_on: all`` every document read, those
        outside the training split without their labels."""
        if self.fit_on == "train":
            return self.train_set
        parts = (self.val_set, self.test_set, self.unlabelled_set)
        held_out = [part for part in parts if part is not None and len(part)]
        return ConcatDocuments([self.train_set, *held_out], labelled=1)  # held-out labels never reach training

    def train_dataloader(self):
        return self._loader(self.fit_set, "fit", shuffle=True)

    @property
    def labels(self) -> list[str]:
        """Sorted label names of the training split (after ``setup``)."""
        return sorted(label for label in self.train_set.documents.table.unique("label") if label is not None)

    def test_dataloader(self):
        """The source's test split when it has one, else the held-out validation documents."""
        return self._loader(self.test_set if self.test_set is not None else self.val_set, "validate", shuffle=False)


def _article_positions(articles: Path):
    """One item per ``<article>`` of a SemEval-2019 task 4 articles file, in file order (elements cleared)."""
    import xml.etree.ElementTree as ElementTree

    require_path(articles, "SemEval-2019 task 4 articles file", LAYOUT)
    for _, element in ElementTree.iterparse(articles):
        if element.tag == "article":
            element.clear()
            yield element
