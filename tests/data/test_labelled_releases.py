"""The labelled sets in the layouts users download for DECA's tables: Yao et al.'s text_gcn files (R8, R52, mr,
ohsumed, 20ng: a name/split/label list plus a corpus file line for line), Pang and Lee's rt-polarity.pos/.neg, and
the DECA configs' hints naming them. Every text here is invented."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from corpus_files import labelled_docs, write_bbc_release, write_semeval_hyperpartisan, write_text_gcn

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
    kwargs = {"val_fraction": 0.0, **kwargs}
    dm = LabelledTextDataModule(source=str(source), batch_size=8, num_workers=0, cache_dir=str(tmp_path / "cache"),
                                **kwargs)
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
    options = {"cache_dir": str(articles.parent / "cache"), **options}
    datamodule = LabelledTextDataModule(str(articles), source_format="semeval_hyperpartisan", num_workers=0, **options)
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
    bad_splits.write_text(json.dumps({"train": list(range(10)), "dev": [10, 11], "test": [12, 20]}))
    with pytest.raises(ConfigError, match=r"^data\.init_args\.splits_file: .*hp-splits.json': split 'test' lists 1 "
                                          r"position\(s\) that are not article positions \(first 20\); expected a "
                                          r"JSON object of split name -> list of 0-based positions of the 20 articles"):
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


def _write_splits(articles: Path, splits) -> str:
    path = articles.parent / "hp-splits.json"
    path.write_text(json.dumps(splits), encoding="utf-8")
    return str(path)


def test_longformers_overlapping_splits_are_read_as_listed_with_one_warning(tmp_path, caplog):
    """Longformer's real hp-splits.json is no partition (51 of its 65 test positions are also in train, 7 in dev, 58
    articles in no list): read as Longformer reads it, each split's positions as listed, and said in one line."""
    articles = write_semeval_hyperpartisan(tmp_path / "hyperpartisan")
    ids = [f"{3 * i + 1:07d}" for i in range(20)]  # the fixture's article ids, in file order
    splits = {"train": list(range(12)), "dev": [14, 13, 12], "test": [0, 1, 2, 12, 15, 16]}  # 17-19 in no list
    caplog.set_level("WARNING")
    datamodule = _hyperpartisan(articles, splits_file=_write_splits(articles, splits), val_split="dev",
                                val_fraction=0.0)
    for name, dataset in (("train", datamodule.train_set), ("dev", datamodule.val_set),
                          ("test", datamodule.test_set)):
        assert sorted(document.id for document in dataset) == sorted(ids[i] for i in splits[name])
    warnings = [r.getMessage() for r in caplog.records if "not a partition" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].endswith("of the 6 test articles, 3 also in train, 1 also in dev (2 in neither); 3 of the 20 "
                                "articles are in no split; for a test on unseen articles, drop splits_file and set "
                                "cross_validation_folds")
    caplog.clear()
    _hyperpartisan(articles, splits_file=_write_splits(articles, {"train": list(range(16)), "dev": [16, 17],
                                                                  "test": [18, 19]}), val_split="dev",
                   val_fraction=0.0, cache_dir=str(tmp_path / "cache2"))
    assert not [r for r in caplog.records if "not a partition" in r.getMessage()]  # a partition: nothing to say


@pytest.mark.parametrize(("splits", "says"), [
    ([[0, 1], [2]], "expected a JSON object of split name -> list of 0-based positions of the 20 articles"),
    ({"train": "0-11", "test": [12]}, "expected a JSON object"),
    ({"train": ["0000001"], "test": [12]}, r"split 'train' lists 1 position\(s\) that are not article positions "
                                          r"\(first '0000001'\)"),
    ({"train": [0, 1, -1], "test": [12]}, r"first -1"),
    ({"train": [0, True], "test": [12]}, r"first True"),
    ({"train": [0, 1, 1], "test": [12]}, r"split 'train' lists 1 position\(s\) twice"),
])
def test_a_splits_file_that_is_not_positions_of_these_articles_is_refused_in_one_line(tmp_path, splits, says):
    articles = write_semeval_hyperpartisan(tmp_path / "hyperpartisan")
    with pytest.raises(ConfigError, match=rf"^data\.init_args\.splits_file: '.*hp-splits\.json'.*{says}") as caught:
        _hyperpartisan(articles, splits_file=_write_splits(articles, splits), val_fraction=0.0)
    assert "\n" not in str(caught.value)
    (articles.parent / "hp-splits.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"splits_file: '.*hp-splits.json' is not JSON"):
        _hyperpartisan(articles, splits_file=str(articles.parent / "hp-splits.json"), val_fraction=0.0)


def test_cross_validation_folds_test_every_article_once_with_the_class_proportions(tmp_path):
    """The clean evaluation: k folds over the release's articles (no splits_file), drawn per label; fold i is the
    test split, the others train (validation held out of them), whatever the seed's draw."""
    articles = write_semeval_hyperpartisan(tmp_path / "hyperpartisan")  # 10 hyperpartisan, 10 not
    tested: list[str] = []
    for fold in range(4):
        datamodule = _hyperpartisan(articles, cross_validation_folds=4, cross_validation_fold=fold, val_fraction=0.25,
                                    stratified=True)
        train, val, test = ({d.id for d in split} for split in (datamodule.train_set, datamodule.val_set,
                                                                 datamodule.test_set))
        assert not (train & test or val & test or train & val) and len(train | val | test) == 20
        assert Counter(d.label for d in datamodule.test_set) in (Counter(true=3, false=2), Counter(true=2, false=3))
        assert Counter(d.label for d in datamodule.val_set) == Counter(true=2, false=2)  # 25% of 7 or 8 a class
        assert datamodule.data_stats[f"cross-validation fold {fold} of 4"]["test"] == len(test)
        tested += sorted(test)
    assert sorted(tested) == sorted(f"{3 * i + 1:07d}" for i in range(20))  # every article tested once
    again = _hyperpartisan(articles, cross_validation_folds=4, cross_validation_fold=3, val_fraction=0.25,
                           stratified=True, cache_dir=str(tmp_path / "again"))
    assert sorted(d.id for d in again.test_set) == tested[-len(again.test_set):]
    other_seed = _hyperpartisan(articles, cross_validation_folds=4, cross_validation_fold=3, val_fraction=0.0,
                                seed=7)
    assert sorted(d.id for d in other_seed.test_set) != tested[-len(again.test_set):]


@pytest.mark.parametrize(("options", "says"), [
    ({"cross_validation_fold": 2}, "cross_validation_fold is 2 but cross_validation_folds is null"),
    ({"cross_validation_folds": 1}, "^cross_validation_folds: must be >= 2 or null, got 1$"),
    ({"cross_validation_folds": 5, "cross_validation_fold": 5}, r"^cross_validation_fold: must be in \[0, 5\)"),
    ({"cross_validation_folds": 5, "splits_file": "hp-splits.json"}, "but splits_file .* sets splits too"),
    ({"cross_validation_folds": 5, "test_fraction": 0.1}, "but test_fraction .* sets splits too"),
    ({"cross_validation_folds": 5, "val_split": "dev", "val_fraction": 0.0}, "but val_split .* sets splits too"),
    ({"cross_validation_folds": 5, "label_column": None}, "label_column is null"),
    ({"group_duplicates": True, "val_fraction": 0.0}, "group_duplicates: nothing is drawn"),
    ({"group_duplicates": True, "splits_file": "hp-splits.json", "val_split": "dev", "val_fraction": 0.0},
     "group_duplicates keeps duplicates together .* published ones"),
])
def test_held_out_options_that_cannot_do_what_they_say_are_refused_in_one_line(tmp_path, options, says):
    with pytest.raises(ConfigError, match=says if says.startswith("^") else f"^data\\.init_args\\..*{says}") as caught:
        LabelledTextDataModule(str(tmp_path / "articles-training-byarticle-20181122.xml"),
                               source_format="semeval_hyperpartisan", **options)
    assert "\n" not in str(caught.value)


def test_cross_validation_or_grouping_of_a_source_with_its_own_test_split_is_refused(tmp_path):
    listing = write_text_gcn(tmp_path / "data", "R8", R8_LIST, R8_RAW, R8_CLEAN)
    for options, says in (({"cross_validation_folds": 2}, "cross_validation_folds 2 holds a test split out"),
                          ({"group_duplicates": True, "val_fraction": 0.2}, "group_duplicates keeps duplicates")):
        datamodule = LabelledTextDataModule(str(listing), source_format="text_gcn", num_workers=0,
                                            cache_dir=str(tmp_path / "cache"), **{"val_fraction": 0.0, **options})
        with pytest.raises(ConfigError, match=f"{says}.* has its own test split \\('test'\\)"):
            datamodule.setup("fit")


def _sides(datamodule: LabelledTextDataModule) -> dict[str, set[str]]:
    """Normalised text -> the splits holding a document with it."""
    sides: dict[str, set[str]] = {}
    for name, split in (("train", datamodule.train_set), ("val", datamodule.val_set), ("test", datamodule.test_set)):
        for document in split:
            sides.setdefault(" ".join(document.text.split()), set()).add(name)
    return sides


def test_bbc_release_folders_split_with_duplicates_on_one_side_as_the_config_reads_them(tmp_path):
    """BBC News as the release unzips (README.TXT beside the topic folders, Latin-1 pound signs, no split; duplicate
    articles): read with classify_bbc.yaml's data options, every duplicate group lands in one split, seeded."""
    root = write_bbc_release(tmp_path / "bbc")
    copy = (root / "sport" / "002.txt").read_bytes()
    (root / "sport" / "013.txt").write_bytes(copy.replace(b"\n\n", b"\n\n  \n", 1))  # a copy, other spacing
    data = yaml.safe_load((ROOT / "configs/docsplit/classify_bbc.yaml").read_text())["data"]["init_args"]
    options = {key: data[key] for key in ("encoding", "test_split", "val_fraction", "test_fraction", "stratified",
                                          "group_duplicates")}
    assert options["group_duplicates"] is True and options["encoding"] == "latin-1"  # the release's encoding
    splits = []
    for seed in range(6):
        datamodule = module(root, tmp_path / f"seed{seed}", seed=seed, **{**options, "val_fraction": 0.2,
                                                                         "test_fraction": 0.2})
        sides = _sides(datamodule)
        assert len(sides) == 9 and all(len(where) == 1 for where in sides.values())  # 25 files, 9 texts
        assert sum(map(len, (datamodule.train_set, datamodule.val_set, datamodule.test_set))) == 25
        splits.append(sorted(d.id for d in datamodule.test_set))
    assert len({tuple(test) for test in splits}) > 1  # the seed draws
    assert sorted(d.id for d in module(root, tmp_path / "again", seed=5, **{**options, "val_fraction": 0.2,
                                                                          "test_fraction": 0.2}).test_set) == splits[5]
    assert datamodule.stats == Counter(file_outside_class_folder=1)  # README.TXT, counted, not read
    assert "It costs \xa3100." in next(d for d in datamodule.documents if d.id == "business/001.txt").text
    by_default = module(root, tmp_path / "utf8", **{**options, "encoding": "utf-8"})  # UTF-8, then Latin-1
    assert by_default.stats == Counter(file_outside_class_folder=1, record_decoded_with_fallback_encoding=1)
    assert "It costs \xa3100." in next(d for d in by_default.documents if d.id == "business/001.txt").text
    assert "(duplicates kept together: 8 groups of 24 documents)" in " ".join(datamodule.data_stats)
    apart = [_sides(module(root, tmp_path / f"apart{seed}", seed=seed, **{**options, "val_fraction": 0.2,
                                                                         "test_fraction": 0.2,
                                                                         "group_duplicates": False}))
             for seed in range(6)]
    assert any(len(where) > 1 for sides in apart for where in sides.values())  # what grouping prevents


def test_text_gcn_raw_lines_that_are_not_utf8_are_decoded_as_text_gcn_decodes_them(tmp_path):
    """text_gcn's scripts read the corpus with ``line.decode('latin1')``: the raw mr.txt's 229 such lines are kept,
    decoded as Latin-1 (counted once, for the split holding them), never dropped or replaced."""
    listing = write_text_gcn(tmp_path / "data", "mr", ["0\ttrain\t1", "1\ttest\t0", "2\ttrain\t0"],
                             ["x", "y", "z"], None)
    (tmp_path / "data" / "corpus" / "mr.txt").write_bytes(
        b"absorbing character study by andr\xe9 turpin .\nit works \x97 to an extent .\nsaf\xc3\xa9 utf-8 .\n")
    datamodule = module(listing, tmp_path, source_format="text_gcn", text_gcn_corpus="raw")
    assert [d.text for d in datamodule.train_set] == ["absorbing character study by andr\xe9 turpin .",
                                                      "saf\xe9 utf-8 ."]
    assert [d.text for d in datamodule.test_set] == ["it works \x97 to an extent ."]
    assert datamodule.data_stats["documents"] == {"documents_read": 2, "train": 2, "validation": 0, "skipped": {},
                                                  "decoded": {"line_decoded_with_fallback_encoding": 1}}
    assert datamodule.data_stats["test"]["decoded"] == {"line_decoded_with_fallback_encoding": 1}
    replaced = module(listing, tmp_path / "replaced", source_format="text_gcn", text_gcn_corpus="raw",
                      fallback_encoding=None)
    assert [d.text for d in replaced.train_set][0] == "absorbing character study by andr\ufffd turpin ."
