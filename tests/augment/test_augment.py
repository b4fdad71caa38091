"""DECA's augmentations: WordNet read offline, synonym / antonym / PPDB / uninformative-word replacement, and
back-translation with its disk cache."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from corpus_files import write_ppdb

from lit_docemb.augment import (
    BackTranslator,
    DocumentAugmenter,
    Vocabulary,
    antonym_table,
    frequent_synonym_table,
    load_wordnet,
    ppdb_table,
    replace_uninformative,
    replace_words,
    synonym_table,
    words_of,
)
from lit_docemb.augment.thesaurus import draws_of

WORDNET = Path("/usr/share/wordnet")
needs_wordnet = pytest.mark.skipif(not (WORDNET / "data.noun").is_file(),
                                   reason="WordNet database missing: apt-get install -y wordnet-base")

TEXTS = [
    "The strong man bought a big car and a large automobile. The weak child liked the film.",
    "A strong movie is a good film. The big house is large and the small dog is weak.",
    "People buy cars. The car is fast and the automobile is quick. Impotent rage is not strong.",
    "The film was good, the movie was bad. A big dog and a little cat increase the noise.",
    "They decrease the price and increase the sales. Strong coffee, weak tea, large cup.",
]


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return Vocabulary.from_texts(TEXTS)


@pytest.fixture(scope="module")
def wordnet():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("WordNet database missing: apt-get install -y wordnet-base")
    return load_wordnet(str(WORDNET))


def test_missing_wordnet_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install -y wordnet-base"):
        load_wordnet(str(tmp_path))


def test_antonyms_are_read_from_the_pointers_of_the_synsets_that_have_them(tmp_path):
    """A synset line's pointers are scanned only where it holds an antonym pointer ("!"); the others ("&", "@")
    add no antonym, and every synset's words are read."""
    lines = {"adj": ["00001740 00 a 02 good 0 full-bodied(a) 0 002 ! 00002000 a 0101 & 00003000 s 0000 | desirable",
                     "00002000 00 a 01 Bad 0 001 ! 00001740 a 0101 | not good",
                     "00003000 00 s 01 fine 0 001 & 00001740 a 0000 | all right"],
             "noun": ["  1 licence header line", "00004000 03 n 01 car 0 001 @ 00004000 n 0000 | a motor vehicle"]}
    for name in ("noun", "verb", "adj", "adv"):
        (tmp_path / f"data.{name}").write_text("".join(f"{line}\n" for line in lines.get(name, [])))
    database = load_wordnet(str(tmp_path))
    assert dict(database.antonyms) == {("a", 1740, "good"): ["bad"], ("a", 2000, "bad"): ["good"]}
    assert database.members[("a", 1740)] == ["good", "full-bodied"] and database.members[("a", 3000)] == ["fine"]
    assert database.members[("n", 4000)] == ["car"] and database.pos_of("fine") == {"a"}


@needs_wordnet
def test_wordnet_database_is_read(wordnet):
    assert {"automobile", "auto", "machine"} <= wordnet.synonyms("car")
    assert wordnet.pos_of("car") == {"n"} and "a" in wordnet.pos_of("strong")
    assert "impotent" in wordnet.negatable_antonyms("strong", "a")  # the paper's example, through "potent"
    assert "decrease" in wordnet.negatable_antonyms("increase", "v")


@needs_wordnet
def test_synonyms_are_in_vocabulary_wordnet_synonyms_above_min_count(vocabulary, wordnet):
    table = synonym_table(vocabulary, wordnet, min_count=2)
    assert table["car"][0] == "car" and "automobile" in table["car"]  # original kept among the candidates
    words = words_of(" ".join(TEXTS))
    changed = 0
    for seed in range(30):
        out = replace_words(words, table, seed)
        assert len(out) == len(words)
        for before, after in zip(words, out):
            if after != before:
                changed += 1
                assert after in wordnet.synonyms(before) and vocabulary.counts[after] >= 2, (before, after)
    assert changed > 30
    rare = {w for w, c in vocabulary.counts.items() if c < 2}
    assert not rare & {c for cands in table.values() for c in cands[1:]}


@needs_wordnet
def test_antonym_replacement_inserts_the_negation(vocabulary, wordnet):
    table = antonym_table(vocabulary, wordnet, min_count=1)
    assert "not impotent" in table["strong"] and "not weak" in table["strong"]
    assert "car" not in table and "film" not in table  # nouns only: never negated
    words = ["the", "strong", "man", "and", "the", "big", "car", "increase"]
    negated = set()
    for seed in range(40):
        rest = iter(replace_words(words, table, seed))
        for word in words:
            got = next(rest)
            if got == "not":
                antonym = next(rest)
                assert antonym in wordnet.negatable_antonyms(word, "a") | wordnet.negatable_antonyms(word, "v")
                assert antonym in vocabulary.counts
                negated.add((word, antonym))
            else:
                assert got == word
        assert next(rest, None) is None
    assert ("strong", "impotent") in negated and ("increase", "decrease") in negated


@needs_wordnet
def test_same_seed_same_output_other_seed_other_output(vocabulary, wordnet):
    augment = DocumentAugmenter("wordnet", vocabulary, min_count=1, wordnet_dir=str(WORDNET))
    text = " ".join(TEXTS)
    assert augment(text, "doc-1") == augment(text, "doc-1")
    assert len({tuple(augment(text, f"doc-{i}")) for i in range(5)}) > 1


@needs_wordnet
def test_uninformative_replacement_keeps_the_most_informative_word(vocabulary, wordnet):
    table = frequent_synonym_table(vocabulary, wordnet, min_count=1)
    assert all(vocabulary.counts[s] > vocabulary.counts[w] for w, cands in table.items() for s in cands)
    words = words_of("the big film and the big movie and the large car the automobile")
    tfidf = {w: words.count(w) * vocabulary.idf(w) for w in words}
    top = max(tfidf, key=tfidf.get)
    changed = 0
    for seed in range(50):
        out = replace_uninformative(words, table, vocabulary, seed, probability=0.5)
        for before, after in zip(words, out):
            if after != before:
                changed += 1
                assert after in table[before] and before != top
    assert changed > 0


def test_ppdb_replacement_reads_the_lexical_file(vocabulary, tmp_path):
    table = ppdb_table(write_ppdb(tmp_path / "ppdb-lexical"), vocabulary, min_count=1)
    assert table == {"big": ("big", "large"), "film": ("film", "movie")}  # multi-word and unseen words dropped
    outs = {tuple(replace_words(["big", "film", "car"], table, seed)) for seed in range(20)}
    assert outs == {(a, b, "car") for a in ("big", "large") for b in ("film", "movie")}


def test_ppdb_bad_input_is_an_error(vocabulary, tmp_path):
    with pytest.raises(FileNotFoundError, match="PPDB file not found"):
        ppdb_table(tmp_path / "nope", vocabulary)
    bad = tmp_path / "bad"
    bad.write_text("[JJ] ||| big ||| large ||| x=1\nbig large\n")
    with pytest.raises(ValueError, match=r"bad:2: not a PPDB line"):
        ppdb_table(bad, vocabulary)
    with pytest.raises(ValueError, match="ppdb_path is needed"):
        DocumentAugmenter("ppdb", vocabulary)


@pytest.fixture(scope="module")
def tiny_translation_models(tmp_path_factory) -> tuple[str, str]:
    """Two 1-layer Marian models (random weights) with a small WordPiece tokenizer, built from config."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(TEXTS * 5, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]",
                                                                                                  "[SEP]"]))
    sep = tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="$A [SEP]", special_tokens=[("[SEP]", sep)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[SEP]")
    config = MarianConfig(vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                          max_position_embeddings=128, pad_token_id=0, eos_token_id=sep, decoder_start_token_id=0)
    root = tmp_path_factory.mktemp("marian")
    for name in ("en-de", "de-en"):
        MarianMTModel(config).save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return str(root / "en-de"), str(root / "de-en")


def test_back_translation_round_trip_is_cached_on_disk(tiny_translation_models, tmp_path):
    cache = tmp_path / "bt" / "cache.sqlite"
    text = "The strong man bought a car. The film was good."
    first = BackTranslator(*tiny_translation_models, cache_path=str(cache), max_length=12, num_beams=2)
    translated = first(text)
    assert len(first.cache) == 2  # one round trip per sentence
    assert first(text) == translated
    again = BackTranslator(*tiny_translation_models, cache_path=str(cache), max_length=12, num_beams=2)
    again._load = lambda: pytest.fail("a cached sentence must not load the models")
    assert again(text) == translated
    other = BackTranslator(*tiny_translation_models, cache_path=str(cache), max_length=12, num_beams=1)
    assert other.key("The film was good.") != again.key("The film was good.")  # settings are part of the key
    augment = DocumentAugmenter("back_translation", Vocabulary.from_texts(TEXTS), translator=again)
    assert augment(text, 0) == words_of(translated)


def test_back_translation_translates_the_whole_document(tiny_translation_models, tmp_path):
    """§3.3 translates the document: a cleaned corpus's document is one 300-word "sentence" (no full stops), which a
    model reading 12 tokens would cut to its first words; it is translated in pieces that fit and comes back whole.
    The models are stood in for by one that keeps at most ``max_length`` words of each input, as truncation does."""
    translator = BackTranslator(*tiny_translation_models, cache_path=str(tmp_path / "c.sqlite"), max_length=12)
    translator._load = lambda: ((None, None), (None, None))
    translator._translate = lambda texts, tokenizer, model: [" ".join(t.split()[:12]) for t in texts]
    document = " ".join(f"word{i}" for i in range(300))
    assert translator(document) == document
    assert all(len(piece.split()) <= 6 for piece in translator.pieces(document))


def test_back_translation_caps_generation_by_the_pieces_own_length(tiny_translation_models, tmp_path):
    """A translation may take ceil(1.5 n) + 8 new tokens for a piece of n tokens (never more than max_length), its
    batch capped by its longest piece; pieces are batched by length and come back in their order."""
    translator = BackTranslator(*tiny_translation_models, cache_path=str(tmp_path / "c.sqlite"), max_length=64,
                                num_beams=1, batch_size=1)
    assert [translator.generation_cap(n) for n in (1, 4, 30, 40)] == [10, 14, 53, 64]
    (tokenizer, model), _ = translator._load()
    calls, generate = [], model.generate

    def recording(**kwargs):
        out = generate(**kwargs)
        calls.append((kwargs["input_ids"].shape[1], kwargs["max_new_tokens"], out.shape[1]))
        return out

    model.generate = recording
    pieces = ["the strong man bought a car and the film was good " * 2, "good", "the film was good"]
    translated = translator._translate(pieces, tokenizer, model)
    lengths = [len(tokenizer(p)["input_ids"]) for p in pieces]
    assert [c[0] for c in calls] == sorted(lengths)  # shortest first
    for length, cap, generated in calls:
        assert cap == translator.generation_cap(length) and generated <= cap + 1  # + the decoder's start token
    assert calls[0][1] < 64  # the one-word piece is not allowed max_length tokens
    assert translated == [translator._translate([p], tokenizer, model)[0] for p in pieces]


def test_back_translation_needs_checkpoints(tmp_path):
    with pytest.raises(FileNotFoundError, match="forward_model: no seq2seq checkpoint"):
        BackTranslator(str(tmp_path), str(tmp_path), str(tmp_path / "c.sqlite"))


def test_deca_trains_on_back_translated_views(tiny_translation_models, tiny_encoder_dir, tmp_path):
    from types import SimpleNamespace

    from lit_docemb.data.core.document import Document, Section
    from lit_docemb.data.core.tokens import tokenize
    from lit_docemb.augment.specs import BackTranslation
    from lit_docemb.methods import DECA
    from lit_docemb.methods.deca_components import EncoderBackbone
    from lit_docemb.models import EncoderSpec

    cache = tmp_path / "bt.sqlite"
    model = DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir, max_length=32)),
                 augmentation=BackTranslation(list(tiny_translation_models), str(cache), max_length=12))
    docs = [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(TEXTS)]
    splits = SimpleNamespace(documents=None, train_set=docs, val_set=None, test_set=None, all_set=None, fit_set=None)
    model._trainer = SimpleNamespace(datamodule=splits, world_size=1)
    model.setup("fit")
    batch = model.collator("fit")(docs[:2])
    translator = BackTranslator(*tiny_translation_models, cache_path=str(cache), max_length=12)
    translator._load = lambda: pytest.fail("the collator must have cached every sentence")
    expected = tokenize(model.tokenizer, [" ".join(words_of(translator(d.text))) for d in docs[:2]], 32)

    def unpadded(tokens) -> list[list[int]]:  # the batch pads both views to one width, `expected` one view
        return [ids[mask.bool()].tolist() for ids, mask in zip(tokens.input_ids, tokens.attention_mask)]

    assert unpadded(batch.view_b) == unpadded(expected)
    assert model.losses(batch)["ntxent_loss"].isfinite()


@needs_wordnet
@pytest.mark.parametrize("name", ["wordnet", "antonym"])
def test_without_the_dictionary_constraint_replacements_leave_the_corpus(name, vocabulary, wordnet):
    text = " ".join(TEXTS)

    def replacements(augment) -> set[str]:
        return {w for seed in range(20) for w in augment(text, seed)} - set(words_of(text))

    constrained = DocumentAugmenter(name, vocabulary, min_count=1, wordnet_dir=str(WORDNET))
    free = DocumentAugmenter(name, vocabulary, wordnet_dir=str(WORDNET), dictionary_constraint=False)
    assert replacements(constrained) <= set(vocabulary.counts)  # with the constraint: corpus words only
    outside = replacements(free) - set(vocabulary.counts) - {"not"}
    assert outside, "without the constraint some replacement must be a word the corpus does not have"
    known = {w for lemma in set().union(*(wordnet.synonyms(x) for x in vocabulary.counts),
                                       *(wordnet.negatable_antonyms(x, p) for x in vocabulary.counts for p in "av"))
             for w in lemma.split("_")}
    assert outside <= known  # ... and still a WordNet candidate, not noise
    assert "automobile" in synonym_table(vocabulary, wordnet, None)["car"]
    assert "motorcar" in synonym_table(vocabulary, wordnet, None)["car"]
    assert "motorcar" not in synonym_table(vocabulary, wordnet, 1)["car"]


def test_the_dictionary_constraint_is_lifted_only_where_it_exists(vocabulary, tmp_path):
    table = ppdb_table(write_ppdb(tmp_path / "ppdb-lexical"), vocabulary, min_count=None)
    assert table["car"] == ("car", "zeppelin")  # not a corpus word: dropped only with the constraint
    with pytest.raises(ValueError, match="has none to lift"):
        DocumentAugmenter("uninformative", vocabulary, dictionary_constraint=False)
    with pytest.raises(ValueError, match="unset it"):
        DocumentAugmenter("ppdb", vocabulary, min_count=2, ppdb_path=str(tmp_path / "ppdb-lexical"),
                          dictionary_constraint=False)
    with pytest.raises(ValueError, match="needs the dictionary constraint"):
        frequent_synonym_table(vocabulary, None, None)


def reference_replace_words(words: list[str], table, seed, probability: float = 1.0) -> list[str]:
    """replace_words as first written, with ``random.choice`` per word: the draws its optimised form must keep."""
    rng, out = random.Random(seed), []
    for word in words:
        candidates = table.get(word)
        if candidates and rng.random() < probability:
            out.extend(rng.choice(candidates).split())
        else:
            out.append(word)
    return out


def test_replace_words_draws_exactly_what_random_choice_draws():
    rng = random.Random(7)
    # 2-33 candidates: powers of two (no rejection) and the counts just above them (most rejections), multi-word
    table = {f"w{n}": tuple(f"w{n}" if i == 0 else f"c{n}_{i}" + (" x" if i % 3 == 0 else "") for i in range(n))
             for n in range(2, 34)}
    table["empty"] = ()
    vocabulary = [*table, "plain", "other"]
    words = [rng.choice(vocabulary) for _ in range(3000)]
    for seed in (0, 1, -5, 2**70, "doc-1", "123:doc"):
        for probability in (1.0, 0.37, 0.0):
            expected = reference_replace_words(words, table, seed, probability)
            assert replace_words(words, table, seed, probability) == expected, (seed, probability)
            assert replace_words(words, table, seed, probability, draws_of(table)) == expected, (seed, probability)
    assert replace_words([], table, 0) == []


@needs_wordnet
@pytest.mark.parametrize("name", ["wordnet", "antonym"])
def test_augmenter_output_is_unchanged_by_its_prepared_draws(vocabulary, name):
    augment = DocumentAugmenter(name, vocabulary, min_count=1, wordnet_dir=str(WORDNET), probability=0.8)
    text = " ".join(TEXTS * 5)
    for seed in ("a", 3, "9:doc-2"):
        expected = reference_replace_words(words_of(text), augment.table, seed, 0.8)
        assert augment(text, seed) == expected and augment(text, seed, words_of(text)) == expected


def counted_corpus(counts: dict[str, int], filler: str = "car", filler_count: int = 60) -> list[str]:
    """One short document per occurrence: ``word`` appears in ``counts[word]`` documents, ``filler`` in more."""
    texts = [f"the {word} was there" for word, n in counts.items() for _ in range(n)]
    return texts + [f"a {filler} here" for _ in range(filler_count)]


@needs_wordnet
def test_uninformative_replaces_the_rare_words_by_frequent_synonyms_measured_by_word_count(wordnet):
    """The paper's reading (DECA §3.3): words seen fewer than 10 times are replaced, frequent words never.
    automobile, motorcar, auto and machine are WordNet synonyms of car (seen 60 times)."""
    counts = {"automobile": 6, "motorcar": 8, "auto": 20, "machine": 12}
    vocabulary = Vocabulary.from_texts(counted_corpus(counts))
    augment = DocumentAugmenter("uninformative", vocabulary, wordnet_dir=str(WORDNET))
    words = words_of("the automobile and the motorcar and the auto and the machine")
    replaced = Counter()
    for seed in range(200):
        out = augment(" ".join(words), seed)
        assert len(out) == len(words)
        for before, after in zip(words, out):
            if after != before:
                replaced[before] += 1
                assert vocabulary.counts[after] > vocabulary.counts[before] and vocabulary.counts[after] >= 5
    rate = {word: replaced[word] / 200 for word in counts}
    assert rate == {"automobile": 1.0, "motorcar": 1.0, "auto": 0.0, "machine": 0.0}
    half = DocumentAugmenter("uninformative", vocabulary, probability=0.5, wordnet_dir=str(WORDNET))
    rare = sum(a != b for seed in range(400) for a, b in zip(half(" ".join(words), seed), words) if b == "automobile")
    assert 0.4 < rare / 400 < 0.6
    uda = DocumentAugmenter("uninformative", vocabulary, wordnet_dir=str(WORDNET), selection="tf_idf",
                            probability=0.3)  # the old rule, kept by name: it does replace frequent words
    assert any(a != b for seed in range(200) for a, b in zip(uda(" ".join(words), seed), words) if b == "auto")


@needs_wordnet
def test_uninformative_lemmatises_so_table_1s_example_fires(wordnet):
    """Table 1: "due to a slighter dispersion of roles certainly ." → "due to a thin dispersion of roles
    certainly ."; "slighter" reaches "thin" through its lemma "slight"."""
    assert wordnet.lemmas("slighter") == ["slight"] and "thin" in wordnet.lemma_synonyms("slighter")
    assert wordnet.lemmas("better")[:1] == ["better"] and "good" in wordnet.lemmas("better")  # adj.exc
    assert wordnet.lemmas("cars") == ["car"] and "run" in wordnet.lemmas("running")
    texts = ["due to a slighter dispersion of roles certainly ."] + ["the thin dispersion"] * 12 + \
        ["dispersion of roles certainly"] * 12
    augment = DocumentAugmenter("uninformative", Vocabulary.from_texts(texts), wordnet_dir=str(WORDNET))
    assert augment.table["slighter"] == ("thin",)
    assert augment(texts[0], 0) == words_of("due to a thin dispersion of roles certainly .")
