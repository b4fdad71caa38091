"""Builds a WIKIR collection with sections kept (Graph-RoBERTa Table 5) from MediaWiki XML dumps, in the wikIR
release layout that :class:`~lit_docemb.data.corpora.wikir.WIKIRDataModule` reads.

The construction is wikIR's (Frej et al.; its ``build_wikIR.py`` options in brackets), and Graph-RoBERTa §3.1 says
it followed "the same settings" on ``enwiki-20201220-pages-articles-multistream.xml.bz2`` "except that we preserve
the punctuation and section information". wikIR's published collections (wikIR59k, ``reproduce_datasets.sh``)
were built with ``-first -skip`` and the defaults ``-mlen 200 -mrel 5 -val 1000 -test 1000 -rand 27355``:

* every article of the main namespace is parsed by :func:`~lit_docemb.data.corpora.wikipedia_formats.wikitext_to_document`
  (templates, references, tables and boilerplate sections such as "References" removed; headings kept);
* its **first sentence** (the first sentence of the lead, :func:`~lit_docemb.data.core.text.split_sentences`) is the
  query of WIKIRS62K (``queries="first_sentence"``); WIKIR62K uses the **title** (``queries="title"``, ``-title``);
* the first sentence is removed from the document (``skip_first_sentence``, ``-skip``), so the query is not in
  the text it should retrieve;
* an article is a document when at least ``min_document_words`` words remain (``-mlen``, 200);
* **relevance 2**: the query's own article; **relevance 1**: every document the article links to from its first
  sentence (``links="first_sentence"``, ``-first``) or from anywhere (``links="all"``); a link through a redirect
  counts as a link to its target (wikIR matched link targets to titles only);
* a query is kept when it has at least ``min_relevant`` relevant documents, its own article included (``-mrel``,
  5); ``validation_queries`` and ``test_queries`` of them (1000 each) are drawn with ``seed`` (27355), the rest is
  the training split;
* ``<split>/BM25.res``: BM25's top ``bm25_depth`` (100, ``-k``) of each query, the run the hard negatives come
  from (Graph-RoBERTa: "one hard negative from the top 100 BM25 retrieved candidates").

Where the papers are silent, and what is done here:

* **case**: wikIR lowercases (``-low``); Graph-RoBERTa names punctuation and sections as what it kept and says
  nothing of case. Case is kept: RoBERTa is cased, and a lowercased heading would no longer read as a heading.
* **document length**: whole articles are kept (wikIR's ``-ld`` default, no truncation); the model keeps up to
  100 passages of ~100 words. Words are counted as whitespace-separated tokens of the text left after the first
  sentence (wikIR counts its cleaned lowercase tokens).
* **how sections are stored**: ``documents.csv``'s ``text_right`` keeps the structure as plain text, one
  blank-line-separated block per section, the heading on the block's first line and the section's paragraphs
  on the following lines; :func:`~lit_docemb.data.corpora.wikir.wikir_sections` reads it back. A document whose sections
  do not read back as they were written is counted under ``sections_not_recovered``: a heading that does not read
  as one (see :func:`~lit_docemb.data.corpora.wikipedia_formats.looks_like_heading`: longer than 12 words, a lowercase
  start, final punctuation, a section before it ending with ``:``, or a headed first section, which reads as the
  lead) joins the section before; a section whose heading renders empty may have its first line read as one.
* **ids**: documents and queries are numbered by Wikipedia page id (wikIR numbers articles in reading order).
* the BM25 settings of the run (wikIR's ``rank_bm25`` defaults are ``k1=1.5, b=0.75``) are ``bm25_k1``/``bm25_b``.

Memory: the titles, queries and resolved links of every article, then (for BM25) every document's text and tokens;
the 2.4M documents of the English dump need tens of GB. Written beside the collection: ``build.json``, the
settings and counts of the build.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from xml.etree.ElementTree import ParseError

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import DECOMPRESSION_ERRORS, require_path
from lit_docemb.errors import ConfigError

QueryKind = Literal["first_sentence", "title"]
LinkScope = Literal["first_sentence", "all"]
DUMP_LAYOUT = "MediaWiki XML dumps enwiki-<date>-pages-articles[-multistream][N].xml.bz2 (or .xml): files or folders"
_SENTENCE_END = re.compile(r"[.!?]")
_HEADING_LINE = re.compile(r"^=+[^=\n].*=+[ \t]*$", re.MULTILINE)


@dataclass
class QueryArticle:
    """What the build keeps of a document's article to make it a query: its text and the titles it links to."""

    document_id: str
    query: str
    links: list[str] = field(default_factory=list)


def dump_files(inputs: Sequence[str]) -> list[str]:
    """The dump files of ``inputs``: each a ``.xml``/``.xml.bz2`` file, or a folder whose such files are read in
    name order."""
    files: list[str] = []
    for given in inputs:
        path = require_path(given, "Wikipedia dump", DUMP_LAYOUT)
        found = (sorted(str(p) for p in path.iterdir() if p.name.endswith((".xml", ".xml.bz2"))) if path.is_dir()
                 else [str(path)])
        if not found:
            raise ConfigError(f"--input: no .xml or .xml.bz2 file in {given!r}; expected {DUMP_LAYOUT}")
        files.extend(found)
    return files


def lead_text(document: Document) -> str:
    """The text of the article's lead (its first section when untitled), "" when it has none."""
    return document.sections[0].text if document.sections and not document.sections[0].heading else ""


def without_first_sentence(sections: list[Section], first_sentence: str) -> list[Section]:
    """``sections`` with ``first_sentence`` (its words, whatever whitespace is between them in the lead) cut from
    the lead (a lead left empty is dropped)."""
    found = re.search(r"\s+".join(map(re.escape, first_sentence.split())), sections[0].text)
    rest = sections[0].text[found.end():].strip() if found else sections[0].text
    return ([Section("", rest)] if rest else []) + sections[1:]


def first_sentence_links(title: str, page_id: str, wikitext: str, first_sentence: str) -> list[str]:
    """The normalised titles the first sentence links to, in order.

    The parser collects the links of a whole page; this finds the shortest prefix of the lead's wikitext, cut after
    a ``.``/``!``/``?``, whose rendered lead starts with the whole first sentence (a binary search over the cuts, so
    a long infobox costs a few renders, not one per full stop), and returns that prefix's links.
    """
    from lit_docemb.data.corpora.wikipedia_formats import wikitext_to_document

    heading = _HEADING_LINE.search(wikitext)
    lead_end = heading.start() if heading else len(wikitext)
    cuts = [match.end() for match in _SENTENCE_END.finditer(wikitext, 0, lead_end)] + [lead_end]
    target = " ".join(first_sentence.split())
    low, high, links = 0, len(cuts) - 1, None
    while low <= high:
        middle = (low + high) // 2
        prefix = wikitext_to_document(title, page_id, wikitext[:cuts[middle]])
        if " ".join(lead_text(prefix).split()).startswith(target):
            links, high = prefix.metadata["links"], middle - 1
        else:
            low = middle + 1
    return links or []


def structured_text(sections: list[Section]) -> str:
    """The sections as ``documents.csv`` stores them: one block per section (heading line, then its paragraphs one
    per line), blocks separated by a blank line; the lead has no heading line."""
    blocks = []
    for section in sections:
        body = "\n".join(line.strip() for line in section.text.split("\n") if line.strip())
        blocks.append(f"{section.heading}\n{body}" if section.heading else body)
    return "\n\n".join(blocks)


def _write_csv(path: Path, header: tuple[str, str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)


class WikirBuilder:
    """One build: reads the dumps once, writing ``documents.csv`` as it goes, then writes the three splits.

    Args:
        output: The collection folder (created; the files of a previous build there are replaced).
        queries: ``"first_sentence"`` (WIKIRS62K) or ``"title"`` (WIKIR62K).
        links: Links that make a document relevant (1): ``"first_sentence"`` (wikIR's ``-first``) or ``"all"``.
        skip_first_sentence: Remove the first sentence from the documents (wikIR's ``-skip``).
        min_document_words: Words an article needs, after the first sentence is removed, to be a document.
        min_relevant: Relevant documents a query needs, its own article included.
        validation_queries: Queries drawn for the validation split.
        test_queries: Queries drawn for the test split.
        bm25_depth: Documents per query in each split's ``BM25.res``.
        bm25_k1: BM25's term-frequency saturation.
        bm25_b: BM25's length normalisation.
        seed: Seed of the split draw.
    """

    def __init__(self, output: str, queries: QueryKind = "first_sentence", links: LinkScope = "first_sentence",
                 skip_first_sentence: bool = True, min_document_words: int = 200, min_relevant: int = 5,
                 validation_queries: int = 1000, test_queries: int = 1000, bm25_depth: int = 100,
                 bm25_k1: float = 1.5, bm25_b: float = 0.75, seed: int = 27355) -> None:
        for name, value, least in [("min_document_words", min_document_words, 1), ("min_relevant", min_relevant, 1),
                                   ("validation_queries", validation_queries, 1), ("test_queries", test_queries, 1),
                                   ("bm25_depth", bm25_depth, 1)]:
            if value < least:
                raise ConfigError(f"--{name}: must be at least {least}, got {value}")
        self.output = Path(output)
        self.settings = {"queries": queries, "links": links, "skip_first_sentence": skip_first_sentence,
                         "min_document_words": min_document_words, "min_relevant": min_relevant,
                         "validation_queries": validation_queries, "test_queries": test_queries,
                         "bm25_depth": bm25_depth, "bm25_k1": bm25_k1, "bm25_b": bm25_b, "seed": seed}
        self.stats: Counter = Counter()
        self.title_ids: dict[str, str] = {}
        self.redirects: dict[str, str] = {}
        self.query_articles: list[QueryArticle] = []

    def article_rows(self, paths: list[str]) -> Iterator[tuple[str, str]]:
        """``(id, structured text)`` of every document of the dumps, recording its title and query on the way."""
        from lit_docemb.data.corpora.wikipedia_formats import iter_xml_pages, normalize_title, wikitext_to_document
        from lit_docemb.data.core.text import split_sentences
        from lit_docemb.data.corpora.wikir import wikir_sections

        settings, stats = self.settings, self.stats
        for path in paths:
            pages = iter_xml_pages(path, stats)
            while True:
                try:
                    page = next(pages, None)
                except (ParseError, *DECOMPRESSION_ERRORS) as err:
                    raise ConfigError(f"--input: {path} is not a complete MediaWiki dump ({err}); download it "
                                      "again") from None
                if page is None:
                    break
                if page.namespace != 0:
                    stats["non_article_namespace"] += 1
                    continue
                document = wikitext_to_document(page.title, page.page_id, page.text)
                title = normalize_title(page.title)
                if page.redirect is not None or "redirect" in document.metadata:
                    self.redirects[title] = normalize_title(page.redirect or document.metadata.get("redirect", ""))
                    stats["redirect"] += 1
                    continue
                sentences = split_sentences(lead_text(document))
                first = sentences[0] if sentences else ""
                sections = (without_first_sentence(document.sections, first)
                            if first and settings["skip_first_sentence"] else document.sections)
                text = structured_text(sections)
                if len(text.split()) < settings["min_document_words"]:
                    stats["short_article"] += 1
                    continue
                if [s.heading for s in sections] != [s.heading for s in wikir_sections(text)]:
                    stats["sections_not_recovered"] += 1  # see the module docstring
                self.title_ids[title] = page.page_id
                stats["document"] += 1
                needs_first = "first_sentence" in (settings["queries"], settings["links"])
                if needs_first and not first:
                    stats["no_first_sentence"] += 1  # no lead: no first-sentence query or links, still a document
                else:
                    query = page.title if settings["queries"] == "title" else " ".join(first.split())
                    targets = (first_sentence_links(page.title, page.page_id, page.text, first)
                               if settings["links"] == "first_sentence" else document.metadata["links"])
                    self.query_articles.append(QueryArticle(page.page_id, query, targets))
                yield page.page_id, text

    def judgements(self) -> dict[str, list[tuple[str, int]]]:
        """{query id: [(document id, relevance)]}, the own article first, of the queries with ``min_relevant``."""
        qrels = {}
        for article in self.query_articles:
            linked = dict.fromkeys(self.title_ids.get(self.redirects.get(title, title)) for title in article.links)
            linked.pop(None, None)
            linked.pop(article.document_id, None)
            judged = [(article.document_id, 2)] + [(document_id, 1) for document_id in linked]
            if len(judged) < self.settings["min_relevant"]:
                self.stats["query_with_too_few_relevant"] += 1
                continue
            qrels[article.document_id] = judged
        return qrels

    def split(self, query_ids: list[str]) -> dict[str, list[str]]:
        """{split: query ids}: validation and test drawn with the seed, the rest training (in id order)."""
        validation, test = self.settings["validation_queries"], self.settings["test_queries"]
        if len(query_ids) <= validation + test:
            raise ConfigError(f"--validation_queries/--test_queries: {len(query_ids)} queries qualify (at least "
                              f"{self.settings['min_relevant']} relevant documents each), not more than the "
                              f"{validation} + {test} asked for; lower them, --min_relevant or --min_document_words, "
                              "or read a larger dump")
        drawn = random.Random(self.settings["seed"]).sample(sorted(query_ids, key=int), validation + test)
        held_out = set(drawn)
        return {"training": [q for q in sorted(query_ids, key=int) if q not in held_out],
                "validation": sorted(drawn[:validation], key=int), "test": sorted(drawn[validation:], key=int)}

    def build(self, inputs: Sequence[str]) -> dict:
        """Builds the collection from the dumps ``inputs``; returns what ``build.json`` records."""
        from lit_docemb.data.retrieval.bm25 import BM25Index
        from lit_docemb.data.retrieval.trec import write_run
        from lit_docemb.data.corpora.wikir import iter_wikir_documents

        paths = dump_files(inputs)
        self.output.mkdir(parents=True, exist_ok=True)
        documents_path = self.output / "documents.csv"
        _write_csv(documents_path, ("id_right", "text_right"), self.article_rows(paths))
        qrels = self.judgements()
        queries = {article.document_id: article.query for article in self.query_articles}
        splits = self.split(list(qrels))
        index = BM25Index(list(iter_wikir_documents([str(documents_path)], Counter())), self.settings["bm25_k1"],
                          self.settings["bm25_b"])
        for name, query_ids in splits.items():
            folder = self.output / name
            folder.mkdir(exist_ok=True)
            _write_csv(folder / "queries.csv", ("id_left", "text_left"), ([q, queries[q]] for q in query_ids))
            (folder / "qrels").write_text("".join(f"{q}\t0\t{d}\t{r}\n" for q in query_ids for d, r in qrels[q]),
                                          encoding="utf-8")
            run = index.run({q: queries[q] for q in query_ids}, self.settings["bm25_depth"])
            write_run(run, folder / "BM25.res", run_name="BM25")
        record = {"dumps": paths, "settings": self.settings, "documents": self.stats["document"],
                  "queries": {name: len(ids) for name, ids in splits.items()},
                  "counts": dict(sorted(self.stats.items()))}
        (self.output / "build.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return record
