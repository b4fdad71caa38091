"""The generic labelled-text formats (:class:`~lit_docemb.data.corpora.labelled.LabelledTextDataModule`, arXiv-11).

* tables: CSV (quotes honoured), TSV (quotes literal) and JSON lines, optionally ``.gz``/``.bz2``/``.xz``
  compressed, with a header line or ``column_names``; one record per document (:func:`iter_table_records`);
* one folder per class: ``<root>/<label>/**/<file>``, one document per file (20 Newsgroups, aclImdb, BBC News,
  arXiv-11), id = the path relative to ``root`` (:func:`iter_class_folders`);
* Hugging Face datasets, labels of ``ClassLabel`` columns turned into their names (:func:`iter_hf_labelled`).

Labels are kept as strings everywhere. Bad input follows the package's policy
(:class:`~lit_docemb.data.core.reading.ReadContext`).
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import (
    MalformedInputError,
    MissingPathError,
    ReadContext,
    load_hf_splits,
    normalise_paragraphs,
    open_binary,
    read_lines,
    walk_files,
)
from lit_docemb.errors import ConfigError

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------------------
# Labelled text: tables, Hugging Face tables, one folder per class
# ---------------------------------------------------------------------------------------------------------------------

TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


def table_format_of(path: str | Path) -> str | None:
    """``"csv"``, ``"tsv"`` or ``"jsonl"`` from the extension (a compression suffix is looked through)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".xz"):
        suffixes = suffixes[:-1]
    return TABLE_FORMATS.get(suffixes[-1]) if suffixes else None


def _iter_jsonl_records(path: str | Path, context: ReadContext) -> Iterator[tuple[int, dict[str, Any]]]:
    expected = "one JSON object per line"
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        try:
            record = context.json(line)
        except json.JSONDecodeError as err:
            context.malformed(f"{path}:{line_no}", f"invalid JSON ({err.msg})", expected, key="malformed_line")
            continue
        if not isinstance(record, dict):
            context.malformed(f"{path}:{line_no}", "not a JSON object", expected, key="malformed_line")
            continue
        yield line_no, record


def iter_table_records(path: str | Path, context: ReadContext, table_format: str,
                       column_names: Sequence[str] | None = None, delimiter: str | None = None,
                       quoting: bool | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields ``(first line number, record)`` of a CSV, TSV or JSON-lines file.

    Args:
        table_format: ``"csv"``, ``"tsv"`` or ``"jsonl"``.
        column_names: Names of the columns of a delimited file without header; ``None``: the first line is
            the header.
        delimiter: Field separator; ``None``: ``","`` for CSV, tab for TSV.
        quoting: Honour ``"``-quoted fields (which may span lines); ``None``: for CSV, not for TSV.
    """
    if table_format == "jsonl":
        yield from _iter_jsonl_records(path, context)
        return
    csv.field_size_limit(2**31 - 1)  # documents are longer than the default 128 KiB field limit
    delimiter = delimiter or ("\t" if table_format == "tsv" else ",")
    quoting = table_format == "csv" if quoting is None else quoting
    lines = (line for _, line in read_lines(path, context, keepends=True))
    reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
                        strict=quoting)
    header = list(column_names) if column_names else None
    expected = f"{delimiter!r}-separated fields {header or '(named by the header line)'}"
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            context.malformed(f"{path}:{start}", f"bad quoting ({err})", expected, key="malformed_line")
            continue
        if not fields:
            continue  # blank line
        if header is None:
            header, expected = fields, f"{delimiter!r}-separated fields {fields}"
        elif len(fields) != len(header):
            context.malformed(f"{path}:{start}", f"{len(fields)} fields instead of {len(header)}", expected,
                              key="malformed_line")
        else:
            yield start, dict(zip(header, fields, strict=True))


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


def record_to_document(record: dict[str, Any], where: str, context: ReadContext, *, default_id: str,
                       text_column: str | Sequence[str], label_column: str | None, id_column: str | None = None,
                       title_column: str | None = None) -> Document | None:
    """One table record → Document, or None (counted) when a column is missing or the label is empty.

    One text column gives one untitled section; several give one section each, headed by the column name.
    """
    text_columns = [text_column] if isinstance(text_column, str) else list(text_column)
    wanted = [c for c in (*text_columns, label_column, id_column, title_column) if c is not None]
    expected = f"columns {wanted}"
    missing = [c for c in wanted if c not in record]
    if missing:
        context.malformed(where, f"missing column(s) {missing} (has {sorted(record)})", expected)
        return None
    label = None if label_column is None else _cell_text(record[label_column]).strip()
    if label == "":
        context.malformed(where, f"empty label in column {label_column!r}", expected, key="missing_label")
        return None
    headings = [""] if len(text_columns) == 1 else text_columns
    sections = [Section(heading, normalise_paragraphs(_cell_text(record[column])))
                for heading, column in zip(headings, text_columns, strict=True)]
    return Document(id=_cell_text(record[id_column]) if id_column else default_id,
                    title=_cell_text(record[title_column]).strip() if title_column else "",
                    sections=[s for s in sections if s.text], label=label)


def iter_labelled_table(path: str, table_format: str, text_column: str | list[str], label_column: str | None,
                        id_column: str | None = None, title_column: str | None = None,
                        column_names: list[str] | None = None, delimiter: str | None = None,
                        quoting: bool | None = None, *, context: ReadContext) -> Iterator[Document]:
    """Documents of a CSV/TSV/JSONL file; ids are ``id_column`` or ``"<file name>:<line>"``; duplicate ids
    are counted (``"duplicate_id"``) and skipped."""
    seen: set[str] = set()
    for line_no, record in iter_table_records(path, context, table_format, column_names, delimiter, quoting):
        where = f"{path}:{line_no}"
        document = record_to_document(record, where, context, default_id=f"{Path(path).name}:{line_no}",
                                      text_column=text_column, label_column=label_column, id_column=id_column,
                                      title_column=title_column)
        if document is None or not context.keep(document):
            continue
        if id_column is not None:
            if document.id in seen:
                context.malformed(where, f"duplicate id {document.id!r}", "unique ids", key="duplicate_id")
                continue
            seen.add(document.id)
        yield document


def iter_hf_labelled(source: str, subset: str | None, split: str, text_column: str | list[str],
                     label_column: str | None, id_column: str | None = None, title_column: str | None = None,
                     cache_dir: str | None = None, *, context: ReadContext) -> Iterator[Document]:
    """Documents of one split of a Hugging Face dataset; ``ClassLabel`` values become their names, a label
    outside the names (e.g. -1 for "unlabelled") is a missing label; ids are ``id_column`` or ``"<split>:<row>"``."""
    table = load_hf_splits(source, subset, cache_dir)[split]
    names = getattr(table.features.get(label_column), "names", None) if label_column else None
    for start in range(0, len(table), 1000):
        batch = table[start : start + 1000]
        for offset in range(len(next(iter(batch.values()), []))):
            record = {column: values[offset] for column, values in batch.items()}
            if names is not None and record.get(label_column) is not None:
                value = record[label_column]
                record[label_column] = names[value] if 0 <= value < len(names) else None
            row = start + offset
            document = record_to_document(record, f"{source}[{split}][{row}]", context, default_id=f"{split}:{row}",
                                          text_column=text_column, label_column=label_column,
                                          id_column=id_column, title_column=title_column)
            if document is not None and context.keep(document):
                yield document


def iter_class_folders(root: str, classes: list[str] | None = None, id_prefix: str = "", unlabelled: bool = False,
                       *, context: ReadContext) -> Iterator[Document]:
    """One document per file of ``<root>/<label>/**``, label = the folder name, id = ``id_prefix`` + the path
    relative to ``root``. Files directly in ``root`` and hidden entries are counted and skipped.

    Args:
        classes: Read only these class folders (e.g. ``["neg", "pos"]`` for aclImdb, leaving out ``unsup``).
        id_prefix: Prepended to each document's id.
        unlabelled: The documents get no label (aclImdb's ``train/unsup``: a folder of unlabelled reviews).
    """
    root_path = Path(root)
    folders = sorted(p for p in root_path.iterdir() if p.is_dir() and not p.name.startswith("."))
    missing = sorted(set(classes or ()) - {p.name for p in folders})
    if missing:
        raise ValueError(f"class folders {missing} not in {root!r} (found {[p.name for p in folders]})")
    for entry in sorted(root_path.iterdir()):
        if entry.is_file() and entry.name.startswith("."):
            context.stats["hidden_file"] += 1
        elif entry.is_file():
            context.malformed(str(entry), "file outside a class folder", f"{root}/<label>/<document>",
                              key="file_outside_class_folder")
    for folder in folders:
        if classes is not None and folder.name not in classes:
            log.info("%s: class folder %r not read (not in classes)", root, folder.name)
            continue
        for path in walk_files(folder):
            relative = path.relative_to(root_path).as_posix()
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                context.stats["hidden_file"] += 1
                continue
            text = normalise_paragraphs(context.decode(path.read_bytes()))
            document = Document(id=f"{id_prefix}{relative}", sections=[Section("", text)],
                                label=None if unlabelled else folder.name)
            if context.keep(document):
                yield document


# ---------------------------------------------------------------------------------------------------------------------
# Yao et al. (2019)'s text_gcn files and the sentence polarity release (rt-polarity)
# ---------------------------------------------------------------------------------------------------------------------

def text_gcn_corpus(list_path: str | Path, corpus: str = "clean") -> Path:
    """The text file of a text_gcn list ``<folder>/<name>.txt``: ``<folder>/corpus/<name>.clean.txt`` (``"clean"``,
    text_gcn's ``remove_words.py`` output) or ``<folder>/corpus/<name>.txt`` (``"raw"``); a clean file beside the
    list (``<folder>/<name>.clean.txt``) is found too. Raises :class:`MissingPathError` (a FileNotFoundError, one
    line from the command line) naming the places looked at."""
    list_path = Path(list_path).expanduser()
    name, folder = list_path.stem, list_path.parent
    candidates = ([folder / "corpus" / f"{name}.clean.txt", folder / f"{name}.clean.txt"] if corpus == "clean"
                  else [folder / "corpus" / f"{name}.txt"])
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise MissingPathError(f"text_gcn corpus file for {str(list_path)!r} not found (looked at "
                                f"{', '.join(map(str, candidates))}): keep text_gcn's data/ folder as it is "
                                f"(data/{name}.txt and data/corpus/{name}{'.clean' if corpus == 'clean' else ''}.txt)")
    return found


def iter_text_gcn(list_path: str, corpus_path: str, split: str, *, context: ReadContext) -> Iterator[Document]:
    """The documents of one split of a text_gcn data set (Yao et al. 2019; R8, R52, MR, Ohsumed, 20ng): line *i*
    of ``list_path`` is ``<document name>\\t<split>\\t<label>`` and line *i* of ``corpus_path`` the document's
    text. A document belongs to ``split`` ("train" or "test") when its split field contains it, as text_gcn
    reads it (20ng's fields are ``20news-bydate-train`` / ``-test``). Id: the document name (``<line>`` when it
    is empty or repeated). Two files of different lengths (a truncated download), or a list without a line of
    ``split``, are a :class:`~lit_docemb.errors.ConfigError` naming both files (one line from the command line).

    Text: each line of the split decoded with ``context.encoding`` (UTF-8), a line it cannot decode with the
    fallback encoding (:class:`~lit_docemb.data.corpora.labelled.LabelledTextDataModule`: Latin-1, counted as
    ``line_decoded_with_fallback_encoding``), as text_gcn's own scripts decode the corpus (``line.decode('latin1')``
    in ``remove_words.py`` and ``build_graph.py``): the 229 such lines of the raw ``corpus/mr.txt`` read as text_gcn
    reads them, and no document is dropped for its bytes."""
    names = [line for _, line in read_lines(list_path, context, unit="line")]
    with open_binary(corpus_path) as stream:
        texts = list(stream)  # bytes: only the split's lines are decoded (and counted)
    if len(names) != len(texts):
        raise ConfigError(f"{list_path} has {len(names)} lines but {corpus_path} has {len(texts)}: they must be the "
                          f"list and the corpus file of the same text_gcn data set, line for line (a download cut "
                          f"short? fetch both again)")
    seen: set[str] = set()
    other_splits: set[str] = set()
    for number, (entry, text) in enumerate(zip(names, texts), 1):
        fields = entry.split("\t")
        if len(fields) != 3:
            context.malformed(f"{list_path}:{number}", f"{len(fields)} tab-separated fields",
                              "<document name>\\t<train|test>\\t<label>", key="malformed_line")
            continue
        name, where, label = (f.strip() for f in fields)
        if split not in where:
            other_splits.add(where)
            continue
        document_id = name if name and name not in seen else str(number)
        seen.add(document_id)
        decoded = context.decode(text, unit="line")
        document = Document(id=document_id, sections=[Section("", decoded.lstrip("\ufeff").strip())], label=label)
        if context.keep(document):
            yield document
    if not seen and other_splits:
        raise ConfigError(f"{list_path} lists no {split!r} document (its split fields: "
                          f"{', '.join(sorted(other_splits)[:5])}), so {corpus_path} has none either: are they a whole "
                          "text_gcn data set? (data.init_args.train_split / test_split name the splits; test_split: "
                          "null reads none)")


RT_POLARITY_FILES = {"pos": "rt-polarity.pos", "neg": "rt-polarity.neg"}


def iter_rt_polarity(root: str, *, context: ReadContext) -> Iterator[Document]:
    """Pang and Lee's sentence polarity data (``rt-polaritydata.tar.gz``): ``<root>/rt-polarity.pos`` and
    ``rt-polarity.neg``, one review sentence a line (Latin-1), labels ``pos`` / ``neg``, ids
    ``rt-polarity.<pos|neg>:<line>``. The release has no test split (text_gcn's ``mr.txt`` holds Yao et al.'s)."""
    missing = [name for name in RT_POLARITY_FILES.values() if not (Path(root) / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not in {root!r}: unpack rt-polaritydata.tar.gz and point "
                                f"source at its rt-polaritydata folder")
    for label, name in RT_POLARITY_FILES.items():
        for number, line in read_lines(Path(root) / name, context, unit="line"):
            document = Document(id=f"{name}:{number}", sections=[Section("", line.strip())], label=label)
            if context.keep(document):
                yield document


HYPERPARTISAN_EXPECTED = ('<articles> of <article id="..." title="..."> elements holding <p> paragraphs, and a '
                          'ground-truth file of <article id="..." hyperpartisan="true|false"/> elements')


def hyperpartisan_ground_truth_path(articles_path: str | Path) -> Path:
    """The ground-truth file the SemEval-2019 task 4 release pairs with an articles file:
    ``articles-training-byarticle-20181122.xml`` → ``ground-truth-training-byarticle-20181122.xml``."""
    path = Path(articles_path)
    if not path.name.startswith("articles-"):
        raise ValueError(f"{str(path)!r} is not a SemEval-2019 task 4 articles file (articles-<part>.xml): name its "
                         "ground truth with ground_truth")
    return path.with_name("ground-truth-" + path.name[len("articles-"):])


def read_hyperpartisan_splits(splits_file: str | Path, count: int) -> dict[str, list[int]]:
    """Longformer's ``scripts/hp-splits.json``: a JSON object of split name → 0-based positions of the articles in
    the articles file's order, read as Longformer's ``hp_preprocess.py`` reads it: each list as listed, whether or not
    the lists overlap or cover every article (the released file does neither: see :func:`hyperpartisan_splits_overlap`).
    Anything else (not such an object, a position repeated in one list or outside ``range(count)``: ids of another
    file, a copy for another articles file) raises ValueError naming the file."""
    expected = (f"expected a JSON object of split name -> list of 0-based positions of the {count} articles of the "
                "articles file (Longformer's scripts/hp-splits.json)")
    try:
        with open(splits_file, encoding="utf-8") as handle:
            splits = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(splits_file)!r} is not JSON ({err}); {expected}") from None
    if not isinstance(splits, dict) or not all(isinstance(rows, list) for rows in splits.values()):
        raise ValueError(f"{str(splits_file)!r}: {expected}")
    for name, rows in splits.items():
        wrong = [p for p in rows if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < count]
        if wrong:
            raise ValueError(f"{str(splits_file)!r}: split {name!r} lists {len(wrong)} position(s) that are not "
                             f"article positions (first {wrong[0]!r}); {expected}: use the file made for this "
                             "articles file")
        if len(set(rows)) != len(rows):
            raise ValueError(f"{str(splits_file)!r}: split {name!r} lists {len(rows) - len(set(rows))} position(s) "
                             f"twice; {expected}, each position at most once per split")
    return splits


def hyperpartisan_splits_overlap(splits: dict[str, list[int]], count: int, test: str | None,
                                 others: Sequence[str]) -> str | None:
    """Why a split file is not a partition of the ``count`` articles, in one clause: how many of the ``test``
    split's articles are also in each split of ``others`` and how many articles are in no split; None for a
    partition. Longformer's released file: of the 65 test articles 51 are also in train, 7 in dev (7 in neither),
    and 58 of the 645 articles are in no split."""
    sets = {name: set(rows) for name, rows in splits.items()}
    listed = set().union(*sets.values())
    if sum(map(len, sets.values())) == len(listed) == count:
        return None
    said = []
    if test in sets:
        seen = [name for name in others if name in sets and name != test]
        also = ", ".join(f"{len(sets[test] & sets[name])} also in {name}" for name in seen)
        unseen = len(sets[test] - set().union(*(sets[name] for name in seen)))
        said.append(f"of the {len(sets[test])} {test} articles, {also} ({unseen} in neither)")
    said.append(f"{count - len(listed)} of the {count} articles are in no split")
    return "; ".join(said)


def iter_semeval_hyperpartisan(articles_path: str, ground_truth_path: str, positions: list[int] | None = None, *,
                               context: ReadContext) -> Iterator[Document]:
    """The SemEval-2019 task 4 (Hyperpartisan News Detection) release: ``articles-<part>.xml`` with its
    ``ground-truth-<part>.xml`` (Zenodo record 1489920; by-article or by-publisher).

    Each ``<article id published-at title>`` becomes a document with id = the article's ``id`` attribute, title
    = its ``title`` attribute, one section whose paragraphs are the ``<p>`` elements' text (links and quotes
    inlined, whitespace collapsed), label = the ground truth's ``hyperpartisan`` attribute (``"true"`` /
    ``"false"``), ``metadata`` holding ``published_at``, ``url``, ``bias`` and ``labeled_by`` when given. An
    article without a ground-truth entry is skipped and counted (``"missing_label"``).

    Args:
        articles_path: The articles file.
        ground_truth_path: Its ground-truth file.
        positions: Read only the articles at these 0-based positions of the file (a split of Longformer's
            ``hp-splits.json``), in file order; ``None`` reads them all.
    """
    import xml.etree.ElementTree as ElementTree

    for path in (articles_path, ground_truth_path):
        if not Path(path).is_file():
            raise FileNotFoundError(f"SemEval-2019 task 4 file not found at {path!r}: unzip the release's "
                                    "articles-<part>.zip and ground-truth-<part>.zip side by side")
    try:
        yield from _hyperpartisan_documents(ElementTree, articles_path, ground_truth_path, positions, context)
    except ElementTree.ParseError as err:
        raise MalformedInputError(f"{articles_path} or {ground_truth_path}: not well-formed XML ({err}); expected "
                                  f"{HYPERPARTISAN_EXPECTED}") from None


def _hyperpartisan_documents(ElementTree, articles_path: str, ground_truth_path: str,  # noqa: N803 (the module)
                             positions: list[int] | None, context: ReadContext) -> Iterator[Document]:
    truth: dict[str, dict[str, str]] = {}
    for _, element in ElementTree.iterparse(ground_truth_path):
        if element.tag == "article":
            if element.get("id") is None or element.get("hyperpartisan") not in ("true", "false"):
                context.malformed(ground_truth_path, f"ground truth {dict(element.attrib)}", HYPERPARTISAN_EXPECTED)
            else:
                truth[element.get("id")] = dict(element.attrib)
            element.clear()
    wanted = None if positions is None else set(positions)
    position = -1
    for _, element in ElementTree.iterparse(articles_path):
        if element.tag != "article":
            continue
        position += 1
        if wanted is not None and position not in wanted:
            element.clear()
            continue
        article_id = element.get("id")
        if article_id is None:
            context.malformed(f"{articles_path}, article {position}", "no id attribute", HYPERPARTISAN_EXPECTED)
            element.clear()
            continue
        paragraphs = [" ".join("".join(p.itertext()).split()) for p in element.iter("p")]
        text = "\n\n".join(p for p in paragraphs if p)
        attributes, entry = dict(element.attrib), truth.get(article_id)
        element.clear()
        if entry is None:
            context.malformed(f"{articles_path}, article {article_id}", f"no entry in {ground_truth_path}",
                              HYPERPARTISAN_EXPECTED, key="missing_label")
            continue
        source = {"published_at": attributes.get("published-at"), "url": entry.get("url"), "bias": entry.get("bias"),
                  "labeled_by": entry.get("labeled-by")}
        document = Document(id=article_id, title=attributes.get("title") or "", sections=[Section("", text)],
                            label=entry["hyperpartisan"], metadata={k: v for k, v in source.items() if v})
        if context.keep(document):
            yield document
