"""CTPE's released subsets (github.com/opendata-ai/tr: arXiv, DBLP and USPTO, 1,000 test documents and 20,000
candidates each) converted to the task folder that :mod:`lit_docemb.eval.candidates` reads.

A released file is, per its README:

* first line: the ground truth, a Python dict literal ``{'<test id>': {'<candidate id>', ...}, ...}`` (a set or a
  list of relevant candidates per test document: same subject for arXiv, cited for DBLP and USPTO);
* every other line: ``<id>\\t<title>\\t<abstract>`` (USPTO may add ``\\t<first paragraph of the claims>``).

The test documents are the ground truth's keys; every other document is a candidate. The literal is read with
:func:`ast.literal_eval` (data, never code). Output: ``candidates.jsonl``, ``test.jsonl`` (lit_docemb JSONL, sections
``Abstract`` and, when present, ``Claims``) and ``qrels.txt`` (``<test id> 0 <candidate id> 1``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from lit_docemb.data.core.document import Document, Section

SECTION_HEADINGS = ("Abstract", "Claims")


def _ground_truth(line: str, path: Path) -> dict[str, set[str]]:
    try:
        value = ast.literal_eval(line.strip())
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"{path}:1: the first line must be the ground truth, a dict literal "
                         f"{{'<test id>': {{'<candidate id>', ...}}, ...}} ({err})") from err
    if not isinstance(value, dict) or not all(isinstance(v, set | list | tuple | frozenset) for v in value.values()):
        raise ValueError(f"{path}:1: the ground truth must map each test id to a set of candidate ids")
    return {str(k): {str(c) for c in v} for k, v in value.items()}


def read_ctpe_release(path: str | Path) -> tuple[list[Document], list[Document], dict[str, set[str]]]:
    """(candidates, test documents, ground truth) of a released file (see the module docstring). A line
    without an id and a title, a repeated id, and ground-truth ids without a document are errors naming the line
    or the ids."""
    path = Path(path).expanduser()
    with open(path, encoding="utf-8") as f:
        first = f.readline()
        truth = _ground_truth(first, path)
        documents: dict[str, Document] = {}
        for number, line in enumerate(f, 2):
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < 3 or len(fields) > 2 + len(SECTION_HEADINGS):
                raise ValueError(f"{path}:{number}: {len(fields)} tab-separated fields; expected "
                                 f"<id>\\t<title>\\t<abstract>[\\t<claims>]")
            doc_id, title, *texts = (x.strip() for x in fields)
            if doc_id in documents:
                raise ValueError(f"{path}:{number}: id {doc_id!r} appears twice")
            documents[doc_id] = Document(doc_id, title=title,
                                         sections=[Section(h, t) for h, t in zip(SECTION_HEADINGS, texts)])
    missing = sorted({q for q in truth if q not in documents} | {c for cs in truth.values() for c in cs
                                                                 if c not in documents})
    if missing:
        raise ValueError(f"{path}: {len(missing)} ground-truth ids have no document line, e.g. {missing[:5]}")
    tests = [documents[q] for q in truth]
    candidates = [d for i, d in documents.items() if i not in truth]
    return candidates, tests, truth


def convert_ctpe_release(path: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Writes ``out_dir/{candidates.jsonl, test.jsonl, qrels.txt}`` from a released file; returns the counts."""
    candidates, tests, truth = read_ctpe_release(path)
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    for name, documents in (("candidates.jsonl", candidates), ("test.jsonl", tests)):
        with open(out / name, "w", encoding="utf-8") as f:
            f.writelines(d.to_json() + "\n" for d in documents)
    with open(out / "qrels.txt", "w", encoding="utf-8") as f:
        f.writelines(f"{q} 0 {c} 1\n" for q in truth for c in sorted(truth[q]))
    return {"candidates": len(candidates), "test": len(tests), "qrels": sum(map(len, truth.values()))}
