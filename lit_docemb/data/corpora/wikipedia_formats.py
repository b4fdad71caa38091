"""Readers for the two Wikipedia formats users download, producing sectioned :class:`Document` records.

**Hugging Face parquet** (``wikimedia/wikipedia``, columns ``id, url, title, text``). That release was built
with mwparserfromhell: each section is ``section.strip_code().strip()`` (heading first, as plain text) and
sections are joined by a blank line; templates, refs, tables and file links are gone, category links stay as
bare names at the end. Headings therefore survive only as short lines, and :func:`split_plain_text_sections`
recovers them with this heuristic: a line is a heading when

- it is the first line of a blank-line-separated block, neither the first block (the lead) nor one after a
  block ending with ``:`` (a list it introduces);
- it has at most 100 characters and 12 words, contains a letter or digit, does not start lowercase or with
  markup (``* # - • | = [ { <``) and contains no ``://``;
- after closing quotes/brackets it does not end with ``. ! ? : ; , …``.

The heading level is lost, so subsections stand alone ("Early life", not "Biography / Early life").
Everything from the first boilerplate heading on is dropped (appendices come last, and category names trail
them as one more block).
:func:`iter_wikipedia_parquet` streams files with ``pyarrow.parquet.ParquetFile.iter_batches`` (one row group
decoded at a time, ``batch_size`` rows converted at a time). For random access, let ``datasets`` memory-map
the same files and convert rows on demand::

    table = datasets.load_dataset("parquet", data_files=paths, split="train")
    document = wikipedia_record_to_document(table[12345])

**MediaWiki XML dumps** (``enwiki-*-pages-articles*.xml.bz2`` or plain ``.xml``). :func:`iter_wikipedia_xml`
streams them with :func:`~lit_docemb.data.core.reading.open_binary` + ``ElementTree.iterparse`` and clears the root
after every page, so memory is one page whatever the dump size. Tags are matched by local name, so every export
schema version (``{http://www.mediawiki.org/xml/export-0.10/}`` or 0.11...) works. :func:`wikitext_to_document`
turns wikitext into sections with a hand-written converter, in passes that are each linear in the input:

1. comments; then the tags dropped with their content (``<ref>``, ``<math>``, ``<gallery>``...); an
   unterminated one loses only its opening tag;
2. templates and parameters ``{{...}}``/``{{{...}}}``, matched by brace runs on a stack like MediaWiki's
   preprocessor; an unclosed ``{{`` (or stray ``}}``) is dropped and the text after it is kept;
3. tables ``{| ... |}`` at line starts (nested); an unclosed table ends at the next section heading;
4. line by line: headings (``== H ==`` → section, ``=== Sub ===`` → "H / Sub"), internal links matched per
   line on a stack (file captions may hold links; unclosed ``[[`` keeps its text), external links → label,
   bold/italic quotes, remaining HTML tags, magic words, entities, list markers.

Empty sections and boilerplate sections (with their subsections) are dropped; ``metadata["links"]`` still
lists the links of every section, "See also" included. A comment left open hides the rest of the page, as
in MediaWiki.

Why not mwparserfromhell: it is much slower on ordinary wikitext, quadratic on unclosed ``<ref>`` tags (which
dumps do contain), a new dependency, and the links, categories and section paths would still need code around it;
this converter is linear on any input (figures: docs/performance.md).

Limitations: templates are removed, never expanded, so text that comes only from templates (``{{convert}}``
quantities, ``{{lang}}`` words, infobox facts, navboxes) is missing and may leave a gap ("a height of  m"
is tidied only for empty parentheses and space before punctuation); ``<math>`` is dropped; links inside
file captions and templates are not collected; interwiki links are recognised by a lowercase prefix;
only the English namespace names are known.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import Utf8Repair, open_binary

DEFAULT_BOILERPLATE_HEADINGS: tuple[str, ...] = (
    "See also", "References", "External links", "Further reading", "Notes", "Notes and references",
    "References and notes", "Footnotes", "Citations", "Sources", "Works cited",
)
"""Section headings (compared case-insensitively) whose sections carry no article prose."""

HF_COLUMNS = ("id", "url", "title", "text")


# ---------------------------------------------------------------------------------------------------------------------
# Hugging Face parquet (plain text with heading lines)
# ---------------------------------------------------------------------------------------------------------------------

_BLOCK_BREAK = re.compile(r"\n[ \t]*\n\s*")
_MAX_HEADING_CHARS = 100
_MAX_HEADING_WORDS = 12


def looks_like_heading(line: str) -> bool:
    """Whether a stripped plain-text line reads as a section heading (see the module docstring)."""
    if not line or len(line) > _MAX_HEADING_CHARS or len(line.split()) > _MAX_HEADING_WORDS:
        return False
    if line[0].islower() or line[0] in "*#-•|=[{<" or "://" in line or not any(c.isalnum() for c in line):
        return False
    tail = line.rstrip("\"'”’»)]")
    return bool(tail) and tail[-1] not in ".!?:;,…"


def split_plain_text_sections(text: str) -> list[Section]:
    """Splits mwparserfromhell-style plain text into sections; the lead has heading "" (may be empty)."""
    headings, paragraphs = [""], [[]]
    after_colon = True  # the first block is the lead
    for block in _BLOCK_BREAK.split(text.strip()):
        lines = [line.strip() for line in block.split("\n")]
        if not after_colon and looks_like_heading(lines[0]):
            headings.append(lines[0])
            paragraphs.append([])
            lines = lines[1:]
        body = "\n".join(line for line in lines if line)
        if body:
            paragraphs[-1].append(body)
        after_colon = lines[-1].endswith(":") if lines else False
    return [Section(heading, "\n\n".join(body)) for heading, body in zip(headings, paragraphs)]


def wikipedia_record_to_document(
    record: dict[str, Any], *, boilerplate_headings: Collection[str] = DEFAULT_BOILERPLATE_HEADINGS
) -> Document:
    """One ``wikimedia/wikipedia`` row (``id, url, title, text``) → Document with id ``wiki:<id>``.

    Sections are recovered by :func:`split_plain_text_sections`. Everything from the first boilerplate heading
    on is dropped: the Manual of Style puts these appendices last, and in this release the category names
    trail the last one as a block that would otherwise read as one more section. Empty sections are dropped.
    """
    boilerplate = {heading.casefold() for heading in boilerplate_headings}
    sections = []
    for section in split_plain_text_sections(record.get("text") or ""):
        if section.heading.casefold() in boilerplate:
            break
        if section.text:
            sections.append(section)
    metadata = {"url": record["url"]} if record.get("url") else {}
    return Document(id=f"wiki:{record['id']}", title=record.get("title") or "", sections=sections,
                    metadata=metadata)


def iter_wikipedia_parquet(
    paths: str | list[str],
    batch_size: int = 256,
    stats: Counter | None = None,
    boilerplate_headings: Collection[str] = DEFAULT_BOILERPLATE_HEADINGS,
) -> Iterator[Document]:
    """Streams Documents from ``wikimedia/wikipedia`` parquet files, in file and row order.

    Args:
        paths: Parquet files (a single path is accepted too).
        batch_size: Rows converted to Python at a time; pyarrow decodes one row group at a time.
        stats: Incremented with ``"empty"`` (no text left) and ``"document"`` (yielded).
        boilerplate_headings: Sections to drop, see :data:`DEFAULT_BOILERPLATE_HEADINGS`.
    """
    import pyarrow.parquet as pq

    stats = Counter() if stats is None else stats
    for path in [paths] if isinstance(paths, str) else paths:
        parquet_file = pq.ParquetFile(path)
        columns = [name for name in HF_COLUMNS if name in parquet_file.schema_arrow.names]
        for batch in parquet_file.iter_batches(batch_size=batch_size, columns=columns):
            for record in batch.to_pylist():
                document = wikipedia_record_to_document(record, boilerplate_headings=boilerplate_headings)
                if document.is_empty():
                    stats["empty"] += 1
                    continue
                stats["document"] += 1
                yield document


# ---------------------------------------------------------------------------------------------------------------------
# MediaWiki XML dumps
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class WikiPage:
    """One ``<page>`` of a dump: its latest revision's wikitext and, for redirects, the target title."""

    title: str
    namespace: int
    page_id: str
    text: str
    redirect: str | None = None


def _local_name(tag: str) -> str:
    return tag.rpartition("}")[2]


def _read_page(page: ET.Element, namespace_keys: dict[str, int]) -> WikiPage:
    fields: dict[str, Any] = {"title": "", "ns": None, "id": "", "text": "", "redirect": None}
    for child in page:
        name = _local_name(child.tag)
        if name in ("title", "ns", "id"):
            fields[name] = (child.text or "").strip()
        elif name == "redirect":
            fields["redirect"] = child.get("title", "")
        elif name == "revision":
            text = next((c for c in child if _local_name(c.tag) == "text"), None)
            fields["text"] = "" if text is None or text.text is None else text.text
    namespace = fields["ns"]
    if namespace is None or not namespace.lstrip("-").isdigit():  # old schemas have no <ns>: use the title
        prefix, sep, _ = fields["title"].partition(":")
        namespace = namespace_keys.get(prefix.casefold(), 0) if sep else 0
    return WikiPage(fields["title"], int(namespace), fields["id"], fields["text"], fields["redirect"])


def iter_xml_pages(path: str, stats: Counter | None = None) -> Iterator[WikiPage]:
    """Streams every ``<page>`` of a MediaWiki export in constant memory (any schema version). Exports are UTF-8:
    undecodable bytes are replaced by U+FFFD, each run counted as ``stats["undecodable_sequence"]``."""
    namespace_keys: dict[str, int] = {}
    with open_binary(path) as raw:  # .bz2 (multistream too), .gz, .xz or plain XML
        stream = Utf8Repair(raw, Counter() if stats is None else stats)
        root = None
        for event, element in ET.iterparse(stream, events=("start", "end")):
            if event == "start":
                root = element if root is None else root
                continue
            name = _local_name(element.tag)
            if name == "namespace" and element.text and element.get("key", "").lstrip("-").isdigit():
                namespace_keys[element.text.strip().casefold()] = int(element.get("key"))
            elif name == "siteinfo":
                root.clear()
            elif name == "page":
                page = _read_page(element, namespace_keys)
                root.clear()  # drops this page and everything before it
                yield page


def iter_wikipedia_xml(
    path: str,
    namespaces: Collection[int] | None = (0,),
    skip_redirects: bool = True,
    stats: Counter | None = None,
    boilerplate_headings: Collection[str] = DEFAULT_BOILERPLATE_HEADINGS,
) -> Iterator[Document]:
    """Streams Documents from a MediaWiki XML dump (``.xml.bz2``, ``.xml.gz`` or ``.xml``).

    Args:
        path: The dump file.
        namespaces: Namespace numbers to keep (0: articles); ``None`` keeps all.
        skip_redirects: Skip redirect pages; if False they are yielded without sections, with
            ``metadata["redirect"]`` set to the normalised target.
        stats: Incremented with ``"non_article_namespace"``, ``"redirect"``, ``"empty"`` (nothing left after
            markup removal), ``"undecodable_sequence"`` (bytes replaced by U+FFFD) and ``"document"`` (yielded).
        boilerplate_headings: Sections to drop, see :data:`DEFAULT_BOILERPLATE_HEADINGS`.
    """
    stats = Counter() if stats is None else stats
    for page in iter_xml_pages(path, stats):
        if namespaces is not None and page.namespace not in namespaces:
            stats["non_article_namespace"] += 1
            continue
        is_redirect = page.redirect is not None or _REDIRECT.match(page.text) is not None
        if is_redirect and skip_redirects:
            stats["redirect"] += 1
            continue
        document = wikitext_to_document(page.title, page.page_id, page.text,
                                        boilerplate_headings=boilerplate_headings)
        if is_redirect:
            document.metadata.setdefault("redirect", normalize_title(page.redirect or ""))
        elif document.is_empty():
            stats["empty"] += 1
            continue
        stats["document"] += 1
        yield document


# ---------------------------------------------------------------------------------------------------------------------
# Wikitext → sections
# ---------------------------------------------------------------------------------------------------------------------

_REDIRECT = re.compile(r"\s*#REDIRECT\s*:?\s*\[\[([^\]|\n]*)", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_DROPPED_TAGS = ("ref", "references", "math", "chem", "ce", "gallery", "timeline", "score", "graph", "mapframe",
                 "maplink", "syntaxhighlight", "source", "pre", "imagemap", "templatedata", "templatestyles",
                 "hiero", "inputbox", "categorytree", "indicator", "section")
_DROPPED_TAG_OPEN = re.compile(r"<(%s)(?=[\s/>])[^<>]{0,1000}?(/?)>" % "|".join(_DROPPED_TAGS), re.IGNORECASE)
_DROPPED_TAG_CLOSE = {tag: re.compile(r"</%s\s*>" % tag, re.IGNORECASE) for tag in _DROPPED_TAGS}
_BRACE_RUN = re.compile(r"\{{2,}|\}{2,}")
_LINK_TOKEN = re.compile(r"\[\[|\]\]")
_MAX_LINK_DEPTH = 16
_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:|mailto:|//)[^\s\[\]]{1,2000}(?:[ \t]([^\[\]\n]{0,500}))?\]",
                            re.IGNORECASE)
_BOLD_ITALIC = re.compile(r"'{2,}")
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>\n]{0,500})?/?>")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_LIST_MARKER = re.compile(r"^[*#:;]+\s*")
_TABLE_OR_RULE_LINE = re.compile(r"\||!\s|!.*!!|----")
_EMPTY_PARENTHESES = re.compile(r"\(\s*[,;]?\s*\)")
_PARENTHESIS_LEADING_PUNCTUATION = re.compile(r"\(\s*[,;]\s*")
_PARENTHESIS_TRAILING_PUNCTUATION = re.compile(r"\s*[,;]\s*\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r" ([,.;])(?= |$)")
_REPEATED_COMMA = re.compile(r",(?: ?,)+")

_MEDIA_NAMESPACES = {"file", "image", "media"}
_NON_ARTICLE_NAMESPACES = _MEDIA_NAMESPACES | {
    "category", "talk", "user", "wikipedia", "wp", "project", "help", "template", "portal", "draft", "module",
    "special", "mediawiki", "book", "timedtext", "gadget", "gadget definition", "topic", "education program",
}
_INTERWIKI_PREFIX = re.compile(r"[a-z][a-z0-9-]*")
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z]+)*|simple")
_INVALID_TITLE_CHARS = set("[]{}<>|")


def normalize_title(title: str) -> str:
    """Link target → article title: entities decoded, ``#fragment`` dropped, ``_`` → space, first letter upper.

    Returns "" for an empty or invalid title.
    """
    title = " ".join(html.unescape(title).split("#", 1)[0].replace("_", " ").split())
    if _INVALID_TITLE_CHARS.intersection(title):
        return ""
    return title[:1].upper() + title[1:]


def _remove_dropped_tags(text: str) -> str:
    """Removes ``<ref>...</ref>``, ``<ref .../>``, ``<math>...</math>``...; linear even when unterminated."""
    pieces, position, unterminated = [], 0, set()
    while (opening := _DROPPED_TAG_OPEN.search(text, position)) is not None:
        pieces.append(text[position:opening.start()])
        position = opening.end()
        tag = opening.group(1).lower()
        if opening.group(2) or tag in unterminated:
            continue
        closing = _DROPPED_TAG_CLOSE[tag].search(text, position)
        if closing is None:  # no closing tag anywhere after: drop the opening tag alone, keep the text
            unterminated.add(tag)
        else:
            position = closing.end()
    pieces.append(text[position:])
    return "".join(pieces)


def _template_spans(text: str) -> list[tuple[int, int]]:
    """Spans to delete: outermost ``{{...}}``/``{{{...}}}`` and unmatched runs of 2+ braces.

    Brace runs are matched on a stack as in MediaWiki's preprocessor: a closing run takes 3 braces from the
    innermost opener when both have 3, else 2, and goes on with what is left.
    """
    openers: list[list[int]] = []  # [start, braces left]
    spans: list[tuple[int, int]] = []  # disjoint, sorted
    for run in _BRACE_RUN.finditer(text):
        position, length = run.start(), run.end() - run.start()
        if text[position] == "{":
            openers.append([position, length])
            continue
        while length >= 2 and openers:
            start, count = openers[-1]
            used = 3 if count >= 3 and length >= 3 else 2
            span = (start + count - used, position + used)
            while spans and spans[-1][0] >= span[0]:  # nested spans end inside this one
                spans.pop()
            spans.append(span)
            position, length = position + used, length - used
            openers[-1][1] -= used
            if openers[-1][1] < 2:
                openers.pop()
        if length >= 2:  # stray "}}": nothing open
            spans.append((position, position + length))
    return sorted(spans + [(start, start + count) for start, count in openers])  # + stray "{{"


def _remove_templates(text: str) -> str:
    pieces, position = [], 0
    for start, end in _template_spans(text):
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _parse_heading(line: str) -> tuple[int, str] | None:
    """``== Text ==`` → (2, "Text"); unbalanced ``=`` count as in MediaWiki (the shorter side wins)."""
    line = line.rstrip()
    if len(line) < 3 or line[0] != "=" or line[-1] != "=":
        return None
    level = min(len(line) - len(line.lstrip("=")), len(line) - len(line.rstrip("=")), 6)
    inner = line[level:len(line) - level].strip()
    return (level, inner) if inner else None


def _remove_tables(text: str) -> str:
    """Drops ``{| ... |}`` blocks (nested); an unterminated table ends at the next heading."""
    kept, depth = [], 0
    for line in text.split("\n"):
        stripped = line.lstrip(" \t:")
        if stripped.startswith("{|"):
            depth += 1
        elif depth and stripped.startswith("|}"):
            depth -= 1
        elif depth and _parse_heading(line):
            depth = 0
            kept.append(line)
        elif not depth:
            kept.append(line)
    return "\n".join(kept)


class _RenderedLink:
    """A link already rendered inside an enclosing link's text (e.g. in a file caption)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _piece_text(pieces: list) -> str:
    return "".join(p if isinstance(p, str) else p.text for p in pieces)


def _pipe_trick(target: str, has_namespace: bool) -> str:
    """``[[Paris, Texas|]]`` → "Paris", ``[[Help:Mercury (planet)|]]`` → "Mercury"."""
    name = target.split(":", 1)[1] if has_namespace else target
    return re.sub(r"\s*\([^()]*\)\s*$", "", name).split(",")[0].strip()


def _resolve_link(target_text: str, label: str | None, links: list[str], categories: list[str]) -> str | None:
    """Renders one ``[[target|label]]``, recording article links and categories.

    Returns None for links that are not shown with their text (categories, files, interlanguage links).
    """
    target = target_text.strip()
    leading_colon = target.startswith(":")
    target = target.lstrip(":").strip()
    prefix, sep, rest = target.partition(":")
    namespace = prefix.strip().casefold() if sep else ""
    if not leading_colon and namespace == "category":
        name = normalize_title(rest.strip())
        if name:
            categories.append(name)
        return None
    if not leading_colon and namespace in _MEDIA_NAMESPACES:
        return None
    special = namespace in _NON_ARTICLE_NAMESPACES or namespace.endswith(" talk")
    interwiki = bool(sep) and not special and _INTERWIKI_PREFIX.fullmatch(prefix.strip()) is not None
    if interwiki and label is None and not leading_colon and _LANGUAGE_CODE.fullmatch(prefix.strip()):
        return None  # interlanguage link ([[fr:Paris]]): shown in the sidebar, not in the text
    if label is None:
        display = target
    else:
        display = label.strip() or _pipe_trick(target, special or interwiki)
    if not special and not interwiki:
        title = normalize_title(target)
        if title:
            links.append(title)
    return display


def _render_link(pieces: list, links: list[str], categories: list[str]) -> str | None:
    for index, piece in enumerate(pieces):
        if not isinstance(piece, str):  # a link inside the target: not a link, keep its text
            return _piece_text(pieces)
        if "|" in piece:
            head, _, tail = piece.partition("|")
            label = tail + _piece_text(pieces[index + 1:])
            return _resolve_link("".join(pieces[:index]) + head, label, links, categories)
    return _resolve_link("".join(pieces), None, links, categories)


def _render_links(line: str, links: list[str], categories: list[str]) -> str:
    """Replaces ``[[...]]`` (nested in file captions) by display text; stray brackets are dropped."""
    if "[[" not in line and "]]" not in line:
        return line
    frames: list[list] = [[]]
    link_counts: list[int] = []  # len(links) when each open frame started
    position = 0
    for token in _LINK_TOKEN.finditer(line):
        frames[-1].append(line[position:token.start()])
        position = token.end()
        if token.group() == "[[":
            if len(frames) <= _MAX_LINK_DEPTH:
                frames.append([])
                link_counts.append(len(links))
        elif len(frames) > 1:
            pieces, link_count = frames.pop(), link_counts.pop()
            text = _render_link(pieces, links, categories)
            if text is None:  # a file caption's links are not in the text: forget them
                del links[link_count:]
            frames[-1].append(_RenderedLink(text or ""))
    frames[-1].append(line[position:])
    while len(frames) > 1:  # unclosed "[[": keep what followed it
        pieces = frames.pop()
        frames[-1].extend(pieces)
    return _piece_text(frames[0])


def _clean_inline(line: str, links: list[str], categories: list[str]) -> str:
    line = _render_links(line, links, categories)
    line = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", line)
    line = _BOLD_ITALIC.sub("", line)
    line = _LINE_BREAK_TAG.sub(" ", line)
    line = _HTML_TAG.sub("", line)
    line = " ".join(html.unescape(_MAGIC_WORD.sub("", line)).split())  # single spaces: the subs stay linear
    line = _EMPTY_PARENTHESES.sub("", line)
    line = _PARENTHESIS_LEADING_PUNCTUATION.sub("(", line)
    line = _PARENTHESIS_TRAILING_PUNCTUATION.sub(")", line)
    line = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", line)
    line = _REPEATED_COMMA.sub(",", line)
    return " ".join(line.split())


def _clean_body_line(line: str, links: list[str], categories: list[str]) -> str:
    stripped = line.strip()
    if _TABLE_OR_RULE_LINE.match(stripped):  # rows of a table a template opened, horizontal rules
        return ""
    return _LIST_MARKER.sub("", _clean_inline(stripped, links, categories))


def _join_paragraphs(lines: list[str]) -> str:
    paragraphs, current = [], []
    for line in lines + [""]:
        if line:
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
    return "\n\n".join(paragraphs)


def _keep_sections(sections: Iterable[Section], boilerplate_headings: Collection[str]) -> list[Section]:
    """Drops empty sections and those whose heading (or any " / " part of it) is boilerplate."""
    boilerplate = {heading.casefold() for heading in boilerplate_headings}
    return [s for s in sections
            if s.text and not any(part.casefold() in boilerplate for part in s.heading.split(" / "))]


def wikitext_to_document(
    title: str,
    page_id: str | int,
    wikitext: str,
    *,
    boilerplate_headings: Collection[str] = DEFAULT_BOILERPLATE_HEADINGS,
) -> Document:
    """Wikitext → Document with id ``wiki:<page_id>``, sections, ``metadata["links"]`` and ``["categories"]``.

    Headings of level 3+ are joined to their parents ("History / Early years"); the lead has heading "".
    Empty and boilerplate sections are dropped. ``links`` are the normalised targets of article links whose
    text survives (first occurrence order, no duplicates); ``categories`` the category names. A redirect page
    gives a document without sections and ``metadata["redirect"]``. Never raises on malformed markup.
    """
    metadata: dict[str, Any] = {"links": [], "categories": []}
    document = Document(id=f"wiki:{page_id}", title=title, metadata=metadata)
    redirect = _REDIRECT.match(wikitext)
    if redirect is not None:
        metadata["redirect"] = normalize_title(redirect.group(1))
        return document
    text = _remove_tables(_remove_templates(_remove_dropped_tags(_COMMENT.sub("", wikitext))))
    links: list[str] = []
    categories: list[str] = []
    path: list[tuple[int, str]] = []
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.split("\n"):
        heading = _parse_heading(line)
        if heading is None:
            sections[-1][1].append(_clean_body_line(line, links, categories))
            continue
        level, heading_text = heading
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, _clean_inline(heading_text, links, categories)))
        sections.append((" / ".join(part for _, part in path if part), []))
    document.sections = _keep_sections((Section(h, _join_paragraphs(lines)) for h, lines in sections),
                                       boilerplate_headings)
    metadata["links"] = list(dict.fromkeys(links))
    metadata["categories"] = list(dict.fromkeys(categories))
    return document
