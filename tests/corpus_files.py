"""Writers of small corpus fixtures in each corpus's real on-disk layout, shared by tests."""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import tarfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from lit_docemb.data.core.document import Document, Section

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


ARXIV_SNAPSHOT_CATEGORIES = {"code": ["cs.PL cs.LG", "cs.SE"], "sea": ["math.GR", "math.DS physics.ao-ph"]}
"""The categories fields :func:`write_arxiv_snapshot` gives each class of :func:`labelled_docs`, alternating: the
archives (``cs``, ``math``) are the classes, the first categories are not."""


def write_arxiv_snapshot(path: Path, n: int = 24) -> Path:
    """``arxiv-metadata-oai-snapshot.json`` as Kaggle's ``Cornell-University/arxiv`` ships it: one JSON object a
    line with every field of the release (``id``, ``submitter``, ``authors``, ``title``, ``comments``,
    ``journal-ref``, ``doi``, ``report-no``, ``categories``, ``license``, ``abstract`` with its hard wraps and
    leading spaces, ``versions``, ``update_date``, ``authors_parsed``); papers are :func:`labelled_docs`, their
    categories from :data:`ARXIV_SNAPSHOT_CATEGORIES`, old-style ids (``math/0406<k>``) beside new ones."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, doc in enumerate(labelled_docs(n)):
        arxiv_id = f"math/0406{i:03d}" if i % 5 == 4 else f"0704.{i + 1:04d}"
        words = doc.text.split()
        record = {"id": arxiv_id, "submitter": "A. Person", "authors": "A. Person and B. Other",
                  "title": " ".join(words[:4]), "comments": "9 pages, 2 figures", "journal-ref": None, "doi": None,
                  "report-no": None, "categories": ARXIV_SNAPSHOT_CATEGORIES[doc.label][(i // 2) % 2],
                  "license": None, "abstract": "  " + " ".join(words[:12]) + "\n" + " ".join(words[12:]) + "\n",
                  "versions": [{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}],
                  "update_date": "2008-11-13", "authors_parsed": [["Person", "A.", ""], ["Other", "B.", ""]]}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


FAKENEWS_HEADER = (",id,domain,type,url,content,scraped_at,inserted_at,updated_at,title,authors,keywords,"
                   "meta_keywords,meta_description,tags,summary,source")
"""The header line of several27/FakeNewsCorpus ``news_cleaned_2018_02_13.csv`` (its first column is unnamed)."""


def write_fakenews(path: Path, counts: dict[str, int] | None = None, reverse: bool = False) -> Path:
    """``news_cleaned_2018_02_13.csv`` as several27/FakeNewsCorpus ships it: :data:`FAKENEWS_HEADER`, a leading
    row number, quoted multi-line ``content``, the class in ``type``; the articles are :func:`labelled_docs` (``code``
    → ``counts``' first type, ``sea`` → its second; default 12 ``fake`` and 12 ``reliable``), then one article
    whose ``type`` is empty (the release has such rows). ``reverse`` writes the articles in the opposite order."""
    counts = counts or {"fake": 12, "reliable": 12}
    types = list(counts)
    docs = labelled_docs(2 * max(counts.values()))
    chosen = [d for d in docs if d.label == "code"][:counts[types[0]]] + \
        [d for d in docs if d.label == "sea"][:counts[types[1]]]
    rows = [(types[0] if d.label == "code" else types[1], d) for d in chosen]
    rows = rows[::-1] if reverse else rows
    rows.append(("", labelled_docs(1)[0]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for number, (kind, doc) in enumerate(rows):
        text = doc.text.replace(". ", ".\n\n", 1)  # a multi-line article, quoted
        article_id = 1000 + int(doc.id.lstrip("codesa")) if kind else 999  # the same article, the same id
        writer.writerow([number, article_id, "example.com", kind, f"http://example.com/{doc.id}", text, "2018-01-25 16:17:44.789555", "2018-02-02 01:19:41.756632",
                         "2018-02-02 01:19:41.756664", doc.text.split(".")[0], "", "", "['']", "", "", "", ""])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAKENEWS_HEADER + "\n" + buffer.getvalue(), encoding="utf-8")
    return path


def write_semeval_hyperpartisan(folder: Path, counts: tuple[int, int, int] = (12, 4, 4),
                                part: str = "training-byarticle-20181122") -> Path:
    """Hyperpartisan as SemEval-2019 task 4 publishes it (Zenodo record 1489920), unzipped: ``articles-<part>.xml``
    (``<articles>`` of ``<article id published-at title>`` with ``<p>`` paragraphs holding inline ``<a>`` links),
    ``ground-truth-<part>.xml`` (``<article id hyperpartisan labeled-by url bias?/>``, in another order), and
    Longformer's ``hp-splits.json`` (``train`` / ``dev`` / ``test``: 0-based positions of the articles in the
    file, shuffled). Articles are :func:`labelled_docs` (``sea`` hyperpartisan), ids with leading zeros and gaps.
    Returns the articles file."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = labelled_docs(sum(counts))
    ids = [f"{3 * i + 1:07d}" for i in range(len(docs))]
    articles, truth = [], []
    for doc, article_id in zip(docs, ids, strict=True):
        sentences = doc.text.split(". ")
        body = "".join(f"<p>{escape(s)}{'.' if not s.endswith('.') else ''} "
                       f'<a href="https://example.com/{article_id}" type="external">see</a> &amp; more</p>\n'
                       for s in sentences[:3])
        title = escape(" ".join(doc.text.split()[:4]), {'"': "&quot;"})
        articles.append(f'<article id="{article_id}" published-at="2017-09-10" title="{title}">\n{body}</article>')
        hyperpartisan = "true" if doc.label == "sea" else "false"
        truth.append(f'<article id="{article_id}" hyperpartisan="{hyperpartisan}" labeled-by="article" '
                     f'url="https://example.com/{article_id}"/>')
    (folder / f"articles-{part}.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<articles>\n' + "\n".join(articles) + "\n</articles>\n",
        encoding="utf-8")
    (folder / f"ground-truth-{part}.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<articles>\n' + "\n".join(truth[::-1]) + "\n</articles>\n",
        encoding="utf-8")
    order = sorted(range(len(docs)), key=lambda i: (i * 7) % len(docs))
    bounds = [0, counts[0], counts[0] + counts[1], len(docs)]
    splits = {name: order[bounds[k]:bounds[k + 1]] for k, name in enumerate(("train", "dev", "test"))}
    (folder / "hp-splits.json").write_text(json.dumps(splits), encoding="utf-8")
    return folder / f"articles-{part}.xml"


BBC_TOPICS = {"code": "business", "sea": "sport"}
"""The topic folder :func:`write_bbc_release` gives each class of :func:`labelled_docs`."""


def write_bbc_release(root: Path, n: int = 24) -> Path:
    """BBC News as ``bbc-fulltext.zip`` (mlg.ucd.ie/datasets/bbc.html) unzips: ``bbc/README.TXT`` beside one folder
    per topic (``bbc/<topic>/001.txt``, numbered per topic), each article its title line, a blank line, then its
    paragraphs separated by blank lines, in Latin-1 (the release's pound signs are the byte 0xA3). The articles are
    :func:`labelled_docs` in the folders of :data:`BBC_TOPICS`; the first ``code`` article costs \xa3100.
    Returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.TXT").write_bytes(b"Consists of 2225 documents from the BBC news website corresponding to stories "
                                      b"in five topical areas from 2004-2005.\r\n")
    numbers: dict[str, int] = {}
    for i, doc in enumerate(labelled_docs(n)):
        topic = BBC_TOPICS[doc.label]
        numbers[topic] = numbers.get(topic, 0) + 1
        sentences = doc.text.split(" again. ")
        title = sentences[0].replace("The ", "", 1).capitalize()
        body = f"{sentences[0]} again. {sentences[1]} again.\n\n{' again. '.join(sentences[2:])}"
        if i == 0:
            body += " It costs \xa3100."
        (root / topic).mkdir(exist_ok=True)
        (root / topic / f"{numbers[topic]:03d}.txt").write_bytes(f"{title}\n\n{body}\n".encode("latin-1"))
    return root


def write_20news_bydate(root: Path, n_train: int = 24, n_test: int = 8) -> Path:
    """20 Newsgroups as ``20news-bydate.tar.gz`` (qwone.com/~jason/20Newsgroups) unpacks: ``20news-bydate-train/`` and
    ``20news-bydate-test/``, one folder per newsgroup, one message a file named by its number, Latin-1, each a Usenet
    header block (``From``, ``Subject``, ``Organization``, ``Lines``), a blank line, then the body. The messages are
    :func:`labelled_docs` (``code`` in ``comp.graphics``, ``sea`` in ``sci.space``); the first training message's
    author is Jos\xe9. Returns ``root``."""
    groups = {"code": "comp.graphics", "sea": "sci.space"}
    for split, docs, first in [("train", labelled_docs(n_train), 38000), ("test", labelled_docs(n_test), 60000)]:
        for i, doc in enumerate(docs):
            author = "jose@example.edu (Jos\xe9 Example)" if split == "train" and i == 0 else "ann@example.edu"
            message = (f"From: {author}\nSubject: {' '.join(doc.text.split()[:4])}\nOrganization: Example University\n"
                       f"Lines: 1\n\n{doc.text}\n")
            path = root / f"20news-bydate-{split}" / groups[doc.label] / str(first + 7 * i)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(message.encode("latin-1"))
    return root


NYT_SECTIONS = {"code": ["Business", "Business; Technology"], "sea": ["Sports", "Front Page; Sports"]}
"""The ``online_sections`` :func:`write_nyt_annotated` gives each class of :func:`labelled_docs`, alternating: the
topics are ``business`` and ``sports``."""


def nitf_article(doc_id: str, date: str, title: str, paragraphs: list[str], sections: str, taxonomy: list[str],
                 full_text: bool = True) -> str:
    """One article as the NYT Annotated Corpus's NITF 3.3 file (LDC2008T19): ``head`` with its ``meta`` fields
    (``dsk``, ``online_sections``, ...), ``docdata`` with the ``doc-id`` and ``classifier`` elements, ``pubdata``;
    ``body.head`` with the headline, bylines and abstract; ``body.content`` with the ``lead_paragraph`` block and,
    when ``full_text``, the ``full_text`` block (which repeats the lead paragraph)."""
    classifiers = "".join(f'\n        <classifier class="online_producer" type="taxonomic_classifier">{escape(t)}'
                          f"</classifier>" for t in taxonomy)
    body = "".join(f"\n          <p>{escape(p)}</p>" for p in paragraphs)
    full = f'\n        <block class="full_text">{body}\n        </block>' if full_text else ""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE nitf SYSTEM "http://www.nitf.org/IPTC/NITF/3.3/specification/dtd/nitf-3-3.dtd">
<nitf change.date="June 10, 2005" change.time="19:30" version="-//IPTC//DTD NITF 3.3//EN">
  <head>
    <title>{escape(title)}</title>
    <meta content="{int(date[6:8])}" name="publication_day_of_month"/>
    <meta content="{int(date[4:6])}" name="publication_month"/>
    <meta content="{date[:4]}" name="publication_year"/>
    <meta content="Thursday" name="publication_day_of_week"/>
    <meta content="Financial Desk" name="dsk"/>
    <meta content="1" name="print_page_number"/>
    <meta content="D" name="print_section"/>
    <meta content="{escape(sections)}" name="online_sections"/>
    <docdata>
      <doc-id id-string="{doc_id}"/>
      <doc.copyright holder="The New York Times" year="{date[:4]}"/>
      <identified-content>
        <classifier class="indexing_service" type="descriptor">Weather</classifier>{classifiers}
      </identified-content>
    </docdata>
    <pubdata date.publication="{date}T000000" ex-ref="http://query.nytimes.com/gst/fullpage.html?res={doc_id}" \
item-length="{sum(len(p.split()) for p in paragraphs)}" name="The New York Times" unit-of-measure="word"/>
  </head>
  <body>
    <body.head>
      <hedline>
        <hl1>{escape(title)}</hl1>
      </hedline>
      <byline class="print_byline">By A. REPORTER</byline>
      <byline class="normalized_byline">Reporter, A</byline>
      <abstract>
        <p>{escape(paragraphs[0])}</p>
      </abstract>
    </body.head>
    <body.content>
      <block class="lead_paragraph">
        <p>{escape(paragraphs[0])}</p>
      </block>{full}
    </body.content>
  </body>
</nitf>
"""


def write_nyt_annotated(root: Path, n: int = 24) -> Path:
    """The New York Times Annotated Corpus as LDC ships it (LDC2008T19), at ``root`` (``nyt_corpus``):
    ``data/<year>/<month>.tgz`` archives holding ``<month>/<day>/<doc id>.xml`` NITF files (:func:`nitf_article`),
    beside the release's ``docs/`` and ``dtd/`` folders. The articles are :func:`labelled_docs` (``online_sections``
    from :data:`NYT_SECTIONS`; the second ``code`` article has no full-text block, only its lead paragraph), spread
    over 1987/01 and 2007/06, then three more: one in ``Opinion`` (outside the paper's topics), one in both
    ``Business`` and ``Sports`` (two topics), and one in ``Arts`` whose taxonomic classifier is
    ``Top/Features/Arts/Music`` (below a topic's path). Returns ``root``."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "index.html").write_text("<html><body>The New York Times Annotated Corpus</body></html>\n")
    (root / "dtd").mkdir(exist_ok=True)
    (root / "dtd" / "nitf-3-3.dtd").write_text("<!ELEMENT nitf (head?, body)>\n")
    articles = []
    for i, doc in enumerate(labelled_docs(n)):
        sentences = [s if s.endswith(".") else s + "." for s in doc.text.split(". ")]
        paragraphs = [" ".join(sentences[:2]), " ".join(sentences[2:4]), " ".join(sentences[4:])]
        sections = NYT_SECTIONS[doc.label][(i // 2) % 2]
        taxonomy = [f"Top/News/{part}" for part in sections.split("; ") if part != "Front Page"]
        articles.append((doc.label, paragraphs, sections, taxonomy, i != 2))
    left_out = labelled_docs(3)
    articles += [("code", [left_out[0].text], "Opinion", ["Top/Opinion/Editorials"], True),
                 ("code", [left_out[1].text], "Business; Sports", ["Top/News/Business", "Top/News/Sports"], True),
                 ("code", [left_out[2].text], "Arts", ["Top/Features/Arts/Music"], True)]
    dates = ["19870101", "19870102", "20070615"]
    by_archive: dict[Path, list[tuple[str, str]]] = {}
    for number, (_, paragraphs, sections, taxonomy, full_text) in enumerate(articles):
        date = dates[number % len(dates)]
        doc_id = f"{number * 37 + 11 if date < '2000' else 1_840_000 + number:07d}"
        member = f"{date[4:6]}/{date[6:8]}/{doc_id}.xml"
        xml = nitf_article(doc_id, date, " ".join(paragraphs[0].split()[:5]), paragraphs, sections, taxonomy,
                           full_text)
        by_archive.setdefault(root / "data" / date[:4] / f"{date[4:6]}.tgz", []).append((member, xml))
    for archive, members in by_archive.items():
        archive.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "w:gz") as handle:  # as `tar czf 01.tgz 01`: the folders, then their files
            for folder in sorted({m.split("/")[0] for m, _ in members} | {m.rsplit("/", 1)[0] for m, _ in members}):
                info = tarfile.TarInfo(folder)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                handle.addfile(info)
            for member, xml in members:
                data = xml.encode("utf-8")
                info = tarfile.TarInfo(member)
                info.size = len(data)
                handle.addfile(info, io.BytesIO(data))
    return root


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


def byte_level_bpe(texts: list[str]):
    """A small RoBERTa-style tokenizer: byte-level BPE, ``<s> $A </s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>")


def t5_style_tokenizer():
    """A small T5-style tokenizer: Unigram over Metaspace pieces (a space starts a piece, a trailing space is a piece
    of its own), ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, ``$A </s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.train_from_iterator([text for _, text in _topic_texts()],
                            trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"],
                                                    unk_token="<unk>"))
    eos = tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def write_instructor_folder(path: Path, dense_out: int = 24) -> Path:
    """A 2-layer, 32-wide T5 encoder (random weights, dropout off) in the sentence-transformers layout of the INSTRUCTOR
    checkpoints (hkunlp/instructor-*): ``T5EncoderModel`` weights and :func:`t5_style_tokenizer` at the root,
    ``modules.json`` (Transformer, Pooling, Dense, Normalize), ``sentence_bert_config.json``, ``1_Pooling/config.json``
    (mean, no ``include_prompt``), ``2_Dense/config.json`` (32 -> ``dense_out``, no bias, Identity) with its weight
    ``linear.weight`` in ``2_Dense/pytorch_model.bin``, and an empty ``3_Normalize``. Returns ``path``."""
    import torch
    from transformers import T5Config, T5EncoderModel

    def write_json(file: Path, value) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(value, indent=2))

    generator = torch.Generator().manual_seed(0)
    tokenizer = t5_style_tokenizer()
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                      dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                      architectures=["T5EncoderModel"])
    path.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        T5EncoderModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    write_json(path / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}])
    write_json(path / "sentence_bert_config.json", {"max_seq_length": 512, "do_lower_case": False})
    write_json(path / "1_Pooling" / "config.json", {
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    write_json(path / "2_Dense" / "config.json", {"in_features": 32, "out_features": dense_out, "bias": False,
                                                  "activation_function": "torch.nn.modules.linear.Identity"})
    torch.save({"linear.weight": torch.randn(dense_out, 32, generator=generator)},
               path / "2_Dense" / "pytorch_model.bin")
    (path / "3_Normalize").mkdir(exist_ok=True)
    return path


def topic_texts(n: int, start: int = 0) -> list[str]:
    return [t for _, t in _topic_texts()[start:start + n]]


# --- MS MARCO documents (gzip TSVs, TREC qrels and runs) ---
MSMARCO_TOPICS = ["lantern", "orchard", "glacier", "violin", "compass", "meadow", "harbor", "quartz", "ember", "falcon"]


def gzip_lines(path: Path, lines: list[str] | bytes) -> None:
    data = lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode()
    with gzip.open(path, "wb") as f:
        f.write(data)


def _msmarco_documents() -> list[str]:
    lines = []
    for i, topic in enumerate(MSMARCO_TOPICS * 3):  # 30 documents, D100..D129
        body = f"The {topic} note number {i} describes how a {topic} is kept. It is dusted on day {i % 7}."
        lines.append(f"D{100 + i}\thttp://example.org/{topic}/{i}\tAbout the {topic} {i}\t{body}")
    return lines


def write_msmarco(root: Path, documents_gz: bool = True) -> Path:
    """The MS MARCO document-ranking release: msmarco-docs.tsv(.gz) with three damaged rows, and per split (train,
    dev; TREC DL 2019's test topics) the queries, qrels and BM25 top-100 run; every document and query is invented."""
    root.mkdir(parents=True, exist_ok=True)
    docs = "\n".join(_msmarco_documents()).encode() + b"\n"
    docs += b"D900\thttp://example.org/broken\tonly three fields\n"  # malformed: 3 fields
    docs += b"D901\thttp://example.org/empty\t\t\n"  # empty document
    docs += b"D902\thttp://example.org/bytes\tBad bytes\tA caf\xe9 with a latin-1 byte.\n"  # undecodable
    if documents_gz:
        gzip_lines(root / "msmarco-docs.tsv.gz", docs)
    else:
        (root / "msmarco-docs.tsv").write_bytes(docs)
    for split, qids in (("train", range(1, 9)), ("dev", range(50, 53))):
        gzip_lines(root / f"msmarco-doc{split}-queries.tsv.gz",
            [f"{q}\twhere is the {MSMARCO_TOPICS[q % 10]} kept" for q in qids] + ["no tab on this line"])
        # relevant: the three documents of the query's topic (D1xx with (i % 10) == q % 10); one missing doc
        qrels = [f"{q} 0 D{100 + q % 10 + 10 * k} 1" for q in qids for k in range(3)]
        gzip_lines(root / f"msmarco-doc{split}-qrels.tsv.gz", qrels + [f"{qids[0]} 0 D999 1"])
        run = []
        for q in qids:  # "BM25" top 12: the relevant ones and then 9 others, best first
            ranked = [f"D{100 + q % 10 + 10 * k}" for k in range(3)]
            ranked += [f"D{100 + (q + 1 + j) % 30}" for j in range(12) if f"D{100 + (q + 1 + j) % 30}" not in ranked]
            run += [f"{q} Q0 {d} {r} {20.0 - r:.3f} bm25" for r, d in enumerate(ranked[:12], 1)]
        gzip_lines(root / f"msmarco-doc{split}-top100.gz", run)
    # TREC DL 2019's document task: its gzip queries, NIST's plain qrels (graded), its top-100 run
    test = range(70, 73)
    gzip_lines(root / "msmarco-test2019-queries.tsv.gz",
               [f"{q}\twhich {MSMARCO_TOPICS[q % 10]} was kept" for q in test])
    (root / "2019qrels-docs.txt").write_text("".join(f"{q} 0 D{100 + q % 10 + 10 * k} {3 - k}\n"
                                                     for q in test for k in range(3)))
    gzip_lines(root / "msmarco-doctest2019-top100.gz",
               [f"{q} Q0 D{100 + (q + j) % 30} {j + 1} {20.0 - j:.3f} bm25" for q in test for j in range(12)])
    return root


# --- Robust04 (TREC disks 4 & 5 SGML, unix-compressed and gzip files, topics, qrels, folds) ---
ROBUST04_THEMES = ["lighthouse", "beekeeping", "tramway", "salt marsh", "glassblowing"]  # topics 301-305 / 601-605


def lzw_compress(data: bytes, max_bits: int = 16, clear_at: frozenset = frozenset()) -> bytes:
    """A unix ``compress`` 4.x encoder (block mode) that also emits CLEAR after the input offsets ``clear_at``."""
    out = bytearray(b"\x1f\x9d" + bytes([0x80 | max_bits]))
    maxmax = 1 << max_bits
    state = {"bits": 9, "maxcode": 511, "free": 257, "clear": False}
    group: list[int] = []

    def flush(full: bool) -> None:  # a group of 8 codes is `bits` bytes; padded when the width changes
        value = sum(code << (i * state["bits"]) for i, code in enumerate(group))
        size = state["bits"] if full else (len(group) * state["bits"] + 7) // 8
        out.extend(value.to_bytes(state["bits"], "little")[:size])
        group.clear()

    def output(code: int) -> None:
        group.append(code)
        if len(group) == 8:
            flush(True)
        if state["free"] > state["maxcode"] or state["clear"]:
            if group:
                flush(True)
            if state["clear"]:
                state.update(bits=9, maxcode=511, clear=False)
            else:
                state["bits"] += 1
                state["maxcode"] = maxmax if state["bits"] == max_bits else (1 << state["bits"]) - 1

    table: dict[tuple[int, int], int] = {}
    ent = data[0]
    for i, c in enumerate(data[1:], 1):
        if (ent, c) in table:
            ent = table[(ent, c)]
            continue
        output(ent)
        if state["free"] < maxmax:
            table[(ent, c)] = state["free"]
            state["free"] += 1
        ent = c
        if i in clear_at:
            table.clear()
            state.update(free=257, clear=True)
            output(256)
    output(ent)
    if group:
        flush(False)
    return bytes(out)


def _paragraphs(theme: str, k: int) -> list[str]:
    return [f"Article {k} reports on {theme} in an invented town.", f"A second paragraph about {theme} follows."]


def _ft(theme: str, k: int) -> str:
    a, b = _paragraphs(theme, k)
    return (f"<DOC>\n<DOCNO>FT911-{k}</DOCNO>\n<PROFILE>_AN-B{k}</PROFILE>\n<DATE>910514\n</DATE>\n"
            f"<HEADLINE>\nFT  14 MAY 91 / News on {theme}\n</HEADLINE>\n<TEXT>\n{a}\n\n{b}\n</TEXT>\n"
            "<PUB>The Financial Times</PUB>\n</DOC>\n")


def _fbis(theme: str, k: int) -> str:
    a, b = _paragraphs(theme, k)
    return (f"<DOC>\n<DOCNO> FBIS3-{k} </DOCNO>\n<HT>  \"cr0000{k}\" </HT>\n<HEADER>\n<H2>  1 Jan </H2>\n"
            f"<H3> <TI>   Bulletin on {theme}   </TI></H3>\n</HEADER>\n<TEXT>\n"
            f"Language: <F P=105> English </F>\nArticle Type:BFN\n\n  [Text] {a}\n\n  {b}\n</TEXT>\n</DOC>\n")


def _latimes(theme: str, k: int) -> str:
    a, b = _paragraphs(theme, k)
    return (f"<DOC>\n<DOCNO> LA0101{k:02d}-0001 </DOCNO>\n<DOCID> {k} </DOCID>\n<DATE>\n<P>\nJanuary 1\n</P>\n"
            f"</DATE>\n<HEADLINE>\n<P>\nA STORY OF {theme.upper()}\n</P>\n</HEADLINE>\n<TEXT>\n<P>\n{a}\n</P>\n"
            f"<P>\n{b}\n</P>\n</TEXT>\n<GRAPHIC>\n<P>\nA caption.\n</P>\n</GRAPHIC>\n</DOC>\n")


def _fr94(theme: str, k: int) -> str:
    a, b = _paragraphs(theme, k)
    return (f"<DOC>\n<DOCNO> FR940104-0-{k:05d} </DOCNO>\n<PARENT> FR940104-0-{k:05d} </PARENT>\n<TEXT>\n"
            f"<!-- PJG FTAG 4700 -->\n\n<!-- PJG STAG 4700 -->\n\n<DOCTITLE>Rules on {theme}</DOCTITLE>\n\n"
            f"<!-- PJG 0012 frnewline -->\n{a} Non&hyph;binding &amp; brief.\n\n{b}\n</TEXT>\n</DOC>\n")


def write_robust04_disks(root: Path) -> Path:
    """Disks 4 & 5 style folders: 5 docs per collection (one per theme), a CR file, a README, a damaged file."""
    styles = {"disk4/FT/FT911/FT911_1": _ft, "disk5/FBIS/FB396001.gz": _fbis, "disk5/LATIMES/LA010189": _latimes,
              "disk4/FR94/01/FR940104.0z": _fr94}
    for name, style in styles.items():
        data = "".join(style(theme, k) for k, theme in enumerate(ROBUST04_THEMES, 1)).encode()
        if name.endswith(".gz"):
            data = gzip.compress(data)
        elif name.endswith(".0z"):
            data = lzw_compress(data)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "disk4/CR/CR93E").parent.mkdir(parents=True)
    (root / "disk4/CR/CR93E").write_text("<DOC>\n<DOCNO>CR93E-1</DOCNO>\n<TEXT>\nFloor remarks.\n</TEXT>\n</DOC>\n")
    (root / "disk5/FBIS/READMEFB").write_text("This folder holds invented bulletins.\n")
    (root / "disk5/LATIMES/LA010289").write_bytes(
        b"<DOC>\n<DOCNO> LA010289-0001 </DOCNO>\n<TEXT>\nNo end tag here.\n</TEXT>\n"  # unterminated
        b"<DOC>\n<TEXT>\nA record without a number.\n</TEXT>\n</DOC>\n"  # no DOCNO
        b"stray words between records\n"
        b"<DOC>\n<DOCNO> LA010289-0003 </DOCNO>\n<HEADLINE>\nCAF\xc9 NEWS\n</HEADLINE>\n<TEXT>\n"
        b"A caf\xe9 in Latin-1 bytes.\n</TEXT>\n</DOC>\n"
        b"<DOC>\n<DOCNO> LA010289-0004 </DOCNO>\n<TEXT>\n  <P>\n  </P>\n</TEXT>\n</DOC>\n")  # empty
    return root


def write_robust04_topics(root: Path) -> tuple[Path, Path, Path]:
    topics = []
    for k, theme in enumerate(ROBUST04_THEMES, 1):
        for number in (300 + k, 600 + k):
            label = f"0{number}" if number == 305 else str(number)  # a zero-padded number
            topics.append(f"<top>\n\n<num> Number: {label}\n<title> {theme} news\n\n<desc> Description:\n"
                          f"Find reports about {theme}.\n\n<narr> Narrative:\nA relevant document discusses "
                          f"{theme} in any town.\n\n</top>\n")
    topics.append("<top>\n<num> Number: 999\n<desc> Description:\nNo title here.\n</top>\n")  # malformed
    (root / "04.testset").write_text("\n".join(topics))
    qrels = []
    for k, theme in enumerate(ROBUST04_THEMES, 1):
        docs = [f"FT911-{k}", f"FBIS3-{k}", f"LA0101{k:02d}-0001", f"FR940104-0-{k:05d}"]
        for number in (300 + k, 600 + k):
            qrels += [f"{number} 0 {d} {2 if d.startswith('FT') else 1}" for d in docs]
            qrels.append(f"{number} 0 FT911-{k % 5 + 1} 0")  # judged, not relevant
    qrels.append("700 0 FT911-1 1")  # a topic in no fold
    (root / "qrels.robust2004.txt").write_text("\n".join(qrels) + "\n")
    folds = [[str(300 + k), str(600 + k)] for k in range(1, 6)]  # Anserini's layout: a JSON list of lists
    (root / "folds.json").write_text(json.dumps(folds))
    return root / "04.testset", root / "qrels.robust2004.txt", root / "folds.json"


def write_robust04(root: Path) -> Path:
    """Robust04 as its users hold it: the TREC disks 4 & 5 folders (:func:`write_robust04_disks`) and the topics,
    qrels and folds files (:func:`write_robust04_topics`) in ``root``."""
    write_robust04_disks(root)
    write_robust04_topics(root)
    return root


# --- PPDB (a lexical paraphrase file) ---
def write_ppdb(path: Path) -> Path:
    """A PPDB 2.0 lexical file: four paraphrase rules in its ``|||``-separated format."""
    path.write_text("[JJ] ||| big ||| large ||| PPDB2.0Score=3.1 p(e|f)=0.2 ||| 0-0 ||| Equivalence\n"
                    "[NN] ||| film ||| movie ||| PPDB2.0Score=3.5 ||| 0-0 ||| Equivalence\n"
                    "[NN] ||| film ||| motion picture ||| PPDB2.0Score=3.0 ||| 0-0 0-1 ||| Equivalence\n"
                    "[NN] ||| car ||| zeppelin ||| PPDB2.0Score=1.0 ||| 0-0 ||| OtherRelated\n")
    return path


# --- Wikipedia (a MediaWiki export with links) and the AAN network release ---
def write_wikipedia_dump(path: Path, groups: int = 2) -> Path:
    """A MediaWiki XML export of 4 articles per link group (two groups unless ``groups`` says more; the groups
    after the first two link to ``Topic <g> item <k>``), each article with a second section."""
    link_sets = [["Fern", "Moss", "Leaf", "Root"], ["Owl", "Hawk", "Nest", "Egg"]]
    link_sets += [[f"Topic {g} item {k}" for k in range(4)] for g in range(2, groups)]
    pages = []
    for i, text in enumerate(topic_texts(4 * groups)):
        links = " ".join(f"[[{x}]]" for x in link_sets[i % groups])
        body = text[:300].replace("[", "").replace("]", "")
        pages.append(page_xml(f"Article {i}", i + 1, f"{body} {links}\n\n== Part ==\n{text[300:700]}"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(export_xml(pages), encoding="utf-8")
    return path


def write_google_patents(path: Path, groups: int = 6, per_group: int = 3, singles: int = 4) -> Path:
    """A Google Patents Public Data export (the publications table as newline-delimited JSON, gzipped as ``bq
    extract --compression GZIP`` writes it): ``groups`` CPC main groups of ``per_group`` patents each (first code
    ``G06F<g>/<k>``, a second code shared by all), ``singles`` patents whose first code no other has
    (``H04L<n>/00``), plus one patent with only a German claim (empty in English), one without CPC code, a line that
    is not JSON and one without publication number."""
    lines = []
    texts = topic_texts(groups * per_group + singles + 1)
    for g in range(groups):
        for k in range(per_group):
            i = g * per_group + k
            lines.append(json.dumps({
                "publication_number": f"US-{9000000 + i}-B2", "country_code": "US",
                "title_localized": [{"text": f"Device {i}", "language": "en", "truncated": False}],
                "abstract_localized": [{"text": f"An abstract about group {g}.", "language": "en", "truncated": False}],
                "claims_localized": [{"text": f"1. A device of group {g}. " + texts[i][:200], "language": "en",
                                      "truncated": False}],
                "description_localized": [{"text": texts[i][200:700], "language": "en", "truncated": False},
                                          {"text": "Eine Beschreibung.", "language": "de", "truncated": False}],
                "cpc": [{"code": "Y02D10/00", "inventive": False, "first": False, "tree": []},
                        {"code": f"G06F{g + 1}/{10 * k + 1}", "inventive": True, "first": True, "tree": []}]}))
    for n in range(singles):
        text = texts[groups * per_group + n]
        lines.append(json.dumps({
            "publication_number": f"US-{8000000 + n}-B1", "title_localized": [{"text": f"Relay {n}", "language": "en"}],
            "claims_localized": [{"text": "1. A relay. " + text[:200], "language": "en"}],
            "description_localized": [{"text": text[200:700], "language": "en"}],
            "cpc": [{"code": f"H04L{n + 1}/00", "inventive": True, "first": True}]}))
    lines.append(json.dumps({"publication_number": "DE-1-A1", "claims_localized": [{"text": "Ein Anspruch.",
                             "language": "de"}], "cpc": [{"code": "A01B1/00", "first": True}]}))
    lines.append(json.dumps({"publication_number": "US-1-A", "claims_localized": [{"text": texts[-1][:300],
                             "language": "en"}], "description_localized": [], "cpc": []}))
    lines += ["{not json", json.dumps({"title_localized": []})]
    path.parent.mkdir(parents=True, exist_ok=True)
    gzip_lines(path, lines)
    return path


def write_aan_network(root: Path) -> Path:
    """The AAN network release: papers_text/<id>.txt and the citation file acl.txt."""
    (root / "papers_text").mkdir(parents=True)
    for i, text in enumerate(topic_texts(10)):
        (root / "papers_text" / f"P{i}.txt").write_text(text[:800])
    (root / "acl.txt").write_text("P0 ==> P1\nP0 ==> P2\nP3 ==> P4\nP5 ==> P6\n")
    return root


# --- a Wikipedia dump for the WIKIR builder (build-wikir) ---
WIKIR_TOPICS = ["lantern", "orchard", "glacier", "violin", "compass", "meadow", "harbor", "quartz", "ember", "falcon",
                "thistle", "canyon", "beacon", "walnut", "lagoon", "saddle"]


def wikir_title(i: int) -> str:
    return f"The {WIKIR_TOPICS[i % 16].capitalize()} Hall"


def write_wikir_dump(path: Path) -> Path:
    """A MediaWiki XML export of 16 interlinked articles (page ids 101..116) and the pages a WIKIR build skips.

    Article i: an infobox full of full stops, then a first sentence linking to articles i+1, i+2, i+3 (directly,
    piped, bare) and i+4 (through the redirect page "Old <title>"), a later sentence linking to article i+8 and to a
    page that does not exist, then sections "History" and "Geography / Climate". Also: the redirects, a short
    article (too few words to be a document), a talk page, an article without lead (its first section is headed).
    """
    pages = []
    for i, topic in enumerate(WIKIR_TOPICS):
        first = (f"'''{wikir_title(i)}''' is a {topic} house near [[{wikir_title(i + 1)}]], "
                 f"[[{wikir_title(i + 2)}|the {WIKIR_TOPICS[(i + 2) % 16]} one]], [[{wikir_title(i + 3)}]]s and "
                 f"[[Old {wikir_title(i + 4)}]].")
        later = (f"Its keepers trade with [[{wikir_title(i + 8)}]] and [[Nowhere Hall]]. "
                 f"The {topic} hall is kept by {topic} keepers who sweep the {topic} floor every day.")
        history = " ".join(f"In year {k} the {topic} keepers mended the {topic} roof again." for k in range(4))
        climate = " ".join(f"Winter {k} brought {topic} snow to the valley." for k in range(3))
        text = (f"{{{{Infobox building | name = {topic}. Hall. | motto = Keep it. Always.}}}}\n{first} {later}\n\n"
                f"== History ==\n{history}\n\n== Geography ==\n=== Climate ===\n{climate}\n\n"
                f"== References ==\n* A list of sources.\n")
        pages.append(page_xml(wikir_title(i), 101 + i, text))
        pages.append(page_xml(f"Old {wikir_title(i)}", 201 + i, f"#REDIRECT [[{wikir_title(i)}]]",
                              redirect=wikir_title(i)))
    pages.append(page_xml("Tiny Hall", 301, f"'''Tiny Hall''' is small. It links to [[{wikir_title(0)}]]."))
    pages.append(page_xml(f"Talk:{wikir_title(0)}", 302, "A talk page about the hall.", ns=1))
    pages.append(page_xml("Headless Hall", 303, "== Overview ==\n" + " ".join(
        f"Headless line {k} has words enough to count as a document of this collection." for k in range(6))))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(export_xml(pages), encoding="utf-8")
    return path


def write_text_gcn(data: Path, name: str, listing: list[str], raw: list[str], clean: list[str] | None) -> Path:
    """text_gcn's data/ folder: data/<name>.txt, data/corpus/<name>.txt and (when given) <name>.clean.txt."""
    (data / "corpus").mkdir(parents=True, exist_ok=True)
    (data / f"{name}.txt").write_text("\n".join(listing) + "\n")
    (data / "corpus" / f"{name}.txt").write_text("\n".join(raw) + "\n")
    if clean is not None:
        (data / "corpus" / f"{name}.clean.txt").write_text("\n".join(clean) + "\n")
    return data / f"{name}.txt"


def with_edge_documents(documents: list[Document]) -> list[Document]:
    """``documents`` followed by the shapes every token cache must survive: ``"empty"`` (one empty section),
    ``"one"`` (a single sentence, no heading) and ``"gap"`` (an empty section between two sections of text)."""
    return [*documents, Document("empty", sections=[Section("", "")]),
            Document("one", sections=[Section("", "A single sentence of words")]),
            Document("gap", sections=[Section("A", "First part. Second one."), Section("B", ""),
                                      Section("C", "Third part.")])]


def record_cache_builds(monkeypatch) -> list:
    """The ``num_proc`` of every token-cache build from now on (``None`` for one process; the table is still
    written): what a method handed its cache as the processes building it."""
    from lit_docemb.data.caches import row_cache

    built_with, build = [], row_cache.table_from_generator

    def recorded(generator, **kwargs):
        built_with.append(kwargs["num_proc"])
        return build(generator, **kwargs)

    monkeypatch.setattr(row_cache, "table_from_generator", recorded)
    return built_with


ELMO_TINY_OPTIONS = {"lstm": {"use_skip_connections": True, "projection_dim": 6, "cell_clip": 0.6, "proj_clip": 0.5,
                              "dim": 10, "n_layers": 2},
                     "char_cnn": {"activation": "relu", "filters": [[1, 3], [2, 4], [3, 5]], "n_highway": 2,
                                  "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 50}}
"""allennlp's ELMo options layout (``elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json``) at toy sizes."""


def write_elmo_release(folder: Path, seed: int = 0, options: dict | None = None) -> tuple[Path, Path]:
    """(options json, weights hdf5) in the layout of allennlp.org/elmo's release (the dataset names and shapes of
    ``..._5.5B_weights.hdf5``, TensorFlow's ``x @ W`` orientation), random weights at toy sizes."""
    import h5py
    import numpy as np

    options = options or ELMO_TINY_OPTIONS
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim, total = cnn["embedding"]["dim"], sum(count for _, count in cnn["filters"])
    size, cell = lstm["projection_dim"], lstm["dim"]

    def normal(*shape: int, scale: float = 0.5):
        return rng.normal(0.0, scale, shape).astype(np.float32)

    folder.mkdir(parents=True, exist_ok=True)
    options_path, weights_path = folder / "elmo_options.json", folder / "elmo_weights.hdf5"
    options_path.write_text(json.dumps(options), encoding="utf-8")
    with h5py.File(weights_path, "w") as handle:
        handle["char_embed"] = normal(cnn["n_characters"] - 1, char_dim)
        for i, (width, count) in enumerate(cnn["filters"]):
            handle[f"CNN/W_cnn_{i}"] = normal(1, width, char_dim, count)
            handle[f"CNN/b_cnn_{i}"] = normal(count)
        for k in range(cnn["n_highway"]):
            for name, shape in (("W_transform", (total, total)), ("W_carry", (total, total)),
                                ("b_transform", (total,)), ("b_carry", (total,))):
                handle[f"CNN_high_{k}/{name}"] = normal(*shape)
        handle["CNN_proj/W_proj"], handle["CNN_proj/b_proj"] = normal(total, size), normal(size)
        for direction in range(2):
            for layer in range(lstm["n_layers"]):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                handle[f"{prefix}/W_0"], handle[f"{prefix}/B"] = normal(2 * size, 4 * cell), normal(4 * cell)
                handle[f"{prefix}/W_P_0"] = normal(cell, size)
    return options_path, weights_path


def write_skip_thoughts_release(folder: Path, words: list[str], seed: int = 0, dim_word: int = 5, uni_dim: int = 6,
                                bi_dim: int = 4) -> Path:
    """The seven files of github.com/ryankiros/skip-thoughts' generic model in their released layout, at toy sizes:
    ``uni_skip.npz``/``bi_skip.npz`` (the GRU encoders' ``encoder_*`` / ``encoder_r_*`` entries, plus ``Wemb`` and an
    object-array ``history_errs`` as training saved them), their ``.npz.pkl`` option dicts (pickle protocol 0, as
    Python 2 wrote them), ``utable.npy``/``btable.npy`` (object arrays of one vector per word) and ``dictionary.txt``
    (``words`` then ``UNK`` and ``<eos>``, one a line)."""
    import pickle

    import numpy as np

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    dictionary = [*words, "UNK", "<eos>"]
    (folder / "dictionary.txt").write_bytes("".join(f"{w}\n" for w in dictionary).encode("utf-8"))
    for name in ("utable.npy", "btable.npy"):
        table = np.empty(len(dictionary), dtype=object)
        for row in range(len(dictionary)):
            table[row] = rng.normal(0.0, 0.7, dim_word).astype(np.float32)
        np.save(folder / name, table, allow_pickle=True)
    for model, dim, prefixes in (("uni_skip", uni_dim, ("encoder",)), ("bi_skip", bi_dim, ("encoder", "encoder_r"))):
        params = {"Wemb": rng.normal(size=(len(dictionary), dim_word)).astype(np.float32)}
        for prefix in prefixes:
            for name, shape in (("W", (dim_word, 2 * dim)), ("b", (2 * dim,)), ("U", (dim, 2 * dim)),
                                ("Wx", (dim_word, dim)), ("bx", (dim,)), ("Ux", (dim, dim))):
                params[f"{prefix}_{name}"] = rng.normal(0.0, 0.7, shape).astype(np.float32)
        history = np.empty(2, dtype=object)
        history[0], history[1] = [1.5, 2.0], [1.2]
        np.savez(folder / f"{model}.npz", history_errs=history, **params)
        options = {"dim_word": dim_word, "dim": dim, "encoder": "gru", "n_words": len(dictionary),
                   "saveto": f"{model}.npz", "reload_": False}
        (folder / f"{model}.npz.pkl").write_bytes(pickle.dumps(options, protocol=0))
    return folder


def write_beir(root: Path, train: bool = True) -> Path:
    """A retrieval set in the BEIR layout (as ``beir``'s zips and the Cranfield conversion ship it): ``corpus.jsonl``
    (``{"_id", "title", "text"}`` a line, ids strings of digits, one empty document as Cranfield has two),
    ``queries.jsonl`` (``{"_id", "text"}``, every split's queries), ``qrels/test.tsv`` and, with ``train``,
    ``qrels/train.tsv`` (``query-id<TAB>corpus-id<TAB>score`` after that header line; graded scores, a 0 judged
    non-relevant). Document ``d`` is about topic ``d % 4``; query ``q`` asks about topic ``q % 4`` and judges the
    documents of its topic relevant (score 2 for the first, 1 for the others), one other document 0. Queries 1-4 are
    test queries, 5-8 training ones. Returns ``root``."""
    topics = ["wing slipstream lift propeller", "boundary layer heat transfer", "shock wave supersonic flow",
              "panel flutter vibration buckling"]
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    documents = [{"_id": str(d), "title": f"{topics[d % 4]} study {d}",
                  "text": f"an experimental study of {topics[d % 4]} . results for case {d} are given ."}
                 for d in range(1, 17)]
    documents.insert(5, {"_id": "99", "title": "", "text": ""})
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    queries = [{"_id": str(q), "text": f"what is known about {topics[q % 4]} ?"} for q in range(1, 9)]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    for split, numbers in (("test", range(1, 5)), ("train", range(5, 9))):
        if split == "train" and not train:
            continue
        lines = ["query-id\tcorpus-id\tscore"]
        for q in numbers:
            relevant = [d for d in range(1, 17) if d % 4 == q % 4]
            lines += [f"{q}\t{d}\t{2 if i == 0 else 1}" for i, d in enumerate(relevant)]
            lines.append(f"{q}\t{relevant[0] % 16 + 1}\t0")
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def clustered_documents(n_per_topic: int = 6) -> list[Document]:
    topics = {"sea": "ocean tide wave salt harbour ship", "code": "python compiler function loop variable",
              "food": "bread flour oven yeast butter dough"}
    docs = []
    for name, vocabulary in topics.items():
        vocab = vocabulary.split()
        for i in range(n_per_topic):
            body = " ".join(vocab[(i + j) % len(vocab)] for j in range(12))
            docs.append(Document(f"{name}{i}", title=f"{vocab[i % len(vocab)]} {vocab[(i + 1) % len(vocab)]}",
                                 sections=[Section("Abstract", body)]))
    return docs


def sectioned_document(n_sections: int = 3, sentences: int = 4) -> Document:
    return Document("doc", title="T", sections=[Section(f"S{s}", " ".join(
        f"Section {s} sentence {j} has some words in it." for j in range(sentences))) for s in range(n_sections)])
