"""Writers of small corpus fixtures in each corpus's real on-disk layout, shared by tests."""

from __future__ import annotations

import csv
import io
import json
import lzma
import tarfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from lit_docemb.data.document import Document, Section

PEBBLES = "Counting pebbles with finite-state machines."


FERNS = "Parsing sentences about imaginary ferns.\n\nThe ferns are\tgreen and quite polite."

OWLS = "A corpus of owl hoots, annotated by owls."

KETTLES = "Kettles that whistle in tune: a singing-kettle treebank."

PEBBLES_BAD_BYTES = PEBBLES.encode() + b" \xff"  # not UTF-8


GULLS = ("The lighthouse keeper counted seventeen gulls before breakfast.\r\nShe wrote the number on the wall.\r\n"
         "\r\n\r\n\r\nA storm arrived in the afternoon and the gulls left.  \n")

KETTLE = "Our kettle whistles in a minor key.\n\nNobody in the house can explain why."

BRIDGE = "The rope bridge sways whenever the goats cross it.\n\nThe goats do not seem to mind."


SITEINFO = """  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>enwiki</dbname>
    <base>https://en.wikipedia.org/wiki/Main_Page</base>
    <generator>MediaWiki 1.42.0-wmf.5</generator>
    <case>first-letter</case>
    <namespaces>
      <namespace key="-2" case="first-letter">Media</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""


def lit(text: str | bytes) -> str:
    """A text field as LRA writes it: the repr of the UTF-8 bytes."""
    return repr(text.encode() if isinstance(text, str) else text)

TRAIN = [
    f"1\tP01-0001\tP02-0002\t{lit(FERNS)}\t{lit(OWLS)}",
    f"0.0\tP01-0001\tP03-0003\t{lit(FERNS)}\t{lit(KETTLES)}",
    f"1\tP01-0001\tP02-0002\t{lit(FERNS)}",  # line 3: four fields
    f"maybe\tP01-0001\tP03-0003\t{lit(FERNS)}\t{lit(KETTLES)}",  # line 4: bad label
    f"1\tP04-0004\tP02-0002\t{lit(PEBBLES_BAD_BYTES)}\t{lit('A different owl text.')}",
    f"1\tP05-0005\tP01-0001\tb'unterminated\t{lit(FERNS)}",  # line 6: invalid bytes literal
    f"0\tP06-0006\tP01-0001\t{lit('   ')}\t{lit(FERNS)}",  # an empty paper
    f"1\tP07-0007\tP03-0003\tPlain text about otters.\t{lit(KETTLES)}",
]

EVAL = [f"1\tP02-0002\tP03-0003\t{lit(OWLS)}\t{lit(KETTLES)}"]

TEST = [f"0\tP08-0008\tP01-0001\t{lit('Bridges for goats, revisited.')}\t{lit(FERNS)}"]


SUBSET_1 = {
    "0000000-9f1c.txt": GULLS.encode(),
    "0000001-77ab.txt": KETTLE.encode(),
    "0000002-e0e0.txt": b"  \n\n \n",  # empty document
    "0000003-b4d5.txt": b"Caf\xe9 tables were painted \xff blue.\n\nThen the painter left town.",  # latin-1 bytes
}

SUBSET_2 = {"0000000-c3d2.txt": BRIDGE.encode(), "notes.json": b"{}"}  # a member that is not a text

def texts(documents) -> dict[str, str]:
    return {d.id: d.text for d in documents}


WORDS = ["pebble", "tundra", "saffron", "beacon", "marsh", "cobalt", "willow", "anvil", "tide", "spire", "moss",
         "ridge"]

STRUCTURED = ("The Vellmar glacier is an invented ice field in a fictional range.\n\n"
              "Geography\n\nIt covers four valleys and feeds two lakes, both of them made up.\n\n"
              "History\n\nSurveyors mapped it in an imagined year; their notes were lost.")

SPLITS = {"training": range(0, 6), "validation": range(6, 8), "test": range(8, 10)}


def _write_wikir(root: Path) -> Path:
    """24 flat documents (ids 0..23), a structured one (100), a malformed row, an empty text, bad bytes."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "documents.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id_right", "text_right"])
        for i in range(24):
            writer.writerow([i, " ".join(WORDS[(i + k) % 12] for k in range(30)) + f" entry {i}"])
        writer.writerow([100, STRUCTURED])
        writer.writerow([101, "a row", "with a third field"])
        writer.writerow([102, "   "])
    with open(root / "documents.csv", "ab") as f:
        f.write(b"103,a caf\xe9 by the ridge\r\n")  # not UTF-8
    for split, queries in SPLITS.items():
        (root / split).mkdir()
        with open(root / split / "queries.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id_left", "text_left"])
            writer.writerows([q, f"{WORDS[q]} {WORDS[q + 1]}"] for q in queries)
        # query q: its own article q (2), a linked one q + 12 (1), a judged-irrelevant one, a doc not in corpus
        qrels = [f"{q}\t0\t{q}\t2\n{q}\t0\t{q + 12}\t1\n{q}\t0\t{(q + 5) % 24}\t0\n{q}\t0\t9999\t1" for q in queries]
        (root / split / "qrels").write_text("\n".join(qrels) + "\n")
        run = [f"{q} Q0 {(q + j) % 24} {j + 1} {30.0 - j} BM25" for q in queries for j in range(16)]
        (root / split / "BM25.res").write_text("\n".join(run) + "\n")
    return root


def tar_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_release(folder) -> dict[str, bytes]:
    """The extracted release: openwebtext/urlsf_subset00-{1,2}_data.xz; returns {name: compressed bytes}."""
    folder.mkdir(parents=True, exist_ok=True)
    archives = {"urlsf_subset00-1_data.xz": lzma.compress(tar_bytes(SUBSET_1)),
                "urlsf_subset00-2_data.xz": lzma.compress(tar_bytes(SUBSET_2))}
    for name, data in archives.items():
        (folder / name).write_bytes(data)
    return archives


@pytest.fixture
def lra_dir(tmp_path):
    folder = tmp_path / "tsv_data"
    folder.mkdir()
    for split, lines in (("train", TRAIN), ("eval", EVAL), ("test", TEST)):
        (folder / f"new_aan_pairs.{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def page_xml(title: str, page_id: int, text: str, ns: int | None = 0, redirect: str | None = None) -> str:
    ns_line = "" if ns is None else f"    <ns>{ns}</ns>\n"
    redirect_line = "" if redirect is None else f'    <redirect title="{escape(redirect)}" />\n'
    return (
        f"  <page>\n    <title>{escape(title)}</title>\n{ns_line}    <id>{page_id}</id>\n{redirect_line}"
        f"    <revision>\n      <id>{page_id * 10}</id>\n      <parentid>{page_id * 10 - 1}</parentid>\n"
        "      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
        "      <contributor>\n        <username>Example</username>\n        <id>7</id>\n      </contributor>\n"
        "      <comment>synthetic</comment>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>\n'
        "      <sha1>0000000000000000000000000000000</sha1>\n    </revision>\n  </page>\n"
    )


def export_xml(pages: list[str], version: str = "0.10", siteinfo: str = SITEINFO) -> str:
    return (
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-{version}/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="http://www.mediawiki.org/xml/export-{version}/ '
        f'http://www.mediawiki.org/xml/export-{version}.xsd" version="{version}" xml:lang="en">\n'
        + siteinfo + "".join(pages) + "</mediawiki>\n"
    )


def labelled_docs(n: int) -> list[Document]:
    """Two classes with disjoint vocabularies: a linear head must separate them."""
    docs = []
    for i in range(n):
        label = "sea" if i % 2 else "code"
        words = LABELLED_WORDS[label].split()
        text = " ".join(f"The {words[(i + j) % 8]} and the {words[(i * 3 + j) % 8]} again." for j in range(6))
        docs.append(Document(f"{label}{i}", sections=[Section("", text)], label=label))
    return docs


def write_labelled_folder(folder: Path, n_train: int = 24, n_test: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, docs in [("train", labelled_docs(n_train)), ("test", labelled_docs(n_test))]:
        with open(folder / f"{split}.jsonl", "w") as f:
            for d in docs:
                f.write(json.dumps({"text": d.text, "label": d.label}) + "\n")
    return folder


def write_hyperpartisan(folder: Path, counts: tuple[int, int, int] = (12, 4, 4)) -> Path:
    """Hyperpartisan as Longformer's ``scripts/hp_preprocess.py`` writes it from the SemEval-2019 by-article
    release and ``hp-splits.json``: ``train.jsonl``, ``dev.jsonl``, ``test.jsonl``, one ``{"text", "label",
    "id"}`` object a line, label ``"true"``/``"false"`` (the XML attribute), id the article's number."""
    folder.mkdir(parents=True, exist_ok=True)
    article = 0
    for split, n in zip(("train", "dev", "test"), counts, strict=True):
        with open(folder / f"{split}.jsonl", "w") as f:
            for doc in labelled_docs(n):
                article += 1
                label = "true" if doc.label == "sea" else "false"
                f.write(json.dumps({"text": doc.text, "label": label, "id": article}) + "\n")
    return folder


def write_lra(folder: Path) -> Path:
    folder.mkdir()
    t = [x[:600] for x in topic_texts(8)]
    rows = {"train": [(1, 0, 1), (0, 0, 2), (1, 2, 3), (0, 1, 3), (1, 4, 5), (0, 5, 6)],
            "eval": [(1, 0, 1), (0, 2, 5), (1, 6, 7), (0, 3, 4)], "test": [(1, 2, 3), (0, 1, 7), (1, 4, 5)]}
    for split, pairs in rows.items():
        (folder / f"new_aan_pairs.{split}.tsv").write_text(
            "".join(f"{y}\tP{a}\tP{b}\t{lit(t[a])}\t{lit(t[b])}\n" for y, a, b in pairs))
    return folder


LABELLED_WORDS = {"sea": "tide wave boat harbour sailor salt shore anchor", "code": "compiler function loop variable bug "
         "python stack module"}


def _topic_texts() -> list[tuple[str, str]]:
    from pydoc_data.topics import topics

    return sorted((name, text) for name, text in topics.items() if len(text.split()) > 80)


def topic_texts(n: int, start: int = 0) -> list[str]:
    return [t for _, t in _topic_texts()[start:start + n]]
