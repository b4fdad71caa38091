"""Real, sectioned documents from text that every installation of our stack already holds (no download).

Three sources, read in this order, each sorted by document id:

* ``"packages"``: the long description (the PyPI README) in each installed distribution's ``METADATA``
  (``importlib.metadata``). Markdown ``#``/setext headings or reStructuredText underlined headings become
  sections; badges, images, HTML, code blocks, tables, link-only lines, URLs and changelog / license /
  contributor sections are dropped. ``id="package:<normalised name>"``, title = the distribution name,
  ``metadata`` keeps the ``Summary:`` one-liner (``"summary"``), the version, the classifiers and their
  ``"Topic :: ..."`` subset (``"topics"``). A paragraph equal to the summary is removed from the body, so the
  summary can serve as a held-out query.
* ``"pydoc"``: the Python reference-manual topics behind ``help("assert")`` (``pydoc_data.topics``).
  ``id="pydoc:<topic>"``, title = the topic's own heading (not repeated in the body).
* ``"stdlib"``: docstrings of the standard library's public modules, read with :mod:`ast` (nothing is
  imported): the module docstring's first line is the summary, its rest the lead section, and each public
  top-level class or function with a docstring a section headed by its name. ``id="stdlib:<module>"``.

Every document has ``metadata["source"]`` and ``metadata["summary"]`` (``""`` for pydoc topics). Documents
shorter than ``min_words`` after cleaning, a second installation of the same distribution, and exact or near
duplicates of an earlier document (word 5-gram MinHash, estimated Jaccard >= ``near_duplicate_jaccard``;
e.g. forks that ship the same README) are skipped and counted in ``stats``.
"""

from __future__ import annotations

import ast
import html
import importlib.metadata
import logging
import os
import re
import sysconfig
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, NamedTuple

import numpy as np

from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import require

log = logging.getLogger(__name__)

SOURCES = ("packages", "pydoc", "stdlib")

#: Sections whose heading matches are not prose about the package (changelogs, legal, people, navigation).
SKIPPED_HEADING = re.compile(
    r"^\W*(v?\d+(\.\d+)+\b.*|unreleased.*|change\s*log.*|changes|history|release\s+(notes|history).*|news|"
    r"what'?s\s+new.*|(changed|new)\s+in\s+v?\d.*|contributors?|contributing|authors?|credits|maintainers|"
    r"licen[cs]e.*|copyright.*|"
    r"sponsors?.*|backers|acknowledge?ments?|citation|cite|citing.*|table\s+of\s+contents|contents|toc|"
    r"badges?|star\s+history)\W*$",
    re.IGNORECASE,
)
_STDLIB_SKIPPED_DIRS = {"test", "tests", "idlelib", "lib2to3", "ensurepip", "turtledemo", "site-packages",
                        "dist-packages", "encodings", "__pycache__", "pydoc_data"}

# ---------------------------------------------------------------------------------------------- inline markup
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|\[([^\]]+)\]\[[^\]]*\]")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`__?")
_RST_ROLE = re.compile(r":[\w:.+-]+:`~?([^`]+)`")
_URL = re.compile(r"<?https?://\S+|<?www\.\S+")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def clean_inline(line: str) -> str:
    """Removes Markdown / reST inline markup, keeping the visible words: images and URLs go, links keep their
    text, roles/code/emphasis lose their markers."""
    line = _MD_IMAGE.sub(" ", line)
    line = _MD_LINK.sub(lambda m: m.group(1) or m.group(2) or "", line)
    line = _RST_LINK.sub(r"\1", line)
    line = _RST_ROLE.sub(r"\1", line)
    line = re.sub(r"\|[\w .-]+\|_{0,2}", " ", line)  # reST substitutions (badges): |Build-Status|
    line = re.sub(r"`([^`]+)`_{1,2}", r"\1", line)  # reST named references
    line = _HTML_TAG.sub(" ", html.unescape(line))
    line = _URL.sub(" ", line)
    line = re.sub(r"`+", "", line)
    line = re.sub(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", r"\1", line)  # not __x__: Python's dunder names stay
    line = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"\1", line)
    line = re.sub(r"(?<!\w)_(?=[^\s_])([^_]+?)(?<=[^\s_])_(?!\w)", r"\1", line)
    line = re.sub(r"\b([A-Za-z][\w-]*[A-Za-z0-9])__?(?=[\s.,;:!?)]|$)", r"\1", line)  # reST refs: asyncio_
    return re.sub(r"[ \t]+", " ", line).strip()


def _non_link_words(raw: str) -> int | None:
    """Words of ``raw`` outside links, images, badges and URLs; ``None`` if ``raw`` has no link at all."""
    stripped = re.sub(r"<a\b.*?</a>|<img[^>]*>", " ", raw, flags=re.DOTALL | re.IGNORECASE)
    for pattern in (_MD_IMAGE, _MD_LINK, _RST_LINK, _URL, re.compile(r"\|[\w .-]+\|_{0,2}|`[^`]+`__?")):
        stripped = pattern.sub(" ", stripped)
    if stripped == raw:
        return None
    return len(re.findall(r"[A-Za-z]{2,}", clean_inline(stripped)))


# ------------------------------------------------------------------------------------------- block structure
def _strip_markdown_blocks(text: str) -> list[str]:
    """Markdown lines with HTML comments, fenced code and tables removed; HTML headings become ``#``."""
    text = re.sub(r"<!--.*?-->", "\n", text, flags=re.DOTALL)
    text = re.sub(r"<h([1-6])[^>]*>(.*?)</h\1>", lambda m: "\n" + "#" * int(m.group(1)) + " " + m.group(2) + "\n",
                  text, flags=re.DOTALL | re.IGNORECASE)
    text = re.sub(r"<(pre|code|table|picture|svg|details)\b.*?</\1>", "\n", text, flags=re.DOTALL | re.IGNORECASE)
    lines, fence = [], None
    for line in text.splitlines():
        marker = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is not None:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            continue
        if marker:
            fence = marker.group(1)
            continue
        if re.match(r"^\s*\|.*\|\s*$", line) or re.match(r"^\s*\|?\s*:?-{3,}:?\s*\|", line):
            continue  # table row / delimiter row
        lines.append(line)
    return lines


class RawSection(NamedTuple):
    """A section before cleaning: heading, nesting level (0 for the lead, 1 for top-level headings) and lines."""

    heading: str
    level: int
    lines: list[str]


def markdown_sections(text: str) -> list[RawSection]:
    """Splits Markdown at ATX (``#``, level = number of ``#``) and setext (``===`` 1, ``---`` 2) headings."""
    lines = _strip_markdown_blocks(text)
    sections = [RawSection("", 0, [])]
    for i, line in enumerate(lines):
        atx = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        underline = re.match(r"^\s{0,3}(=+|-+)\s*$", line)
        if atx:
            sections.append(RawSection(clean_inline(atx.group(2)), len(atx.group(1)), []))
        elif (underline and i > 0 and lines[i - 1].strip() and (i < 2 or not lines[i - 2].strip())
              and sections[-1].lines and sections[-1].lines[-1] == lines[i - 1]):
            sections[-1].lines.pop()
            level = 1 if underline.group(1)[0] == "=" else 2
            sections.append(RawSection(clean_inline(lines[i - 1]), level, []))
        elif not re.match(r"^\s*([-*_]\s*){3,}$", line):  # thematic breaks
            sections[-1].lines.append(line)
    return sections


_RST_ADORNMENT = re.compile(r"^([=\-~`^\"'#*+_.:<>])\1{2,}\s*$")


def rst_sections(text: str) -> list[RawSection]:
    """Splits reStructuredText (or Sphinx/pydoc plain text) at underlined or overlined headings (levels in
    order of first appearance of each adornment style); directives (``.. image::``, ``.. code::``, comments,
    link targets) with their indented bodies and literal blocks after ``::`` are dropped."""
    lines = text.splitlines()
    sections = [RawSection("", 0, [])]
    styles: list[tuple[str, bool]] = []  # adornment (character, overlined) in order of first use

    def open_section(heading: str, style: tuple[str, bool]) -> None:
        if style not in styles:
            styles.append(style)
        sections.append(RawSection(clean_inline(heading), styles.index(style) + 1, []))

    i, skip_indent = 0, None
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                i += 1
                continue
            skip_indent = None
            sections[-1].lines.append("")  # the skipped block separated paragraphs
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.match(r"^\s*\.\.(\s|$)", line):
            skip_indent = indent
        elif _RST_ADORNMENT.match(stripped) and i + 2 < len(lines) and _RST_ADORNMENT.match(lines[i + 2].strip()):
            open_section(nxt, (stripped[0], True))
            i += 2
        elif stripped and not _RST_ADORNMENT.match(stripped) and _RST_ADORNMENT.match(nxt.strip()) \
                and len(nxt.strip()) >= min(len(stripped), 3) and indent == 0:
            open_section(stripped, (nxt.strip()[0], False))
            i += 1
        elif _RST_ADORNMENT.match(stripped) or re.match(r"^\s*(\+[-=+]+\+?|\|.*\|)\s*$", line):
            pass  # transition line or grid-table row
        else:
            if stripped.endswith("::"):
                line = line.rstrip()[:-2].rstrip() + ":" if stripped != "::" else ""
                skip_indent = indent
            sections[-1].lines.append(line)
        i += 1
    return sections


# ----------------------------------------------------------------------------------------------- paragraphs
def _paragraphs(lines: list[str]) -> list[tuple[int, list[str]]]:
    """Groups raw lines into blank-line separated paragraphs, each with its indentation; a list item starts
    a new paragraph."""
    paragraphs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    for line in [*lines, ""]:
        bullet = re.match(r"^\s*([-*+•]|\d+[.)])\s+", line)
        if (not line.strip() or bullet) and current:
            paragraphs.append((len(current[0]) - len(current[0].lstrip()), current))
            current = []
        if line.strip():
            current.append(line)
    return paragraphs


def _looks_like_code(text: str, cleaned: str) -> bool:
    """Code, shell sessions, grammar rules, tables and signatures: markers in the raw ``text``, or few letters
    among the characters of its ``cleaned`` form (markup such as links and backticks removed)."""
    if re.search(r"^\s*(>>>|\$ |\.\.\. |pip install|conda install|import |from \S+ import)", text, re.MULTILINE):
        return True
    if "::=" in text or re.search(r"[{};]\s*$|^\s*(def|class|return|if|for)\b.*:\s*$", text, re.MULTILINE):
        return True
    visible = re.sub(r"\s", "", cleaned)
    letters = sum(c.isalpha() for c in visible)
    return not visible or letters / len(visible) < 0.8


def prose_text(lines: list[str], stats: Counter | None = None) -> str:
    """Cleans the raw lines of one section into prose paragraphs joined by blank lines.

    A paragraph indented deeper than a preceding paragraph that ends with ``:`` is a literal block (Sphinx's
    plain-text output and docstrings write ``::`` as ``:``) unless it is a list item.
    """
    kept: list[str] = []
    previous_indent, previous_colon = 0, False
    for indent, raw in _paragraphs(lines):
        literal = previous_colon and indent > previous_indent and not re.match(r"^\s*([-*+•]|\d+[.)])\s", raw[0])
        if not literal:
            previous_indent, previous_colon = indent, raw[-1].rstrip().endswith(":")
        cleaned = [clean_inline(re.sub(r"^\s*([-*+•>]|\d+[.)])\s+", "", line)) for line in raw]
        paragraph = " ".join(c for r, c in zip(raw, cleaned) if c and _non_link_words(r) != 0)
        outside_links = _non_link_words("\n".join(raw))
        if (literal or _looks_like_code("\n".join(raw), paragraph) or len(re.findall(r"[A-Za-z]{2,}", paragraph)) < 3
                or (outside_links is not None and outside_links < 3)):  # badge rows, navigation bars
            if stats is not None and paragraph:
                stats["dropped_paragraph"] += 1
            continue
        kept.append(paragraph)
    return "\n\n".join(kept)


def build_sections(raw_sections: Iterable[RawSection], stats: Counter | None = None,
                   drop: Sequence[str] = ()) -> list[Section]:
    """Cleans raw sections into :class:`Section` objects, dropping changelog/legal sections with their
    subsections (e.g. "Bug fixes" under "1.2.0"), empty ones and paragraphs equal to one of ``drop`` (compared
    without case and punctuation)."""
    dropped = {_normalise(d) for d in drop if d}
    sections: list[Section] = []
    skipping_below: int | None = None  # level of the skipped section whose subsections are skipped too
    for heading, level, lines in raw_sections:
        if skipping_below is not None and level > skipping_below:
            continue
        skipping_below = level if heading and SKIPPED_HEADING.match(heading) else None
        if skipping_below is not None:
            if stats is not None:
                stats["skipped_section"] += 1
            continue
        paragraphs = [p for p in prose_text(lines, stats).split("\n\n") if p and _normalise(p) not in dropped]
        if paragraphs:
            sections.append(Section(heading, "\n\n".join(paragraphs)))
    return sections


def _normalise(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def word_count(doc: Document) -> int:
    return sum(len(s.text.split()) for s in doc.sections)


# ------------------------------------------------------------------------------------------------- sources
def _long_description(dist: importlib.metadata.Distribution) -> str:
    meta = dist.metadata
    body = meta.get_payload() if hasattr(meta, "get_payload") else None
    if not (body or "").strip():
        body = meta.get("Description") or ""
        body = re.sub(r"^ {7}\|", "", body, flags=re.MULTILINE)  # Metadata 1.x folding
    return body or ""


def _is_markdown(dist: importlib.metadata.Distribution, body: str) -> bool:
    content_type = (dist.metadata.get("Description-Content-Type") or "").lower()
    if "markdown" in content_type:
        return True
    if "rst" in content_type or "plain" in content_type:
        return False
    return bool(re.search(r"^#{1,6} \S|\]\(https?://", body, re.MULTILINE))


def package_documents(stats: Counter | None = None, path: list[str] | None = None) -> Iterator[Document]:
    """One document per installed distribution (the first of several copies on ``path`` / ``sys.path``)."""
    stats = Counter() if stats is None else stats
    by_name: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions(**({"path": path} if path is not None else {})):
        name = re.sub(r"[-_.]+", "-", (dist.metadata.get("Name") or "").lower())
        if not name:
            stats["package_without_name"] += 1
        elif name in by_name:
            stats["duplicate_distribution"] += 1
        else:
            by_name[name] = dist
    for name in sorted(by_name):
        dist = by_name[name]
        meta, body = dist.metadata, _long_description(dist)
        summary = clean_inline(meta.get("Summary") or "")
        raw = markdown_sections(body) if _is_markdown(dist, body) else rst_sections(body)
        classifiers = sorted(meta.get_all("Classifier") or [])
        yield Document(
            id=f"package:{name}",
            title=meta.get("Name") or name,
            sections=build_sections(raw, stats, drop=[summary, meta.get("Name") or ""]),
            metadata={"source": "packages", "summary": summary, "version": meta.get("Version") or "",
                      "classifiers": classifiers, "topics": [c for c in classifiers if c.startswith("Topic ::")]},
        )


def pydoc_documents(stats: Counter | None = None) -> Iterator[Document]:
    """The reference-manual topics of the running Python (``help()`` text), title = the topic's heading."""
    from pydoc_data.topics import topics

    for key in sorted(topics):
        raw = rst_sections(topics[key])
        title = next((section.heading for section in raw if section.heading), key)
        raw = [section._replace(heading="" if section.heading == title else section.heading) for section in raw]
        yield Document(id=f"pydoc:{key}", title=title, sections=build_sections(raw, stats),
                       metadata={"source": "pydoc", "summary": ""})


def _stdlib_modules(root: str) -> list[tuple[str, str]]:
    """``(dotted module name, file path)`` of the public pure-Python standard library modules, sorted."""
    modules = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _STDLIB_SKIPPED_DIRS and not d.startswith(("_", "."))]
        relative = os.path.relpath(directory, root)
        package = [] if relative == "." else relative.split(os.sep)
        for file in files:
            if file.endswith(".py") and (file == "__init__.py" or not file.startswith("_")):
                parts = package if file == "__init__.py" else [*package, file[:-3]]
                if parts:
                    modules.append((".".join(parts), os.path.join(directory, file)))
    return sorted(modules)


def _split_summary(docstring: str) -> tuple[str, str]:
    """PEP 257 summary (the first paragraph, or its first sentence when it runs on) and the rest."""
    first, _, rest = docstring.strip().partition("\n\n")
    if len(first.splitlines()) == 2 and _RST_ADORNMENT.match(first.splitlines()[1].strip()):
        first, _, rest = rest.strip().partition("\n\n")  # a title, not a summary
    summary = " ".join(first.split())
    if len(summary.split()) > 40:
        head = re.split(r"(?<=[.!?])\s+(?=[A-Z])", summary, maxsplit=1)
        if len(head) == 2:
            summary, rest = head[0], head[1] + "\n\n" + rest
    return clean_inline(summary), rest


def _docstring_document(module: str, source: str, stats: Counter) -> Document:
    tree = ast.parse(source)
    docstring = ast.get_docstring(tree) or ""
    summary, rest = _split_summary(docstring)
    raw = rst_sections(rest)
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            text = ast.get_docstring(node)
            if text:
                raw.append(RawSection(node.name, 1, [line for section in rst_sections(text) for line in section.lines]))
    return Document(id=f"stdlib:{module}", title=module, sections=build_sections(raw, stats, drop=[summary]),
                    metadata={"source": "stdlib", "summary": summary})


def stdlib_documents(stats: Counter | None = None, root: str | None = None) -> Iterator[Document]:
    """One document per public standard-library module with docstrings (parsed with :mod:`ast`, not imported)."""
    stats = Counter() if stats is None else stats
    for module, path in _stdlib_modules(root or sysconfig.get_paths()["stdlib"]):
        try:
            with open(path, encoding="utf-8") as f:
                yield _docstring_document(module, f.read(), stats)
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError) as err:
            stats["unreadable_module"] += 1
            log.debug("skipped %s: %s", path, err)


# ------------------------------------------------------------------------------------------ deduplication
class NearDuplicateFilter:
    """Flags documents whose word 5-gram set has estimated Jaccard >= ``threshold`` with an earlier one
    (MinHash with ``num_hashes`` functions; CRC32 shingle hashes keep it identical across runs and machines)."""

    _PRIME = (1 << 61) - 1

    def __init__(self, threshold: float = 0.7, num_hashes: int = 64, shingle_words: int = 5) -> None:
        rng = np.random.default_rng(0)
        self.a = rng.integers(1, 1 << 31, num_hashes, dtype=np.uint64)
        self.b = rng.integers(0, 1 << 31, num_hashes, dtype=np.uint64)
        self.threshold = threshold
        self.shingle_words = shingle_words
        self.signatures: list[np.ndarray] = []

    def signature(self, text: str) -> np.ndarray:
        words = _normalise(text).split()
        n = self.shingle_words
        shingles = {" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}
        hashes = np.array(sorted(zlib.crc32(s.encode()) for s in shingles), dtype=np.uint64)
        return ((hashes[:, None] * self.a + self.b) % np.uint64(self._PRIME)).min(axis=0)  # (num_hashes,)

    def is_duplicate(self, text: str) -> bool:
        """True if ``text`` nearly repeats an earlier kept text; otherwise remembers it and returns False."""
        signature = self.signature(text)
        if self.signatures and (np.stack(self.signatures) == signature).mean(axis=1).max() >= self.threshold:
            return True
        self.signatures.append(signature)
        return False


def iter_installed_docs(
    sources: Sequence[str] = SOURCES,
    min_words: int = 100,
    near_duplicate_jaccard: float | None = 0.7,
    stats: Counter | None = None,
) -> Iterator[Document]:
    """Yields the installed documents of ``sources`` (see the module docstring) in a deterministic order.

    Args:
        sources: Any of ``"packages"``, ``"pydoc"``, ``"stdlib"``, read in that order.
        min_words: Documents with fewer words of cleaned body text are skipped (``stats["short_document"]``).
        near_duplicate_jaccard: Skip a document whose word 5-gram Jaccard with an earlier one reaches this
            (``stats["near_duplicate"]``); ``None`` keeps near duplicates (exact ones are always skipped).
        stats: Counter that receives the skip counts (also dropped paragraphs and sections).
    """
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown sources {sorted(unknown)}; choose from {SOURCES}")
    stats = Counter() if stats is None else stats
    readers = {"packages": package_documents, "pydoc": pydoc_documents, "stdlib": stdlib_documents}
    seen: set[int] = set()
    near = NearDuplicateFilter(near_duplicate_jaccard) if near_duplicate_jaccard is not None else None
    for source in (s for s in SOURCES if s in sources):
        for doc in readers[source](stats):
            key = zlib.crc32(_normalise(doc.text).encode())
            if word_count(doc) < min_words:
                stats["short_document"] += 1
            elif key in seen:
                stats["duplicate_text"] += 1
            elif near is not None and near.is_duplicate(doc.text):
                stats["near_duplicate"] += 1
            else:
                seen.add(key)
                stats[f"documents_{source}"] += 1
                yield doc


class InstalledDocsDataModule(DocumentDataModule):
    """The documents of :func:`iter_installed_docs`: real text on every machine that installed the stack
    (package READMEs, the Python reference manual, standard-library docstrings), for offline quickstarts.

    Args:
        sources: Any of ``"packages"``, ``"pydoc"``, ``"stdlib"``.
        min_words: Minimum words of cleaned body text per document.
        near_duplicate_jaccard: Skip near duplicates at this word 5-gram Jaccard (``None`` keeps them).
        label: What ``Document.label`` holds, for the before/after report's clustering and probe (see
            :func:`document_label`): ``"source"`` (packages / pydoc / stdlib), ``"topic"`` (a package's trove topic)
            or ``"none"``.
        **kwargs: See :class:`~lit_docemb.data.core.datamodule.DocumentDataModule` (``val_fraction=0.2`` holds out
            a fifth of the documents, chosen by a hash of their id, for the held-out evaluation).
    """

    def __init__(self, sources: list[str] = list(SOURCES), min_words: int = 100,
                 near_duplicate_jaccard: float | None = 0.7, label: Literal["source", "topic", "none"] = "source",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        require(label in ("source", "topic", "none"), "label", "source, topic or none", label)
        self.sources = list(sources)
        self.min_words = min_words
        self.near_duplicate_jaccard = near_duplicate_jaccard
        self.label = label

    def load_documents(self) -> list[Document]:
        documents = list(iter_installed_docs(self.sources, self.min_words, self.near_duplicate_jaccard, self.stats))
        if not documents:
            raise ValueError(f"no installed documents of {self.sources} with >= {self.min_words} words")
        for doc in documents:
            doc.label = document_label(doc, self.label)
        return documents


def document_label(doc: Document, kind: Literal["source", "topic", "none"] = "source") -> str | None:
    """The class of an installed document for clustering and probes (``doc.label``).

    Args:
        doc: A document of :func:`iter_installed_docs`.
        kind: ``"source"``: where the text comes from, ``packages`` (a PyPI README), ``pydoc`` (a topic of the
            Python reference manual) or ``stdlib`` (a standard-library module's docstrings): three kinds of
            documentation written for different readers. ``"topic"``: a package's first top-level trove topic
            classifier in alphabetical order (``Topic :: Scientific/Engineering :: ...`` gives
            ``Scientific/Engineering``), None for a package without one and for the Python documents.
            ``"none"``: no label.
    """
    if kind == "source":
        return doc.metadata["source"]
    topics = sorted({topic.split(" :: ")[1] for topic in doc.metadata.get("topics", []) if topic.count(" :: ")})
    return topics[0] if kind == "topic" and topics else None
