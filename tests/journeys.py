"""A shipped config made runnable in a test: the tiny encoder instead of the hub model, a fixture of its corpus in
the corpus's real on-disk layout, a CPU trainer of a few steps writing into a temporary run folder.

The config keeps its own scheduler, callbacks, logger and evaluations. Which corpus fixture: :data:`CORPORA`,
keyed on the DataModule class the config names; which model overrides: :data:`MODELS`, keyed on the method class.
A config whose DataModule or method has no entry cannot be prepared: :func:`journey_config` says what to add.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import yaml
from corpus_files import (
    BBC_TOPICS,
    labelled_docs,
    write_aan_network,
    write_beir,
    write_bbc_release,
    write_elmo_release,
    write_arxiv_snapshot,
    write_fakenews,
    write_google_patents,
    write_labelled_folder,
    write_lra,
    write_msmarco,
    write_nyt_annotated,
    write_hyperpartisan,
    write_instructor_folder,
    write_ppdb,
    write_release,
    topic_texts,
    write_skip_thoughts_release,
    write_robust04,
    write_text_gcn,
    write_wikipedia_dump,
    write_wikir_dump,
)

from lit_docemb.models.ctpe_tokenizers import preprocess_words

ROOT = Path(__file__).resolve().parents[1]


def _short(class_path: str) -> str:
    return class_path.rsplit(".", 1)[-1]


# --- corpora: DataModule class -> (fixture writer, init_args it sets) ----------------------------------------
def _labelled(data: dict, folder: Path) -> dict:
    """LabelledTextDataModule, in the layout the config reads: Yao et al.'s text_gcn list and corpus files, an
    aclImdb folder with its unlabelled ``unsup`` reviews, FakeNewsCorpus's ``news_cleaned_2018_02_13.csv``, BBC's
    topic folders, LDC's ``nyt_corpus`` (NYT Annotated Corpus archives), Longformer's Hyperpartisan
    train/dev/test.jsonl, headerless TSV where the config names its columns, JSONL with ``text``/``label`` keys
    otherwise (hub sets saved locally)."""
    cache = {"cache_dir": str(folder / "cache")}
    if data.get("source_format") == "text_gcn":
        return {"source": str(write_text_gcn_release(folder / "text_gcn", "R8")), **cache}
    if data.get("unlabelled_class"):
        return {"source": str(write_imdb_folders(folder / "aclImdb", data["classes"], data["unlabelled_class"])),
                **cache}
    if Path(str(data.get("source", ""))).name == "bbc":  # bbc-fulltext.zip unzipped: topic folders, no split
        return {"source": str(write_bbc_release(folder / "bbc")), **cache}
    if data.get("source_format") == "nyt_annotated":  # LDC's nyt_corpus folder of .tgz archives, no split
        return {"source": str(write_nyt_annotated(folder / "nyt_corpus")), **cache}
    if Path(str(data.get("source", ""))).name == "news_cleaned_2018_02_13.csv":  # FakeNews: one CSV, no split
        return {"source": str(write_fakenews(folder / "news_cleaned_2018_02_13.csv")), **cache}
    if data.get("val_split"):
        return {"source": str(write_hyperpartisan(folder / "hyperpartisan")), **cache}
    if data.get("column_names"):
        folder.mkdir(parents=True, exist_ok=True)
        columns = data["column_names"]
        for split, docs in [("train", labelled_docs(24)), ("test", labelled_docs(8))]:
            rows = ({"label": d.label, "text": d.text} for d in docs)
            (folder / f"{split}.tsv").write_text("".join("\t".join(r[c] for c in columns) + "\n" for r in rows))
        return {"source": str(folder), **cache}
    return {"source": str(write_labelled_folder(folder)), "label_column": "label", "text_column": "text", **cache}


def write_text_gcn_release(data: Path, name: str) -> Path:
    """text_gcn's files for 24 training and 8 test documents (:func:`corpus_files.write_text_gcn`)."""
    docs = [(doc, "train") for doc in labelled_docs(24)] + [(doc, "test") for doc in labelled_docs(8)]
    texts = [doc.text for doc, _ in docs]
    return write_text_gcn(data, name, [f"{i}\t{split}\t{doc.label}" for i, (doc, split) in enumerate(docs)], texts,
                          [text.lower().replace(".", "") for text in texts])


def write_imdb_folders(root: Path, classes: list[str], unlabelled: str) -> Path:
    """aclImdb: ``{train,test}/<class>/<id>_<rating>.txt`` and the unlabelled ``train/<unlabelled>/`` reviews."""
    names = dict(zip(("code", "sea"), classes, strict=True))
    for split, docs in (("train", labelled_docs(24)), ("test", labelled_docs(8))):
        for doc in docs:
            (root / split / names[doc.label]).mkdir(parents=True, exist_ok=True)
            (root / split / names[doc.label] / f"{doc.id}_7.txt").write_text(doc.text)
    (root / "train" / unlabelled).mkdir(parents=True, exist_ok=True)
    for doc in labelled_docs(6):
        (root / "train" / unlabelled / f"{doc.id}_0.txt").write_text(doc.text)
    return root


def write_ctpe_task(root: Path) -> Path:
    """A CTPE task folder (candidates.jsonl, test.jsonl, qrels.txt): Python documentation topics as papers with a
    title, an abstract and claims (so both shipped split positions apply: ``title`` and ``before:Claims``); a test
    document is relevant to the candidates whose name starts with its first letter."""
    from pydoc_data.topics import topics

    names = sorted(n for n, t in topics.items() if len(t.split()) > 80)[:40]
    root.mkdir(parents=True, exist_ok=True)
    docs = {n: {"id": n, "title": n.replace("-", " "),
                "sections": [{"heading": "Abstract", "text": " ".join(topics[n].split()[:60])},
                             {"heading": "Claims", "text": " ".join(topics[n].split()[60:120])}]}
            for n in names}
    candidates, tests = names[::2], names[1::2]
    for file, ids in (("candidates.jsonl", candidates), ("test.jsonl", tests)):
        (root / file).write_text("".join(json.dumps(docs[n]) + "\n" for n in ids))
    lines = [f"{q} 0 {c} 1" for q in tests for c in candidates if c[0] == q[0]]
    (root / "qrels.txt").write_text("\n".join(lines) + "\n")
    return root


def ctpe_task_config(tmp_path: Path, name: str, embeddings: dict, max_length: int, document_vector: str) -> str:
    """A two-step CTPE fit config on :func:`write_ctpe_task`'s task with the given input ``embeddings`` (a class path
    and its init args), written to ``tmp_path/<name>_<document_vector>.yaml``; its run folder is ``tmp_path/run``."""
    task = write_ctpe_task(tmp_path / "task")
    config = tmp_path / f"{name}_{document_vector}.yaml"
    config.write_text(yaml.safe_dump({
        "seed_everything": 1,
        "trainer": {"default_root_dir": str(tmp_path / "run"), "logger": False, "accelerator": "cpu",
                    "max_steps": 2, "enable_progress_bar": False, "limit_val_batches": 0},
        "model": {"class_path": "lit_docemb.methods.CTPE", "init_args": {
            "embeddings": embeddings, "n_filters": 4, "max_length": max_length, "document_vector": document_vector}},
        "data": {"class_path": "lit_docemb.data.JSONLDataModule", "init_args": {
            "paths": [str(task / "candidates.jsonl"), str(task / "test.jsonl")], "num_workers": 0,
            "batch_size": 8, "val_fraction": 0.0}}}))
    return str(config)


def _jsonl(data: dict, folder: Path) -> dict:
    task = write_ctpe_task(folder)
    return {"paths": [str(task / "candidates.jsonl"), str(task / "test.jsonl")]}


def _wikipedia(data: dict, folder: Path) -> dict:
    return {"source": str(write_wikipedia_dump(folder / "enwiki.xml")), "cache_dir": str(folder / "cache"),
            "val_fraction": 0.3}


def _aan(data: dict, folder: Path) -> dict:
    if data.get("layout", "lra") != "network":
        return {"source": str(write_lra(folder / "lra"))}
    return {"source": str(write_aan_network(folder / "aan")), "citations_file": "acl.txt"}


def _patents(data: dict, folder: Path) -> dict:
    return {"source": str(write_google_patents(folder / "patents" / "publications-000000000000.json.gz")),
            "cache_dir": str(folder / "cache")}


def _similarity_groups(data: dict, folder: Path) -> dict:
    """The corpus's fixture; a matching split (``test_fraction``) holds out 30% of the groups for validation and
    30% for test, over six Wikipedia link groups (two per split, so that each split has negative pairs)."""
    corpus = data["corpus"]
    inner = CORPORA[_short(corpus["class_path"])](corpus.get("init_args") or {}, folder)
    inner.pop("val_fraction", None)
    update = {"val_fraction": 0.3}
    if data.get("test_fraction"):
        update["test_fraction"] = 0.3
        if _short(corpus["class_path"]) == "WikipediaDataModule":
            inner["source"] = str(write_wikipedia_dump(folder / "enwiki_six_groups.xml", groups=6))
    return {**update, "corpus": {"class_path": corpus["class_path"],
                                 "init_args": {**(corpus.get("init_args") or {}), **inner}}}


def _wikir(data: dict, folder: Path) -> dict:
    """A WIKIR collection made as the paper's: built by build-wikir from a Wikipedia dump, sections kept (so the
    section-graph config runs too), title queries (WIKIR62K), a BM25 run per split for the hard negatives."""
    from lit_docemb.data.corpora.wikir_builder import WikirBuilder

    dump = write_wikir_dump(folder / "enwiki-20201220-pages-articles-multistream.xml")
    WikirBuilder(str(folder / "wikIR62k"), queries="title", min_document_words=40, validation_queries=2,
                 test_queries=2).build([str(dump)])
    return {"root": str(folder / "wikIR62k"), "negatives": "run", "negatives_run": None, "num_negatives": 2,
            "val_queries_from_train": 0, "cache_dir": str(folder / "cache")}


def _beir(data: dict, folder: Path) -> dict:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/), with train qrels when the config trains on them."""
    root = write_beir(folder / "beir", train=data.get("train_split", "train") is not None)
    return {"root": str(root), "cache_dir": str(folder / "cache"), "val_fraction": 0.3}


def _msmarco(data: dict, folder: Path) -> dict:
    """The MS MARCO document-ranking files; a config training on mined negatives (``negatives_run``) gets the run
    that ``dense-search`` would have written for the training queries (here: the BM25 top 100, unzipped)."""
    root = write_msmarco(folder / "msmarco")
    update = {"root": str(root), "cache_dir": str(folder / "cache"), "val_queries_from_train": 2}
    if data.get("negatives_run"):
        mined = folder / "train-top100.run"
        mined.write_bytes(gzip.decompress((root / "msmarco-doctrain-top100.gz").read_bytes()))
        update["negatives_run"] = str(mined)
    return update


def _robust04(data: dict, folder: Path) -> dict:
    """Robust04's disks 4 & 5 folders (the collections the config names), topics, qrels and folds."""
    root = write_robust04(folder / "robust04")
    documents = [str(root / Path(*Path(path).parts[-2:])) for path in data["documents"]]  # disk4/FT, ...
    return {"documents": documents, "topics": str(root / "04.testset"), "qrels": str(root / "qrels.robust2004.txt"),
            "folds": str(root / "folds.json"), "cache_dir": str(folder / "cache"), "num_negatives": 2}


def _openwebtext(data: dict, folder: Path) -> dict:
    write_release(folder / "openwebtext")
    # 4 usable pages; 0.7 holds out 2 of them (their stable hashes), so held-out retrieval has a pair to rank
    return {"source": str(folder / "openwebtext"), "cache_dir": str(folder / "cache"), "val_fraction": 0.7}


def write_arxiv_folders(root: Path) -> Path:
    """The arXiv-11 classification release: ``<class>/<paper>.txt``, two classes of labelled papers."""
    for doc in labelled_docs(24):
        label = {"code": "cs.PL", "sea": "math.GR"}[doc.label]
        (root / label).mkdir(parents=True, exist_ok=True)
        (root / label / f"{doc.id}.txt").write_text(doc.text)
    return root


def _arxiv(data: dict, folder: Path) -> dict:
    """The release the config names: the metadata snapshot (a ``.json`` source) or the arXiv-11 class folders."""
    if str(data.get("source", "")).endswith(".json"):
        source = write_arxiv_snapshot(folder / "arxiv-metadata-oai-snapshot.json")
    else:
        source = write_arxiv_folders(folder / "arxiv11")
    return {"source": str(source), "cache_dir": str(folder / "cache"), "val_fraction": 0.3}


def _installed_docs(data: dict, folder: Path) -> dict:
    # the installed Python's reference topics and the first standard-library modules: always there, quick to read,
    # two sources, so the before/after report's clustering and probe have two labels
    return {"sources": ["pydoc", "stdlib"], "max_documents": 80}


CORPORA: dict[str, Callable[[dict, Path], dict]] = {
    "LabelledTextDataModule": _labelled,
    "JSONLDataModule": _jsonl,
    "WikipediaDataModule": _wikipedia,
    "AANDataModule": _aan,
    "PatentDataModule": _patents,
    "SimilarityGroupDataModule": _similarity_groups,
    "WIKIRDataModule": _wikir,
    "OpenWebTextDataModule": _openwebtext,
    "InstalledDocsDataModule": _installed_docs,
    "ArxivDataModule": _arxiv,
    "MSMARCODataModule": _msmarco,
    "BEIRDataModule": _beir,
    "Robust04DataModule": _robust04,
}
"""DataModule class name -> writer of a fixture in that corpus's on-disk layout, returning the data init_args
that point the config at it."""


# --- methods: class -> init_args overrides for the tiny encoder ------------------------------------------------
def config_block(args: dict, key: str, **changes) -> dict:
    """The config's ``key`` block (a :class:`~lit_docemb.config_block.ConfigBlock`, written plainly or as
    ``class_path`` / ``init_args``; absent: empty) as its arguments, with ``changes``."""
    block = dict(args.get(key) or {})
    return {**block.get("init_args", block), **changes}


def encoder_block(args: dict, name: str, **changes) -> dict:
    """The config's ``encoder`` block (:class:`~lit_docemb.models.EncoderSpec`) naming the encoder ``name``, with
    ``changes``."""
    return config_block(args, "encoder", name=name, **changes)


def _graph_roberta(args: dict, encoder: str, folder: Path) -> dict:
    # head_init identity needs nodes at least as wide as the tiny encoder's 32
    update = {"encoder": encoder_block(args, encoder), "node_dim": 32 if args.get("head_init") == "identity" else 16,
              "passages": config_block(args, "passages", max_passage_tokens=64)}
    if args.get("grad_cache_token_budget"):
        update["grad_cache_token_budget"] = 256
    return update


#: The topics the BBC and NYT fixtures file their documents under, named as the releases name them: a config's own
#: labels where it names them (its classifier checks them against the training split's).
FIXTURE_TOPICS = {*BBC_TOPICS.values(), "arts", "business", "sports"}


def _wrapper(args: dict, encoder: str, folder: Path) -> dict:
    backbone = args["backbone"]
    inner = MODELS[_short(backbone["class_path"])](backbone.get("init_args") or {}, encoder, folder)
    update = {"backbone": {"class_path": backbone["class_path"], "init_args": {**backbone["init_args"], **inner}},
              "checkpoint": None}
    if "labels" in args:  # the fixtures' two classes (arXiv's folders: cs.PL and math.GR; the snapshot's archives
        labels = args["labels"]  # cs and math; Hyperpartisan's; BBC's and NYT's topics)
        update["labels"] = ["cs.PL", "math.GR"] if any(str(x).startswith("cs.") for x in labels) \
            else ["cs", "math"] if "cs" in labels else ["fake", "reliable"] if "reliable" in labels \
            else labels if set(labels) == {"false", "true"} or FIXTURE_TOPICS & set(labels) else ["code", "sea"]
    return update


def _docsplit(args: dict, encoder: str, folder: Path) -> dict:
    block = encoder_block(args, encoder, first_token_global_attention=False,  # Longformer's: the tiny BERT has none
                          max_length=64)
    if block.get("instruction") or block.get("sentence_transformers_head"):  # INSTRUCTOR: a tiny T5 in its layout
        block["name"] = str(write_instructor_folder(folder / "tiny_instructor"))
    return {"encoder": block}


def _deca(args: dict, encoder: str, folder: Path) -> dict:
    backbone = dict(args["backbone"])
    backbone_args = dict(backbone.get("init_args") or {})
    if _short(backbone["class_path"]) == "EncoderBackbone":
        backbone_args["encoder"] = {**dict(backbone_args.get("encoder") or {}), "name": encoder, "max_length": 64}
    else:
        backbone_args.update(embedding_dim=16, min_word_count=1)
    update = {"backbone": {**backbone, "init_args": backbone_args}}
    if not args.get("augmentation"):  # a framework that draws none (Doc2VecCAlone)
        return update
    augmentation = dict(args["augmentation"])
    augmentation_args = dict(augmentation.get("init_args") or {})
    if augmentation_args.get("dictionary_constraint", True):  # the fixture's words are rare: any count will do
        augmentation_args["replacement_min_count"] = 1
    if _short(augmentation["class_path"]) == "PPDB":
        augmentation_args["path"] = str(write_ppdb(folder / "ppdb-2.0-s-lexical"))
    return update | {"augmentation": {**augmentation, "init_args": augmentation_args}}


def _colde(args: dict, encoder: str, folder: Path) -> dict:
    update = {"encoder": encoder_block(args, encoder), "chunk_tokens": 32, "lstm_output_size": 16, "projection_size": 8,
              "num_heads": 2}
    if args.get("grad_cache_token_budget"):
        update["grad_cache_token_budget"] = 64
    return update


def _ctpe(args: dict, encoder: str, folder: Path) -> dict:
    embeddings = dict(args["embeddings"])
    init = dict(embeddings.get("init_args") or {})
    if "encoder" in init:
        init["encoder"] = encoder
    elif "weights_file" in init:  # ElmoTokens: a tiny release in allennlp's layout
        options_file, weights_file = write_elmo_release(folder / "elmo")
        init.update(options_file=str(options_file), weights_file=str(weights_file))
    elif "folder" in init:  # SkipThoughtSentences: a tiny release in the authors' layout
        words = sorted({w for text in topic_texts(8) for w in preprocess_words(text)})  # the embedded documents' words
        init["folder"] = str(write_skip_thoughts_release(folder / "skip_thoughts", words))
    else:
        init.update(dim=16, min_count=1, epochs=1)
    update = {"embeddings": {**embeddings, "init_args": init}, "n_filters": 8, "max_length": 32}
    if args.get("tfidf_neighbours"):
        update["tfidf_neighbours"] = 5
    return update


def _classical(args: dict, encoder: str, folder: Path) -> dict:
    """No encoder: the representation's sizes and passes cut to the fixture's few documents."""
    representation = dict(args["representation"])
    init = dict(representation.get("init_args") or {})
    init.update({key: value for key, value in {"dimension": 8, "topics": 4, "epochs": 2, "iterations": 2}.items()
                 if key in init})
    if _short(representation["class_path"]) in ("WordVectorAverage", "ParagraphVectors"):
        init["min_count"] = 1  # the fixture's words are rare
    if _short(representation["class_path"]) == "SkipThoughtAverage":  # a tiny release in the authors' layout
        texts = [doc.text for doc in labelled_docs(32)] + topic_texts(8)
        words = sorted({w for text in texts for w in preprocess_words(text)})
        init["folder"] = str(write_skip_thoughts_release(folder / "skip_thoughts", words))
    return {"representation": {**representation, "init_args": init}}


MODELS: dict[str, Callable[[dict, str, Path], dict]] = {
    "GraphRoBERTa": _graph_roberta, "DocumentClassifier": _wrapper, "DenseRetrieval": _wrapper,
    "DocSplit": _docsplit, "DECA": _deca, "CoLDE": _colde, "CTPE": _ctpe, "ClassicalBaseline": _classical,
    "MaskedLanguageModelling": _docsplit, "SimCSE": _docsplit,  # the same encoder block
}
"""Method class name -> its init_args overrides: the tiny encoder and sizes that fit it (and files it reads,
written into the given folder)."""


def _trainer(trainer: dict, run: Path, corpus: Path) -> dict:
    # max_steps, not the config's epochs, ends the journey's fits: a 2-step fit ends its epoch early, and Lightning
    # resumes such a run at the next epoch, which max_epochs: 1 (DECA's Table 7 configs) would not allow
    trainer = {k: v for k, v in trainer.items() if k not in ("strategy", "val_check_interval", "num_nodes",
                                                             "max_epochs")}
    trainer.update(default_root_dir=str(run), accelerator="cpu", devices=1, precision="32-true", max_steps=2,
                   log_every_n_steps=1, enable_progress_bar=False)
    if trainer.get("limit_val_batches", 1) != 0:
        trainer["limit_val_batches"] = 1
    logger = trainer.get("logger")
    if isinstance(logger, dict):
        logger["init_args"] = {**(logger.get("init_args") or {}), "save_dir": str(run)}
    for callback in trainer.get("callbacks") or []:
        if _short(callback["class_path"]) == "CandidateRanking":  # the task folder the JSONL fixture wrote
            callback["init_args"] = {**(callback.get("init_args") or {}), "root": str(corpus)}
    return trainer


def with_pieces(node, folder: Path):
    """``node`` (a loaded config) with each YAML file it names as a value (``logger: ../trainer/wandb_logger.yaml``,
    read by jsonargparse relative to the config's folder) replaced by that file's content."""
    if isinstance(node, dict):
        return {key: with_pieces(value, folder) for key, value in node.items()}
    if isinstance(node, list):
        return [with_pieces(value, folder) for value in node]
    if isinstance(node, str) and node.endswith((".yaml", ".yml")) and (folder / node).is_file():
        return with_pieces(yaml.safe_load((folder / node).read_text(encoding="utf-8")), (folder / node).parent)
    return node


def journey_config(config: Path, encoder: str, tmp_path: Path) -> Path:
    """``config`` made runnable here, written to ``tmp_path/config.yaml``; its run folder is ``tmp_path/run``."""
    raw = with_pieces(yaml.safe_load(config.read_text(encoding="utf-8")), config.parent)
    data, model = raw["data"], raw["model"]
    name = _short(data["class_path"])
    if name not in CORPORA:
        raise LookupError(f"{config}: no corpus fixture for {data['class_path']}; add a writer of its on-disk "
                          "layout to tests/journeys.py CORPORA (and tests/corpus_files.py)")
    method = _short(model["class_path"])
    if method not in MODELS:
        raise LookupError(f"{config}: no tiny-encoder overrides for {model['class_path']}; add them to "
                          "tests/journeys.py MODELS")
    corpus = tmp_path / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    data_args = data.get("init_args") or {}
    batch = "global_batch_size" if "global_batch_size" in data_args else "batch_size"  # a paper config's, or ours
    data["init_args"] = {**data_args, **CORPORA[name](data_args, corpus), "num_workers": 0,
                         batch: 8 if name == "JSONLDataModule" else 4}
    model_args = model.get("init_args") or {}
    model["init_args"] = {**model_args, **MODELS[method](model_args, encoder, corpus)}
    raw["trainer"] = _trainer(raw.get("trainer") or {}, tmp_path / "run", corpus)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path
