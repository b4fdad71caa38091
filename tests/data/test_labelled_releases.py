"""The labelled sets in the layouts users download for DECA's tables: Yao et al.'s text_gcn files (R8, R52, mr,
ohsumed, 20ng: a name/split/label list plus a corpus file line for line), Pang and Lee's rt-polarity.pos/.neg, and
the DECA configs' hints naming them. Every text here is invented."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from corpus_files import labelled_docs, write_semeval_hyperpartisan, write_text_gcn

from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.data.corpora.labelled_formats import iter_semeval_hyperpartisan, iter_text_gcn, text_gcn_corpus
from lit_docemb.data.core.reading import MalformedInputError, ReadContext
from lit_docemb.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

#: text_gcn's data/R8.txt: "<name>\t<train|test>\t<label>"; 20ng's split fields are 20news-bydate-train/-test.
R8_LIST = ["0\ttrain\tacq", "1\ttrain\tearn", "2\ttest\tearn", "3\ttrain\tcrude", "4\ttest\tacq"]
R8_RAW = ["Company A buys company B, shares rise.", "Quarterly earnings were strong.", "Net profit up 3 pct.",
          "Crude oil prices fell again.", "Takeover bid for the mill."]
R8_CLEAN = ["company buys company shares rise", "quarterly earnings strong", "net profit pct",
            "crude oil prices fell", "takeover bid mill"]
NG_LIST = ["data/20ng/20news-bydate-train/sci.space/6001\t20news-bydate-train\tsci.space",
           "data/20ng/20news-bydate-test/rec.autos/7002\t20news-bydate-test\trec.autos",
           "data/20ng/20news-bydate-train/rec.autos/7003\t20news-bydate-train\trec.autos"]


def module(source: Path, tmp_path: Path, **kwargs) -> LabelledTextDataModule:
    dm = LabelledTextDataModule(source=str(source), batch_size=8, num_workers=0, val_fraction=0.0,
                                cache_dir=str(tmp_path / "cache"), **kwargs)
    dm.collate_fn = list
    dm.setup("fit")
    return dm


def test_text_gcn_list_and_clean_corpus_give_yaos_splits(tmp_path):
    listing = write_text_gcn(tmp_path / "data", "R8", R8_LIST, R8_RAW, R8_CLEAN)
    dm = module(listing, tmp_path, source_format="text_gcn")
    assert [(d.id, d.label, d.text) for d in dm.train_set] == [
        ("0", "acq", R8_CLEAN[0]), ("1", "earn", R8_CLEAN[1]), ("3", "crude", R8_CLEAN[3])]
    assert [(d.id, d.label) for d in dm.test_set] == [("2", "earn"), ("4", "acq")]
    raw = module(listing, tmp_path, source_format="text_gcn", text_gcn_corpus="raw")
    assert [d.text for d in raw.test_set] == [R8_RAW[2], R8_RAW[4]]
    served = sorted(d.id for batch in module(listing, tmp_path, source_format="text_gcn", fit_on="all")
                    .train_dataloader() for d in batch)
    assert served == ["0", "1", "2", "3", "4"]  # DECA trains on all documents


def test_text_gcn_20ng_split_fields_and_mismatched_files(tmp_path):
    listing = write_text_gcn(tmp_path / "data", "20ng", NG_LIST, ["space text", "car text", "more car text"],
                             ["space text", "car text", "more car text"])
    context = ReadContext()
    train = list(iter_text_gcn(str(listing), str(text_gcn_corpus(listing)), "train", context=context))
    assert [(d.id, d.label) for d in train] == [("data/20ng/20news-bydate-train/sci.space/6001", "sci.space"),
                                                ("data/20ng/20news-bydate-train/rec.autos/7003", "rec.autos")]
    (tmp_path / "data" / "corpus" / "20ng.clean.txt").write_text("only one line\n")
    with pytest.raises(ValueError, match="has 3 lines but .*20ng.clean.txt has 1"):
        list(iter_text_gcn(str(listing), str(text_gcn_corpus(listing)), "train", context=ReadContext()))
    alone = write_text_gcn(tmp_path / "bare", "mr", ["0\ttrain\t1"], ["a sentence"], None)
    with pytest.raises(FileNotFoundError, match=r"corpus/mr.clean.txt"):
        text_gcn_corpus(alone)


def test_rt_polarity_files_are_read_as_latin1_with_labels(tmp_path):
    folder = tmp_path / "rt-polaritydata"
    folder.mkdir()
    (folder / "rt-polarity.pos").write_bytes(b"a charming , caf\xe9-set tale .\nwarm and funny .\n")
    (folder / "rt-polarity.neg").write_bytes(b"dull .\n\n")
    dm = module(folder, tmp_path, source_format="rt_polarity", encoding="latin-1")
    assert [(d.id, d.label, d.text) for d in dm.train_set] == [
        ("rt-polarity.pos:1", "pos", "a charming , café-set tale ."), ("rt-polarity.pos:2", "pos", "warm and funny ."),
        ("rt-polarity.neg:1", "neg", "dull .")]
    assert dm.test_set is None and dm.stats == Counter(empty_document=1)
    (folder / "rt-polarity.neg").unlink()
    with pytest.raises(FileNotFoundError, match="rt-polarity.neg not in"):
        module(folder, tmp_path / "again", source_format="rt_polarity")


@pytest.mark.parametrize("name", ["mr", "ohsumed", "r8", "r52"])
def test_deca_configs_read_yaos_text_gcn_files_and_train_on_all_documents(name):
    config = yaml.safe_load((ROOT / f"configs/deca/{name}_dc_sc.yaml").read_text())
    data = config["data"]["init_args"]
    listing = {"mr": "mr", "ohsumed": "ohsumed", "r8": "R8", "r52": "R52"}[name]
    assert data["source_format"] == "text_gcn" and data["source"].endswith(f"/{listing}.txt")
    assert data["fit_on"] == "all"
    header = (ROOT / f"configs/deca/{name}_dc_sc.yaml").read_text().split("seed_everything")[0]
    assert f"{listing}.txt" in header and "r8-train-all-terms" not in header


def _hyperpartisan(articles: Path, **options) -> LabelledTextDataModule:
    datamodule = LabelledTextDataModule(str(articles), source_format="semeval_hyperpartisan",
                                        cache_dir=str(articles.parent / "cache"), num_workers=0, **options)
    datamodule.setup("fit")
    return datamodule


def test_semeval_hyperpartisan_release_with_longformers_splits(tmp_path):
    """articles-*.xml + ground-truth-*.xml as SemEval-2019 task 4 publishes them, split by hp-splits.json (train /
    dev / test, positions in the articles file): dev validates, test is the test split."""
    articles = write_semeval_hyperpartisan(tmp_path / "hyperpartisan")
    datamodule = _hyperpartisan(articles, splits_file=str(articles.parent / "hp-splits.json"), val_split="dev",
                                val_fraction=0.0)
    splits = json.loads((articles.parent / "hp-splits.json").read_text())
    ids = [f"{3 * i + 1:07d}" for i in range(20)]  # the fixture's article ids, in file order
    for name, dataset in (("train", datamodule.train_set), ("dev", datamodule.val_set),
                          ("test", datamodule.test_set)):
        assert sorted(document.id for document in dataset) == sorted(ids[i] for i in splits[name])
    first = next(document for document in datamodule.train_set if document.id == "0000001")
    expected = labelled_docs(1)[0]
    assert first.label == "false" and first.title == " ".join(expected.text.split()[:4])
    assert first.text.split("\n\n")[0] == expected.text.split(". ")[0] + ". see & more"  # the link inlined
    assert first.metadata == {"published_at": "2017-09-10", "url": "https://example.com/0000001",
                              "labeled_by": "article"}
    assert {document.label for document in datamodule.val_set} <= {"true", "false"}


def test_semeval_hyperpartisan_without_splits_file_and_with_the_test_release(tmp_path):
    training = write_semeval_hyperpartisan(tmp_path / "train")
    test = write_semeval_hyperpartisan(tmp_path / "test", counts=(3, 1, 1), part="test-byarticle-20181207")
    datamodule = _hyperpartisan(training, test_source=str(test), val_fraction=0.2)
    assert len(datamodule.train_set) + len(datamodule.val_set) == 20 and len(datamodule.test_set) == 5


def test_semeval_hyperpartisan_bad_input_is_named(tmp_path):
    articles = write_semeval_hyperpartisan(tmp_path / "hyperpartisan")
    truth = articles.parent / "ground-truth-training-byarticle-20181122.xml"
    truth.write_text(truth.read_text().replace('<article id="0000004" hyperpartisan="true"',
                                               '<article id="9999999" hyperpartisan="true"'))
    context = ReadContext()
    documents = list(iter_semeval_hyperpartisan(str(articles), str(truth), context=context))
    assert len(documents) == 19 and context.stats == Counter(missing_label=1)
    with pytest.raises(MalformedInputError, match=r"article 0000004: no entry in .*ground-truth"):
        list(iter_semeval_hyperpartisan(str(articles), str(truth), context=ReadContext(strict=True)))
    bad_splits = tmp_path / "hp-splits.json"
    bad_splits.write_text(json.dumps({"train": list(range(10)), "dev": [10, 11], "test": [12, 13]}))
    with pytest.raises(ConfigError, match=r"splits_file: .*hp-splits.json.*positions of the 20 articles"):
        _hyperpartisan(articles, splits_file=str(bad_splits), val_split="dev", val_fraction=0.0)
    for key in ("splits_file", "ground_truth"):  # a misspelt path: its key named before anything is read
        misspelt = LabelledTextDataModule(str(articles), source_format="semeval_hyperpartisan",
                                          **{key: str(tmp_path / f"misspelt_{key}")})
        with pytest.raises(ConfigError, match=rf"^data\.init_args\.{key}: '.*misspelt_{key}' does not exist; set"):
            misspelt.prepare_data()
    with pytest.raises(ConfigError, match="splits_file and ground_truth belong to source_format"):
        LabelledTextDataModule(str(articles), splits_file=str(bad_splits))
    renamed = articles.with_name("hyperpartisan.xml")
    articles.rename(renamed)
    with pytest.raises(ConfigError, match="not a SemEval-2019 task 4 articles file"):
        _hyperpartisan(renamed)
    assert len(_hyperpartisan(renamed, ground_truth=str(truth)).train_set) == 19
