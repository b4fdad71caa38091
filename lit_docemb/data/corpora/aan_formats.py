"""Readers for the ACL Anthology Network (AAN): the Long Range Arena retrieval TSVs and the network corpus.

**LRA retrieval TSVs** (``lra_release.gz`` of github.com/google-research/long-range-arena, folder
``tsv_data/``: ``new_aan_pairs.{train,eval,test}.tsv``). No header; one pair per line, five tab-separated
fields ``label  id1  id2  text1  text2``: ``label`` is 1 when the two papers are linked by a citation, 0 otherwise
(written ``1``/``0`` or ``1.0``/``0.0``); the texts are usually Python bytes literals (``b'...'``, escapes
such as ``\\n`` inside), decoded here with :func:`ast.literal_eval` then UTF-8; plain text is taken as it is.
No quoting (fields never hold a raw tab). :func:`iter_lra_documents` yields every paper once (by id, the first
text seen; a later different text for the same id counts ``"conflicting_duplicate_text"``) and stores the
pairs of each split in ``context.extra["pairs"][split]`` as ``[first id, second id, label]``.

**Network corpus** (the AAN release, e.g. ``aan/``): ``papers_text/<paper id>.txt`` (text extracted from the
PDF), a citation list (``release/<year>/acl.txt``) with one ``<citing id> ==> <cited id>`` per line, and an
optional metadata file (``acl-metadata.txt``) of ``key = {value}`` lines (``id``, ``author``, ``title``,
``venue``, ``year``), entries separated by blank lines. :func:`iter_aan_network` yields one document per text
file with ``metadata["citations"]`` (what it cites), ``metadata["cited_by"]`` and ``metadata["similar"]``.

**Abstract and references removed** (CoLDE §4.1.1: "to prevent leakage of information ... the references and the
abstract sections are removed"; optional, :func:`remove_abstract_and_references`). The text files are PDF
extractions without markup, so sections are found by their heading lines: the abstract runs from the first line
in the first half of the text that is ``Abstract`` (alone, or followed by its text on the same line) to the first
body heading after it (``1 Introduction``, ``1. Introduction``, ``I. INTRODUCTION``, ``Introduction``), or,
without one, to its first blank line; the references run from the last line that is ``References`` /
``Bibliography`` (optionally numbered) to the end. A paper without such a heading keeps that part (the reader
logs how many papers did); a paper left without text is dropped (``"empty_document"``).

**Similarity rule** (the AAN counterpart of CoLDE's Wikipedia link-set groups). Two papers ``a != b`` that
both have a text file are *similar* when

1. one cites the other (direct citation), or
2. they are bibliographically coupled: with ``R(x)`` the set of papers ``x`` cites (in the citation list,
   with or without a text file), ``|R(a) & R(b)| >= min_shared_references`` and
   ``|R(a) & R(b)| / |R(a) | R(b)| >= min_reference_jaccard`` (defaults 2 and 0.5).

A paper's similarity group is itself plus its ``similar`` list. Coupled pairs are found by prefix filtering
(:func:`coupled_pairs`), exact and far below the quadratic all-pairs cost. Similar ids may name a paper whose
text file turned out empty (dropped and counted).

All ids are document ids (``aan:<paper id>``) in both layouts.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, normalise_paragraphs, read_lines

LRA_EXPECTED = "5 tab-separated fields: label (0/1), id1, id2, text1, text2 (no header)"
CITATIONS_EXPECTED = "'<citing id> ==> <cited id>'"
METADATA_EXPECTED = "'key = {value}' lines, entries separated by blank lines"
log = logging.getLogger(__name__)
_METADATA_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*=\s*\{(.*)\}\s*$")
_ABSTRACT_HEADING = re.compile(r"^\s*abstract\b\s*[.:\u2014-]?", re.IGNORECASE)
_BODY_HEADING = re.compile(r"^\s*(?:(?:1|I)\.?\s+[A-Z][A-Za-z ]{2,60}|[Ii]ntroduction|INTRODUCTION)\s*$")
_REFERENCES_HEADING = re.compile(r"^\s*(?:\d+\.?\s+)?(?:references?|bibliography)\s*:?\s*$", re.IGNORECASE)


def doc_id(paper_id: str) -> str:
    return f"aan:{paper_id}"


# ---------------------------------------------------------------------------------------------------------------------
# Long Range Arena retrieval TSVs
# ---------------------------------------------------------------------------------------------------------------------


def parse_pair_label(field: str) -> int | None:
    """``"1"``, ``"0"``, ``"1.0"``, ``"0.0"`` → 1 / 0; anything else → None."""
    try:
        value = float(field)
    except ValueError:
        return None
    return int(value) if value in (0.0, 1.0) else None


def parse_lra_text(field: str, context: ReadContext) -> str | None:
    """A text field: a bytes literal ``b'...'`` decoded (undecodable bytes counted), else the field itself;
    None for a field that starts like a bytes literal (``b'`` or ``b"``) but is not a valid one (truncated)."""
    if not field.startswith(("b'", 'b"')):
        return field
    try:
        value = ast.literal_eval(field)
    except (ValueError, SyntaxError):
        return None
    return context.decode(value) if isinstance(value, bytes) else None


def iter_lra_documents(paths: dict[str, str], *, context: ReadContext) -> Iterator[Document]:
    """Deduplicated documents of LRA TSV files ``{split: path}``; pairs go to ``context.extra["pairs"]``."""
    seen: dict[str, int] = {}  # document id -> hash of its raw text field
    pairs: dict[str, list[list]] = {}
    for split, path in paths.items():
        split_pairs = pairs.setdefault(split, [])
        for line_no, line in read_lines(path, context):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            fields = line.split("\t")
            label = parse_pair_label(fields[0]) if len(fields) == 5 else None
            ids = [doc_id(f.strip()) for f in fields[1:3]]
            if label is None or not all(f.strip() for f in fields[1:3]):
                context.malformed(where, f"{len(fields)} fields, label {fields[0][:20]!r}", LRA_EXPECTED,
                                  key="malformed_line")
                continue
            valid = True
            for document_id, raw in zip(ids, fields[3:], strict=True):
                if document_id in seen:
                    context.stats["conflicting_duplicate_text"] += seen[document_id] != hash(raw)
                    continue
                text = parse_lra_text(raw, context)
                if text is None:
                    valid = False
                    continue
                seen[document_id] = hash(raw)
                document = Document(id=document_id, sections=[Section("", normalise_paragraphs(text))])
                if context.keep(document):
                    yield document
            if not valid:
                context.malformed(where, "a text field is an invalid bytes literal", LRA_EXPECTED, key="malformed_line")
                continue
            split_pairs.append([ids[0], ids[1], label])
    context.extra["pairs"] = pairs


# ---------------------------------------------------------------------------------------------------------------------
# Network corpus
# ---------------------------------------------------------------------------------------------------------------------


def read_citations(path: str, context: ReadContext) -> dict[str, set[str]]:
    """``{citing paper id: {cited paper ids}}`` of an ``acl.txt`` citation list (self-citations counted and
    dropped, repeated lines merged)."""
    citations: dict[str, set[str]] = defaultdict(set)
    for line_no, line in read_lines(path, context):
        if not line.strip():
            continue
        citing, arrow, cited = line.partition("==>")
        citing, cited = citing.strip(), cited.strip()
        if not arrow or not citing or not cited or len(cited.split()) != 1 or len(citing.split()) != 1:
            context.malformed(f"{path}:{line_no}", f"not a citation line: {line[:60]!r}", CITATIONS_EXPECTED,
                              key="malformed_line")
        elif citing == cited:
            context.stats["self_citation"] += 1
        else:
            citations[citing].add(cited)
    return dict(citations)


def read_paper_metadata(path: str, context: ReadContext) -> dict[str, dict[str, str]]:
    """``{paper id: {key: value}}`` of an ``acl-metadata.txt`` file; entries without ``id`` are counted."""
    entries: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    start = 0

    def flush() -> None:
        if current.get("id"):
            entries[current.pop("id")] = dict(current)
        elif current:
            context.malformed(f"{path}:{start}", "entry without id", METADATA_EXPECTED, key="malformed_entry")
        current.clear()

    for line_no, line in read_lines(path, context):
        match = _METADATA_LINE.match(line)
        if not line.strip() or (match and match.group(1).lower() == "id"):
            flush()
            start = line_no if line.strip() else line_no + 1
        if match:
            current[match.group(1).lower()] = match.group(2).strip()
        elif line.strip():
            context.malformed(f"{path}:{line_no}", "not a 'key = {value}' line", METADATA_EXPECTED,
                              key="malformed_line")
    flush()
    return entries


def coupled_pairs(references: dict[str, set[str]], min_jaccard: float, min_shared: int = 1) -> set[tuple[str, str]]:
    """Pairs ``(a, b)``, ``a < b``, whose reference sets share at least ``min_shared`` items and have Jaccard
    similarity at least ``min_jaccard``, found by prefix filtering (Chaudhuri et al. 2006; Bayardo et al. 2007).

    Items are ordered rarest first. Two sets meeting both bounds share at least
    ``k(x) = max(ceil(min_jaccard * |x|), min_shared)`` items, so the rarest shared item lies within the first
    ``|x| - k(x) + 1`` items of each set: only pairs whose such prefixes meet are candidates, and each candidate
    is verified exactly. The result equals the all-pairs definition.
    """
    if not 0.0 < min_jaccard <= 1.0 or min_shared < 1:
        raise ValueError(f"need 0 < min_jaccard <= 1 and min_shared >= 1, got {min_jaccard=}, {min_shared=}")
    frequency = Counter(item for items in references.values() for item in items)
    holders: dict[str, list[str]] = defaultdict(list)  # item -> papers with the item in their prefix
    candidates: set[tuple[str, str]] = set()
    for paper in sorted(references):
        items = sorted(references[paper], key=lambda item: (frequency[item], item))
        needed = max(math.ceil(min_jaccard * len(items) - 1e-9), min_shared)
        for item in items[: max(len(items) - needed + 1, 0)]:
            candidates.update((other, paper) for other in holders[item])
            holders[item].append(paper)
    pairs = set()
    for a, b in candidates:
        shared = len(references[a] & references[b])
        if shared >= min_shared and shared >= min_jaccard * (len(references[a]) + len(references[b]) - shared) - 1e-9:
            pairs.add((a, b))
    return pairs


def similar_papers(citations: dict[str, set[str]], corpus: set[str], min_shared_references: int = 2,
                   min_reference_jaccard: float = 0.5) -> dict[str, set[str]]:
    """``{paper: {similar papers}}`` over the papers in ``corpus`` (see the module docstring's rule)."""
    similar: dict[str, set[str]] = defaultdict(set)
    for citing, cited in citations.items():
        for other in cited:
            if citing in corpus and other in corpus:
                similar[citing].add(other)
                similar[other].add(citing)
    references = {paper: refs for paper, refs in citations.items() if paper in corpus}
    for a, b in coupled_pairs(references, min_reference_jaccard, min_shared_references):
        similar[a].add(b)
        similar[b].add(a)
    return dict(similar)


def remove_abstract_and_references(text: str, not_found: Counter | None = None) -> str:
    """``text`` (a paper's extracted text) without its abstract and its references (see the module docstring);
    a part whose heading is not found is kept and counted in ``not_found`` (``"abstract"``, ``"references"``)."""
    lines = text.splitlines()
    end = len(lines)
    references = [i for i, line in enumerate(lines) if _REFERENCES_HEADING.match(line)]
    if references:
        end = references[-1]
    elif not_found is not None:
        not_found["references"] += 1
    start = next((i for i, line in enumerate(lines[:(end + 1) // 2]) if _ABSTRACT_HEADING.match(line)), None)
    if start is None:
        if not_found is not None:
            not_found["abstract"] += 1
        return "\n".join(lines[:end])
    body = next((i for i in range(start + 1, end) if _BODY_HEADING.match(lines[i])), None)
    if body is None:  # no body heading: the abstract ends at its first blank line after some text
        has_text = bool(_ABSTRACT_HEADING.sub("", lines[start]).strip())
        body = end
        for i in range(start + 1, end):
            if lines[i].strip():
                has_text = True
            elif has_text:
                body = i
                break
    return "\n".join(lines[:start] + lines[body:end])


def iter_aan_network(papers_dir: str, citations_file: str, metadata_file: str | None = None,
                     min_shared_references: int = 2, min_reference_jaccard: float = 0.5,
                     remove_abstract_references: bool = False, *, context: ReadContext) -> Iterator[Document]:
    """One document per ``papers_dir/<id>.txt`` (sorted by id) with citations, citing papers and similar
    papers in ``metadata``; title, authors, venue and year from ``metadata_file`` when given; without the
    abstract and references when ``remove_abstract_references``."""
    papers = sorted(p for p in Path(papers_dir).iterdir() if p.suffix == ".txt" and not p.name.startswith("."))
    corpus = {p.stem for p in papers}
    citations = read_citations(citations_file, context)
    cited_by: dict[str, set[str]] = defaultdict(set)
    for citing, cited in citations.items():
        for other in cited:
            cited_by[other].add(citing)
    context.stats["citation_outside_corpus"] += sum(
        citing not in corpus or other not in corpus for citing, cited in citations.items() for other in cited)
    similar = similar_papers(citations, corpus, min_shared_references, min_reference_jaccard)
    paper_metadata = read_paper_metadata(metadata_file, context) if metadata_file else {}
    not_found: Counter = Counter()
    for path in papers:
        paper = path.stem
        info = dict(paper_metadata.get(paper, {}))
        metadata = {key: sorted(doc_id(p) for p in ids.get(paper, ())) for key, ids in
                    (("citations", citations), ("cited_by", cited_by), ("similar", similar))}
        metadata.update({key: info[key] for key in ("author", "venue", "year") if key in info})
        text = context.decode(path.read_bytes())
        if remove_abstract_references:
            text = remove_abstract_and_references(text, not_found)
        text = normalise_paragraphs(text)
        document = Document(id=doc_id(paper), title=info.get("title", ""), sections=[Section("", text)],
                            metadata=metadata)
        if context.keep(document):
            yield document
    if not_found:
        log.warning("AAN papers kept whole where no heading was found: %d without an 'Abstract' line, %d without a "
                    "'References' line (of %d)", not_found["abstract"], not_found["references"], len(papers))
