"""``python -m lit_docemb word-vectors --method word2vec|glove --output FILE (--input FILE ... | --config YAML)``: word
vectors trained on a corpus, written as a file that CTPE's ``init: pretrained`` (and the classical word-vector average)
reads. CTPE's word2vec(full), GloVe and GloVe(full) rows (seed paper 004, §4.3, Tables 2-6) are these vectors trained
on the whole public source (full) or on the task's documents; :mod:`lit_docemb.models.word_vectors` trains them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from lit_docemb.commands.arguments import run_command
from lit_docemb.commands.loading import build_datamodule, read_documents
from lit_docemb.data.core.reading import ReadContext, read_lines
from lit_docemb.errors import ConfigError
from lit_docemb.models.word_vectors import WordSentences, train_word_vectors, write_word_vectors
from lit_docemb.views.ctpe import document_fields

METHODS = ("word2vec", "glove")
FORMATS = ("word2vec_binary", "word2vec_text", "glove_text")
INPUT_EXPECTED = ("a text file (one document per line; .gz/.bz2/.xz read too), a lit_docemb .jsonl or an id<TAB>text "
                  ".tsv")


def _document_text(document) -> str:
    """Its title and sections as CTPE reads them for its own word2vec (a title kept as a section counts once)."""
    return "\n".join(text for _, text in document_fields(document))


def _file_texts(paths: list[str]):
    """A function returning a fresh iterator over the documents' texts of ``paths``."""
    def texts():
        for path in paths:
            suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".bz2", ".xz")]
            if suffixes[-1:] in ([".jsonl"], [".json"], [".tsv"], [".tab"]):
                yield from (_document_text(d) for d in read_documents(path))
            else:
                yield from (line for _, line in read_lines(path, ReadContext()))
    return texts


def _datamodule_texts(config: list[str], overrides: list[str]):
    """A function returning a fresh iterator over the texts of every document the configs' DataModule reads."""
    data = build_datamodule(config, overrides)
    data.prepare_data()  # a missing path is one line naming its key
    data.setup("fit")
    documents = data.documents
    return lambda: (_document_text(documents[i]) for i in range(len(documents)))


def word_vectors(output: str, method: str = "word2vec", input: list[str] | None = None,
                 config: list[str] | None = None, vectors_format: str = "word2vec_binary", dim: int = 100,
                 window: int = 10, epochs: int = 100, min_count: int = 5, max_vocabulary: int | None = None,
                 workers: int = 1, seed: int = 1, x_max: float = 100.0, alpha: float = 0.75,
                 learning_rate: float = 0.05, overrides: list[str] | None = None) -> dict:
    """Train word2vec or GloVe vectors on a corpus and write them where CTPE's init: pretrained reads them
    (--model.init_args.embeddings.init_args.vectors FILE, with the same vectors_format).

    Args:
        output: The vectors file to write (e.g. data/vectors/arxiv_word2vec_full.bin).
        method: ``word2vec`` (gensim's skip-gram, CTPE §4.3) or ``glove`` (GloVe as its authors' glove.c trains it).
        input: Corpus files: plain text (one document per line), lit_docemb .jsonl or id<TAB>text .tsv; repeatable.
        config: Instead of --input: a fit config whose data section names the corpus (any DataModule; every
            document it reads); repeatable, later files win, then overrides of that section (data.init_args.<key>
            VALUE, or data followed by another DataModule class) given as config overrides.
        vectors_format: ``word2vec_binary``, ``word2vec_text`` (with a count/dim header) or ``glove_text``.
        dim: Vector dimension (CTPE: 100).
        window: Context window (CTPE: 10).
        epochs: Iterations over the corpus (CTPE: 100).
        min_count: Words seen fewer times get no vector (both programs' default 5).
        max_vocabulary: Keep at most this many words, the most frequent.
        workers: Threads; 1 makes the vectors repeatable for a seed.
        seed: Seed of the initial vectors and of the training order.
        x_max: GloVe: counts at or above it weigh 1 (100).
        alpha: GloVe: exponent of the weight below x_max (0.75).
        learning_rate: GloVe: AdaGrad's initial rate (0.05).
        overrides: With --config: overrides of its data section.
    """
    if method not in METHODS:
        raise ConfigError(f"--method: must be word2vec or glove, got {method!r}")
    if vectors_format not in FORMATS:
        raise ConfigError(f"--vectors_format: must be one of {', '.join(FORMATS)}, got {vectors_format!r}")
    for name, value, low in (("dim", dim, 1), ("window", window, 1), ("epochs", epochs, 1), ("min_count", min_count, 1),
                             ("workers", workers, 1), ("max_vocabulary", max_vocabulary or 1, 1)):
        if value < low:
            raise ConfigError(f"--{name}: must be >= {low}, got {value}")
    if bool(input) == bool(config):
        raise ConfigError("--input / --config: give the corpus one way: --input FILE (" + INPUT_EXPECTED + ") or "
                          "--config a fit config whose data section reads it")
    if overrides and not config:
        raise ConfigError(f"{overrides[0]}: data overrides need --config (the fit config whose data section they "
                          "change)")
    for path in input or []:
        if not Path(path).expanduser().is_file():
            raise ConfigError(f"--input: no file at {path!r}; give {INPUT_EXPECTED}")
    texts = _file_texts(input) if input else _datamodule_texts(config, overrides or [])
    start = time.perf_counter()
    try:
        words, vectors = train_word_vectors(
            WordSentences(texts), method, dim, window, epochs, min_count, max_vocabulary, workers, seed, x_max,
            alpha, learning_rate, log=lambda epoch, cost: print(f"glove iteration {epoch}: cost {cost:.6f}"))
    except ValueError as err:
        raise ConfigError(f"--{'input' if input else 'config'}: {err}") from err
    Path(output).expanduser().parent.mkdir(parents=True, exist_ok=True)
    write_word_vectors(str(Path(output).expanduser()), words, vectors, vectors_format)
    summary = {"method": method, "words": len(words), "dim": int(vectors.shape[1]), "output": output,
               "vectors_format": vectors_format, "seconds": round(time.perf_counter() - start, 1)}
    print("word-vectors " + json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> dict:
    """Runs :func:`word_vectors`."""
    return run_command(word_vectors, argv, "python -m lit_docemb word-vectors")
