"""INSTRUCTOR-style encoders (DocSplit Tables 1-2's INSTRUCTOR row): a T5 encoder in a sentence-transformers folder
with Dense + Normalize, an instruction before every text that is attended to but left out of the mean.

The folder is built from config in INSTRUCTOR's layout (``corpus_files.write_instructor_folder``: modules.json,
1_Pooling, 2_Dense with ``pytorch_model.bin``, 3_Normalize; a Metaspace/Unigram tokenizer with ``$A </s>`` as T5's), and the encoder is
checked against a naive reference written from INSTRUCTOR's description: the instruction and text joined as strings
and tokenized together, the first (instruction tokenized alone, without ``</s>``) positions masked out of the mean,
then Dense and L2 normalisation.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.nn.functional as F
from corpus_files import write_instructor_folder

from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument, ConfigError
from lit_docemb.methods import DocSplit
from lit_docemb.models.encoder import HFEncoder
from lit_docemb.views.docsplit import WholeDocumentCollator
from lit_docemb.models import EncoderSpec

INSTRUCTION = "Represent the news article for classification: "
OTHER_INSTRUCTION = "Represent the science paper for retrieval: "
TEXTS = ["The market fell sharply today after the report.", "A short one.",
         "The team won the final match of the season in the last minute of play."]


def write_json(path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))


@pytest.fixture(scope="module")
def instructor_dir(tmp_path_factory) -> str:
    """A tiny T5 encoder in INSTRUCTOR's sentence-transformers layout, Dense 32 -> 24 (:func:`write_instructor_folder`)."""
    return str(write_instructor_folder(tmp_path_factory.mktemp("tiny_instructor")))


def reference_embeddings(folder: str, instruction: str, texts: list[str]) -> torch.Tensor:
    """INSTRUCTOR's recipe, written out: joint tokenization, the instruction's positions out of the mean, Dense,
    unit length."""
    from transformers import AutoTokenizer, T5EncoderModel

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = T5EncoderModel.from_pretrained(folder).eval()
    weight = torch.load(f"{folder}/2_Dense/pytorch_model.bin", weights_only=True)["linear.weight"]
    rows = []
    for text in texts:
        ids = torch.tensor([tokenizer(instruction + text)["input_ids"]])
        instruction_length = len(tokenizer(instruction)["input_ids"]) - 1  # without </s>
        with torch.no_grad():
            states = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]  # (T, D)
        rows.append(states[instruction_length:].mean(0) @ weight.T)
    return F.normalize(torch.stack(rows), dim=-1)


def embed(encoder: HFEncoder, folder: str, texts: list[str], max_length: int = 512) -> torch.Tensor:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=encoder.text_tokens(max_length),
                      return_tensors="pt")
    with torch.no_grad():
        return encoder.eval()(batch["input_ids"], batch["attention_mask"])


def test_the_encoder_matches_instructors_recipe(instructor_dir):
    encoder = HFEncoder(instructor_dir, instruction=INSTRUCTION, instruction_in_pooling=False,
                        sentence_transformers_head=True)
    assert type(encoder.backbone).__name__ == "T5EncoderModel" and encoder.embedding_size == 24
    embeddings = embed(encoder, instructor_dir, TEXTS)  # padded: rows of different lengths
    torch.testing.assert_close(embeddings, reference_embeddings(instructor_dir, INSTRUCTION, TEXTS),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(len(TEXTS)))


def test_the_instruction_changes_the_embedding_but_is_not_in_the_mean(instructor_dir):
    excluded = HFEncoder(instructor_dir, instruction=INSTRUCTION, instruction_in_pooling=False,
                         sentence_transformers_head=True)
    other = HFEncoder(instructor_dir, instruction=OTHER_INSTRUCTION, instruction_in_pooling=False,
                      sentence_transformers_head=True)
    included = HFEncoder(instructor_dir, instruction=INSTRUCTION, instruction_in_pooling=True,
                         sentence_transformers_head=True)
    plain = HFEncoder(instructor_dir, sentence_transformers_head=True)
    first, second = embed(excluded, instructor_dir, TEXTS), embed(other, instructor_dir, TEXTS)
    assert (first - second).abs().max() > 1e-3  # attended to: the text's states depend on it
    assert (first - embed(plain, instructor_dir, TEXTS)).abs().max() > 1e-3
    # pooled, the instruction's states move the mean away from the text-only mean of the same forward pass
    assert (first - embed(included, instructor_dir, TEXTS)).abs().max() > 1e-3
    torch.testing.assert_close(first, reference_embeddings(instructor_dir, INSTRUCTION, TEXTS), atol=1e-5, rtol=1e-5)


def test_the_folder_decides_whether_the_instruction_is_pooled(instructor_dir, tiny_encoder_dir, tmp_path):
    assert HFEncoder(instructor_dir, instruction=INSTRUCTION).instruction_in_pooling  # no include_prompt: pooled
    marked = tmp_path / "marked"
    shutil.copytree(instructor_dir, marked)
    pooling = json.loads((marked / "1_Pooling" / "config.json").read_text()) | {"include_prompt": False}
    write_json(marked / "1_Pooling" / "config.json", pooling)
    assert not HFEncoder(str(marked), instruction=INSTRUCTION).instruction_in_pooling
    bert = HFEncoder(tiny_encoder_dir, instruction="query: ")  # E5-style prefix on a plain folder: pooled
    assert bert.instruction_in_pooling and bert.instruction_position == 1  # after [CLS]
    with pytest.raises(BadArgument, match="^instruction_in_pooling: must be null without an instruction"):
        HFEncoder(tiny_encoder_dir, instruction_in_pooling=False)
    with pytest.raises(BadArgument, match="^instruction_in_pooling: must be null with pooling 'cls'"):
        HFEncoder(tiny_encoder_dir, pooling="cls", instruction="query: ", instruction_in_pooling=False)


def test_a_prefix_goes_after_cls_and_is_pooled_on_a_bert_folder(tiny_encoder_dir):
    from transformers import AutoModel, AutoTokenizer

    encoder = HFEncoder(tiny_encoder_dir, instruction="query: ", attn_implementation=None).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    texts = ["the first text here", "another"]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    joint = tokenizer(["query: " + text for text in texts], padding=True, return_tensors="pt")
    model = AutoModel.from_pretrained(tiny_encoder_dir).eval()
    with torch.no_grad():
        got = encoder(batch["input_ids"], batch["attention_mask"])
        states = model(**joint).last_hidden_state
    mask = joint["attention_mask"].unsqueeze(-1).float()
    torch.testing.assert_close(got, (states * mask).sum(1) / mask.sum(1), atol=1e-5, rtol=1e-5)


def test_max_length_cuts_the_text_and_keeps_the_instruction(instructor_dir):
    spec = EncoderSpec(instructor_dir, pooling="mean", instruction=INSTRUCTION, instruction_in_pooling=False,
                       sentence_transformers_head=True, max_length=30)
    method = DocSplit(spec, mlm_weight=0.0, embed_with_title=False)
    encoder, count = method.encoder, method.encoder.instruction_tokens
    assert method.token_cache.max_length == 30 - count
    long_text = " ".join(TEXTS * 5)
    batch = WholeDocumentCollator(method.token_cache)([Document("long", sections=[Section("", long_text)])])
    ids, mask = batch.tokens.input_ids, batch.tokens.attention_mask
    alone = method.tokenizer(long_text)["input_ids"]
    assert ids[0].tolist() == alone[:30 - count - 1] + [1]  # the text cut, its </s> kept
    full_ids, _, _, _ = encoder.with_instruction(ids, mask)
    assert full_ids.shape[1] == 30 and full_ids[0, :count].tolist() == encoder.instruction_ids.tolist()
    with torch.no_grad():
        got = method.eval().embed(batch)
    reference = reference_embeddings(instructor_dir, INSTRUCTION, [method.tokenizer.decode(ids[0, :-1])])
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-5)


def test_an_instruction_longer_than_max_length_stops_in_one_line(instructor_dir):
    with pytest.raises(ConfigError,
                       match=r"^encoder\.instruction: its \d+ tokens leave no room for text within encoder\.max_length 8: "
                             r"shorten it or raise encoder\.max_length"):
        DocSplit(EncoderSpec(instructor_dir, pooling="mean", instruction=INSTRUCTION * 2, max_length=8),
                 mlm_weight=0.0)


def test_a_t5_encoder_has_no_masked_lm_head(instructor_dir):
    with pytest.raises(ConfigError, match="^mlm_weight: .* has no masked-LM head"):
        DocSplit(EncoderSpec(instructor_dir, pooling="mean"), mlm_weight=0.1)


def test_a_missing_dense_weights_file_stops_in_one_line(instructor_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(instructor_dir, broken)
    (broken / "2_Dense" / "pytorch_model.bin").unlink()
    with pytest.raises(ConfigError, match=r"^encoder\.name: .*2_Dense has no weights file \(model.safetensors or "
                                          r"pytorch_model.bin\)") as info:
        DocSplit(EncoderSpec(str(broken), pooling="mean", sentence_transformers_head=True), mlm_weight=0.0)
    assert "\n" not in str(info.value)


def test_the_head_needs_a_sentence_transformers_folder(tiny_encoder_dir):
    with pytest.raises(BadArgument, match="^sentence_transformers_head: .* has no modules.json"):
        HFEncoder(tiny_encoder_dir, sentence_transformers_head=True)


def test_an_activation_outside_the_table_is_refused(instructor_dir, tmp_path):
    odd = tmp_path / "odd"
    shutil.copytree(instructor_dir, odd)
    config = json.loads((odd / "2_Dense" / "config.json").read_text())
    write_json(odd / "2_Dense" / "config.json", config | {"activation_function": "os.system"})
    with pytest.raises(BadArgument, match="Dense activation 'os.system' is not one of"):
        HFEncoder(str(odd), sentence_transformers_head=True)


def test_the_sentence_transformers_export_encodes_as_embed_does(instructor_dir, tmp_path):
    SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer
    from lit_docemb.export.forms import export_method

    spec = EncoderSpec(instructor_dir, pooling="mean", instruction=INSTRUCTION, instruction_in_pooling=False,
                       sentence_transformers_head=True, max_length=40)
    method = DocSplit(spec, mlm_weight=0.0, embed_with_title=False)
    documents = [Document(f"d{i}", sections=[Section("", text)]) for i, text in enumerate(TEXTS + [" ".join(TEXTS)])]
    with torch.no_grad():
        embedded = method.eval().embed(WholeDocumentCollator(method.token_cache)(documents))
    export_method(method, tmp_path / "st")
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True)
    encoded = model.encode([document.text for document in documents], convert_to_tensor=True)
    torch.testing.assert_close(encoded, embedded, atol=1e-5, rtol=1e-5)  # the long one cut at 40 tokens in all


def test_a_prefix_left_out_of_the_mean_after_cls_is_not_exported(tiny_encoder_dir):
    from lit_docemb.export.forms import ExportError, exporter

    method = DocSplit(EncoderSpec(tiny_encoder_dir, pooling="mean", instruction="query: ",
                                  instruction_in_pooling=False, max_length=32), mlm_weight=0.0)
    with pytest.raises(ExportError, match="after a \\[CLS\\] token and left out of the mean"):
        exporter(method)
