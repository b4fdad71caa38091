"""Text perturbation of CoLDE §4.4.3 / Fig. 8 (seed paper 003): "we randomly shuffle the sections before applying
different models and measure their accuracy on the document comparison task".

What a section is, where the paper is silent: a document's own sections when it has at least two (Wikipedia's
headed sections, a patent's Claims and Description); a document read as one text (an AAN paper: the release's text
file) is first cut at its numbered top-level heading lines (``2 Related Work``, ``3. Method``, ``IV. RESULTS``:
short lines, no full stop at the end), the text before the first heading being a section of its own. The order is a
random permutation drawn per document from the seed and the document id (so every model sees the same shuffle),
redrawn until it differs from the original one. A document with fewer than two sections stays as it is (counted
by :class:`ShuffledSections`).
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from lit_docemb.data.core.document import Document, Section

log = logging.getLogger(__name__)

_HEADING = re.compile(r"^\s*(?:\d{1,2}|[IVX]{1,5})\.?\s+[A-Z][\w\-,:&' ]{1,60}[^.\s]\s*$")
"""A numbered top-level heading line of a paper's plain text: ``1 Introduction``, ``3. Method``, ``II. RESULTS``."""


def split_at_headings(text: str) -> list[Section]:
    """The text's sections at its numbered top-level heading lines (see the module docstring); one section when
    there is no such line."""
    sections: list[Section] = []
    heading, lines = "", []
    for line in text.splitlines():
        if _HEADING.match(line) and len(line.split()) <= 9:
            if any(part.strip() for part in lines):
                sections.append(Section(heading, "\n".join(lines).strip()))
            heading, lines = line.strip(), []
        else:
            lines.append(line)
    if any(part.strip() for part in lines):
        sections.append(Section(heading, "\n".join(lines).strip()))
    return sections or [Section("", text)]


def shuffle_sections(document: Document, seed: int = 0) -> Document | None:
    """The document with its sections in a random order other than their own (see the module docstring); None when
    it has fewer than two non-empty sections."""
    sections = [section for section in document.sections if section.text.strip()]
    if len(sections) == 1:
        sections = split_at_headings(sections[0].text)
    if len(sections) < 2 or len({(s.heading, s.text) for s in sections}) < 2:
        return None
    generator = random.Random(f"{seed}:{document.id}")
    order = list(range(len(sections)))
    while order == sorted(order):
        generator.shuffle(order)
    return replace(document, sections=[sections[i] for i in order])


class ShuffledSections(Sequence):
    """A corpus whose documents are served with their sections shuffled (:func:`shuffle_sections`); those that
    cannot be shuffled are served as they are and counted in ``stats["unshuffled_document"]`` (once per row).

    Args:
        documents: The corpus (documents, read lazily).
        seed: Seed of the permutations (with each document's id).
    """

    def __init__(self, documents: Sequence[Document], seed: int = 0) -> None:
        self.documents, self.seed = documents, seed
        self.stats: Counter = Counter()
        self._unshuffled: set[int] = set()

    def __len__(self) -> int:
        return len(self.documents)

    def __getitem__(self, i: int) -> Document:
        document = self.documents[i]
        shuffled = shuffle_sections(document, self.seed)
        if shuffled is None:
            if i not in self._unshuffled:
                self._unshuffled.add(i)
                self.stats["unshuffled_document"] += 1
                if len(self._unshuffled) == 1:
                    log.warning("document %s has fewer than two sections to shuffle: served as it is (counted in "
                                "stats['unshuffled_document'])", document.id)
            return document
        return shuffled
