"""``python -m lit_docemb build-wikir --input <dumps> --output <folder>``: a WIKIR collection with sections kept, built
from a Wikipedia dump with wikIR's construction (queries: first sentences or titles; relevance: the own article 2,
the articles its first sentence links to 1), in the layout ``WIKIRDataModule`` reads: Graph-RoBERTa's Table 5 data.

The construction, its defaults (wikIR's published settings) and where the papers are silent:
:mod:`lit_docemb.data.corpora.wikir_builder`. Examples (the dump Graph-RoBERTa used)::

    python -m lit_docemb build-wikir --input enwiki-20201220-pages-articles-multistream.xml.bz2 \\
        --output data/wikIRS62k
    python -m lit_docemb build-wikir --input enwiki-20201220-pages-articles-multistream.xml.bz2 \\
        --output data/wikIR62k --queries title
"""

from __future__ import annotations

import json
from typing import Literal

from lit_docemb.commands.arguments import run_command
from lit_docemb.data.corpora.wikir_builder import WikirBuilder


def build_wikir(input: list[str], output: str, queries: Literal["first_sentence", "title"] = "first_sentence",
                links: Literal["first_sentence", "all"] = "first_sentence", skip_first_sentence: bool = True,
                min_document_words: int = 200, min_relevant: int = 5, validation_queries: int = 1000,
                test_queries: int = 1000, bm25_depth: int = 100, bm25_k1: float = 1.5, bm25_b: float = 0.75,
                seed: int = 27355) -> dict:
    """Build a WIKIR collection with sections kept from Wikipedia dumps (wikIR's construction, Graph-RoBERTa
    Table 5); prints what build.json records (settings, documents, queries per split, counts).

    Args:
        input: MediaWiki XML dumps (.xml.bz2, multistream too, or .xml): files, or folders of them.
        output: The collection folder: documents.csv, training/validation/test with queries.csv, qrels, BM25.res.
        queries: first_sentence (WIKIRS62K) or title (WIKIR62K).
        links: Links that make an article relevant to a query (1): those of its first sentence (wikIR's -first)
            or all.
        skip_first_sentence: Remove the first sentence from the documents (wikIR's -skip).
        min_document_words: Words an article needs (after the first sentence is removed) to be a document.
        min_relevant: Relevant documents a query needs, its own article included (wikIR's -mrel).
        validation_queries: Queries drawn for the validation split.
        test_queries: Queries drawn for the test split.
        bm25_depth: Documents per query in each split's BM25.res (the hard negatives' pool).
        bm25_k1: BM25's term-frequency saturation (rank_bm25's default, which wikIR uses).
        bm25_b: BM25's length normalisation.
        seed: Seed of the validation and test draw (wikIR's default).
    """
    builder = WikirBuilder(output, queries, links, skip_first_sentence, min_document_words, min_relevant,
                           validation_queries, test_queries, bm25_depth, bm25_k1, bm25_b, seed)
    record = builder.build(input)
    print(json.dumps(record, indent=1))
    print(f"written to {output}/documents.csv, {output}/{{training,validation,test}}/ and {output}/build.json")
    return record


def main(argv: list[str] | None = None) -> dict:
    """Runs :func:`build_wikir` on the command line (see the module docstring)."""
    return run_command(build_wikir, argv, "python -m lit_docemb build-wikir")
