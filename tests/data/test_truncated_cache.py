"""A truncated Arrow cache (a kill or a full disk while ``datasets`` wrote it) is rebuilt from the corpus, with a
warning naming it, instead of a pyarrow traceback on every later run (issue 18, item 5)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.data.core.reading import ReadContext, cached_documents


def load(corpus: Path, cache: Path):
    context = ReadContext()
    documents = cached_documents(read_jsonl, {"path": str(corpus)}, inputs=[corpus], context=context,
                                 cache_dir=str(cache))
    return documents, context


def test_a_truncated_cache_is_rebuilt(tmp_path, caplog):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": f"document {i} " * 40}) + "\n" for i in range(50))
                      + '{"id": "empty", "text": ""}\n')
    documents, context = load(corpus, tmp_path / "cache")
    assert len(documents) == 50 and context.stats["empty_document"] == 1
    [arrow] = (tmp_path / "cache").rglob("*.arrow")
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    with caplog.at_level(logging.WARNING, logger="lit_docemb.data.core.reading"):
        documents, context = load(corpus, tmp_path / "cache")
    assert [d.id for d in documents] == [str(i) for i in range(50)]
    assert documents[49].text == "document 49 " * 40 and context.stats["empty_document"] == 1
    assert f"the Arrow cache of {corpus} cannot be read" in caplog.text and "rebuilding it" in caplog.text
