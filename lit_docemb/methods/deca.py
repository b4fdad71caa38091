"""DECA (seed paper 002): document embedding via contrastive augmentation.

§3.2: a document D_i and its augmentation (§3.3, :mod:`lit_docemb.augment`) are embedded by the same encoder,
Doc2VecC (eq. 1, trained jointly with its CBOW loss, eq. 2-3) or a Hugging Face encoder's [CLS]; a contrastive
loss, SimCLR's NT-Xent (eq. 4) or SimSiam's (eq. 5, predictor MLP 2 layers x 64 with BatchNorm), pulls the
pair together; the total is ``l_d + lambda * l_c`` (eq. 6), the contrastive loss alone for an encoder. Appendix
A.3.2: Adam, lr 1e-3, batch 4,096, tau 1.0, dimension 100 (Doc2VecC); BERT lr 3e-6, batch 2, 512 tokens, 1 epoch.

Table 5's ablations on R8 are two independent switches. The framework ``Append`` ("-Contrastive", §4.5) has no
contrastive loss: each document is followed by one randomly drawn augmentation and Doc2VecC trains on that
merged document with l_d alone (a new augmentation each epoch; embeddings are of the original documents).
The framework ``Doc2VecCAlone`` is the Doc2VecC baseline rows (DECA Tables 3-4, CTPE Tables 2-3): l_d on the
documents themselves, no augmentation drawn and none taken.
An augmentation's ``dictionary_constraint: false`` (the last row, used with ``Append`` in the paper) lets
replacements be thesaurus words outside the corpus; the Doc2VecC vocabulary is then the corpus's words plus every
word of the thesaurus candidates (ids after the corpus's, count 0, so never a negative sample), so that such a
replacement enters the document as a word of its own instead of being dropped (which would make the row word
deletion).

The Doc2VecC vocabulary and the replacement candidates come from the documents DECA trains on (built in
``setup``, stored in checkpoints): the training split, or with the data's ``fit_on: all`` every document read,
test and unlabelled ones included, as the paper does (§4.1).

With a Doc2VecC backbone, eq. 6 is trained in one of two readings (docs/reproduce.md#deca has both tables).
``Doc2VecCAdamBackbone``, the configs': Algorithm 1 as written, one optimizer (Adam) for l_d and lambda * l_c
together, 4,096 word-level examples a step, so an epoch is hundreds of steps each with the contrastive term.
``Doc2VecCBackbone``: each term as in its source, l_d by Chen's own rule (every word of each document a target,
sparse SGD at a linearly falling rate, ``doc2vecc.c``), run on each training batch before the contrastive term, and
lambda * l_c by the configured optimizer on the eq. 1 vectors of the batch's documents and augmentations
(Algorithm 1, lines 7-8), once a batch. Either way the step is Lightning's manual optimisation. Under Chen's rule
Adam divides each coordinate's step by the gradient's running scale, so lambda matters only through Adam's epsilon
(and through a plain optimizer such as SGD).
"""

from __future__ import annotations

import copy
import logging

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn

from lit_docemb.augment import DocumentAugmenter, Vocabulary
from lit_docemb.augment.specs import Augmentation, WordNet
from lit_docemb.data.core.batches import Doc2VecCBatch, Doc2VecCPairBatch, PackedWords, ViewPairBatch
from lit_docemb.data.core.sampling import iter_items
from lit_docemb.data.caches.field_cache import FieldRows, FieldTokenCache
from lit_docemb.data.core.contract import DocumentSplits
from lit_docemb.data.core.tokens import document_text
from lit_docemb.errors import BadArgument, ConfigError
from lit_docemb.losses import NTXentLoss, SimSiamLoss
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.callbacks import logging_step
from lit_docemb.methods.deca_components import (
    Append,
    Doc2VecCAdamBackbone,
    Doc2VecCAlone,
    Doc2VecCBackbone,
    EncoderBackbone,
    SimCLR,
    SimSiam,
)
from lit_docemb.methods.retention import Retention
from lit_docemb.models import Doc2VecC
from lit_docemb.models.doc2vecc import BatchWords, word_examples
from lit_docemb.views.common import DocumentCollator
from lit_docemb.views.deca import (
    AppendedAugmentationCollator,
    AugmentedTextCollator,
    Doc2VecCCollator,
    Doc2VecCPairCollator,
    WordDocumentCollator,
    WordTypes,
    word_index,
)

log = logging.getLogger(__name__)


def predictor(dim: int, hidden: int) -> nn.Sequential:
    """SimSiam's prediction MLP as in DECA A.3.2: two layers, ``hidden`` units, BatchNorm."""
    return nn.Sequential(nn.Linear(dim, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, dim))


class DECA(EmbeddingMethod):
    """DECA: a backbone, a contrastive framework and an augmentation, each a typed component
    (:mod:`lit_docemb.methods.deca_components`, :mod:`lit_docemb.augment.specs`) holding its own options.

    Args:
        backbone: :class:`~lit_docemb.methods.deca_components.Doc2VecCBackbone` (trained jointly with the
            contrastive loss, eq. 6, l_d by Chen's SGD), :class:`~lit_docemb.methods.deca_components.
            Doc2VecCAdamBackbone` (the same, both terms by the optimizer: Algorithm 1 as written) or
            :class:`~lit_docemb.methods.deca_components.EncoderBackbone` (a Hugging Face encoder's [CLS], trained on
            the contrastive loss alone); ``None``: ``Doc2VecCBackbone()``.
        framework: :class:`~lit_docemb.methods.deca_components.SimCLR` (NT-Xent, eq. 4),
            :class:`~lit_docemb.methods.deca_components.SimSiam` (eq. 5) or
            :class:`~lit_docemb.methods.deca_components.Append` (Table 5 "-Contrastive", Doc2VecC only) or
            :class:`~lit_docemb.methods.deca_components.Doc2VecCAlone` (plain Doc2VecC, the baseline rows; Doc2VecC
            only); ``None``: ``SimCLR()``.
        augmentation: :class:`~lit_docemb.augment.specs.WordNet`, ``Antonym``, ``Uninformative``, ``PPDB`` or
            ``BackTranslation`` (§3.3); ``None``: ``WordNet()`` unless the framework draws no augmentation
            (``Doc2VecCAlone``, which refuses one given explicitly). Every other framework's default is
            ``WordNet()`` as before, and every shipped config with one names its augmentation: none changes behaviour.
        optimizer: Optimizer factory; ``None`` is AdamW at lr 1e-3.
        scheduler: Optional learning-rate scheduler factory.
        retention: Options that keep what a pretrained encoder backbone knew (:class:`~lit_docemb.methods.
            retention.Retention`); ``None``: none. Not for the Doc2VecC backbone, which starts from nothing.
        token_cache_dir: Folder of the cache of each document's word types, built once per corpus and vocabulary and
            read by the Doc2VecC collators in training and validation with a thesaurus augmentation (``wordnet``,
            ``antonym``, ``ppdb``) instead of splitting the text on every pass (``None``: the ``datasets`` cache
            folder).
    """

    default_learning_rate = 1e-3

    def __init__(
        self,
        backbone: Doc2VecCBackbone | Doc2VecCAdamBackbone | EncoderBackbone | None = None,
        framework: SimCLR | SimSiam | Append | Doc2VecCAlone | None = None,
        augmentation: Augmentation | None = None,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        retention: Retention | None = None,
        token_cache_dir: str | None = None,
    ) -> None:
        super().__init__(optimizer, scheduler, retention=retention)
        self.save_method_hyperparameters(ignore=["optimizer", "scheduler"])
        self.backbone_spec = Doc2VecCBackbone() if backbone is None else backbone
        self.framework = SimCLR() if framework is None else framework
        self._check_arguments(augmentation, scheduler)
        draws = self.framework.draws_augmentation
        self.augmentation: Augmentation | None = WordNet() if augmentation is None and draws else augmentation
        spec, framework = self.backbone_spec, self.framework
        if isinstance(spec, Doc2VecCBackbone):
            self.backbone: Doc2VecC | None = None  # built once the vocabulary is known (setup / checkpoint)
            self.automatic_optimization = False  # l_d by Doc2VecC's own SGD, then the optimizer's step on l_c;
            # or (Algorithm 1) many optimizer steps on each batch of documents
            dim = spec.embedding_dim
        else:
            try:
                self.tokenizer, self.encoder = spec.encoder.build()
            except BadArgument as err:  # encoder.<option> -> backbone.init_args.encoder.<option>
                raise BadArgument(f"backbone.init_args.{err.argument}", err.problem) from None
            dim = self.encoder.hidden_size
        if isinstance(framework, SimCLR):
            self.contrastive = NTXentLoss(framework.temperature, framework.denominator,
                                          framework.gather_across_devices)
        elif isinstance(framework, SimSiam):
            self.predictor = predictor(dim, framework.predictor_hidden)
            self.contrastive = SimSiamLoss()
        if framework.loss_name is not None:
            self.loss_weights = {framework.loss_name: framework.weight}
        self.vocabulary: Vocabulary | None = None
        self.index: dict[str, int] | None = None
        self._augmenter: DocumentAugmenter | None = None
        self.word_rows: FieldRows | None = None  # opened by the first collator over the DataModule's corpus
        self.word_corpus = None

    @property
    def trains_by_chen(self) -> bool:
        """l_d by Chen's sparse SGD (the Doc2VecC backbone), not by the optimizer."""
        return type(self.backbone_spec) is Doc2VecCBackbone

    @property
    def max_length(self) -> int:
        """Tokens per document of the encoder backbone."""
        return self.backbone_spec.max_length

    def _check_arguments(self, augmentation: Augmentation | None, scheduler: LRSchedulerCallable | None) -> None:
        parts = {"backbone": (self.backbone_spec, (Doc2VecCBackbone, EncoderBackbone)),
                 "framework": (self.framework, (SimCLR, SimSiam, Append, Doc2VecCAlone))}
        if augmentation is not None:
            parts["augmentation"] = (augmentation, (Augmentation,))
        for part, (component, types) in parts.items():
            if not isinstance(component, types):
                raise ConfigError(f"model.init_args.{part}: expected one of {[t.__name__ for t in types]}, got "
                                  f"{type(component).__name__}")
            for name, problem in component.problems().items():
                raise ConfigError(f"model.init_args.{part}.init_args.{name}: {problem}")
        least = getattr(augmentation, "replacement_min_count", None)
        if (isinstance(self.backbone_spec, Doc2VecCBackbone) and least is not None
                and getattr(augmentation, "dictionary_constraint", False) and least < self.backbone_spec.min_word_count):
            raise ConfigError(f"model.init_args.augmentation.init_args.replacement_min_count: {least} admits "
                              f"replacements that the Doc2VecC vocabulary (backbone min_word_count "
                              f"{self.backbone_spec.min_word_count}) does not hold, which would become deletions: "
                              f"leave it unset (it follows min_word_count) or give >= {self.backbone_spec.min_word_count}")
        if augmentation is not None and not self.framework.draws_augmentation:
            raise ConfigError(f"model.init_args.augmentation: {type(self.framework).__name__} draws no augmentation "
                              f"(Doc2VecC's loss on the documents themselves), got {type(augmentation).__name__}: "
                              "leave it unset (--model.init_args.augmentation null after a config that names one)")
        if isinstance(self.backbone_spec, Doc2VecCAdamBackbone) and scheduler is not None:
            raise ConfigError("model.init_args.scheduler: with Doc2VecCAdamBackbone an epoch's optimizer steps follow "
                              "the words of its documents, which no scheduler is told: leave it unset (Appendix "
                              "A.3.2 trains at Adam's constant 1e-3)")
        if isinstance(self.backbone_spec, EncoderBackbone):
            if isinstance(self.framework, Doc2VecCAlone):
                raise ConfigError("model.init_args.framework: Doc2VecCAlone is plain Doc2VecC (its loss l_d with no "
                                  "contrastive one): it needs the Doc2VecC backbone, not an encoder")
            if isinstance(self.framework, Append):
                raise ConfigError("model.init_args.framework: Append trains Doc2VecC on documents with their "
                                  "augmentation appended (Table 5 '-Contrastive'): an encoder has no loss without a "
                                  "contrastive one; use SimCLR or SimSiam")
            if self.framework.weight != 1.0:
                raise ConfigError("model.init_args.framework.init_args.weight: lambda weighs the contrastive loss "
                                  "against Doc2VecC's; with an encoder DECA trains on the contrastive loss alone: "
                                  f"leave it at 1.0, got {self.framework.weight}")

    # --- vocabulary: from the training documents, or from a checkpoint ----------------------------------
    def setup(self, stage: str) -> None:
        if stage == "fit" and self.trains_by_chen:
            if self.trainer.world_size > 1:
                raise ConfigError(f"trainer.devices: the Doc2VecC backbone trains with Chen's SGD in one process "
                                  f"(its in-place updates are not synchronised), got {self.trainer.world_size} "
                                  f"processes: set trainer.devices: 1")
            if self.trainer.strategy.root_device.type != "cpu":
                raise ConfigError("trainer.accelerator: the Doc2VecC backbone trains on the CPU (Chen's sparse SGD, "
                                  f"compiled by numba), got {self.trainer.strategy.root_device.type}: set "
                                  "trainer.accelerator: cpu")
        if self.vocabulary is None and stage == "fit":
            data = self.trainer.datamodule  # the documents it trains on: fit_set (fit_on: all) or the training split
            if not isinstance(data, DocumentSplits) or data.train_set is None:
                raise RuntimeError("DECA builds its vocabulary from a lit_docemb DataModule's training documents: "
                                   "run it with --data")
            documents = data.fit_set or data.train_set
            self._set_vocabulary(Vocabulary.from_texts(
                document_text(doc, True)[:self.backbone_spec.vocabulary_words * 12] for doc in iter_items(documents)))
        if self.trainer.world_size > 1 and hasattr(self, "predictor"):
            if self.trainer.strategy.root_device.type == "cuda":  # BatchNorm statistics over the global batch
                self.predictor = nn.SyncBatchNorm.convert_sync_batchnorm(self.predictor)
            else:  # torch's SyncBatchNorm is GPU-only
                log.warning("SimSiam's predictor keeps per-device BatchNorm statistics: SyncBatchNorm needs GPUs")
        # training reads the word cache's rows in place of the documents (no text read in the workers), validation
        # and test the documents that are not rows of it (a test split, a published validation split) through it
        self.token_cache = self.word_cache() if stage == "fit" and self.vocabulary is not None else None
        super().setup(stage)
        # training and validation read the word types, split once per corpus and vocabulary: opened by the first
        # collator, after a checkpoint's vocabulary is restored (validate/test restore it after setup)
        data = self.trainer.datamodule
        corpus = data.documents if isinstance(data, DocumentSplits) else None
        self.word_corpus = corpus if stage in ("fit", "validate", "test") else None
        self.word_rows = None

    def word_cache(self) -> FieldTokenCache | None:
        """The cache of the documents' word types that the Doc2VecC collators read
        (:class:`~lit_docemb.views.deca.WordTypes`), or ``None`` where they read text (an encoder backbone, no
        augmentation, an augmentation without a replacement table)."""
        if isinstance(self.backbone_spec, EncoderBackbone) or self.augmentation is None:
            return None
        replacement = self._pair_collator("validate").replacement
        if replacement is None:
            return None
        return FieldTokenCache(WordTypes(replacement, self.backbone_spec.max_words), self.hparams.token_cache_dir)

    def _set_vocabulary(self, vocabulary: Vocabulary) -> None:
        self.vocabulary, self._augmenter, self.word_rows = vocabulary, None, None
        s = self.backbone_spec
        if isinstance(s, Doc2VecCBackbone):
            self.index = word_index(vocabulary, s.min_word_count, s.max_vocabulary)
            added = list(getattr(self.augmentation, "added_words", ()))  # antonyms' "not": never dropped
            if not getattr(self.augmentation, "dictionary_constraint", True):  # thesaurus words outside the corpus
                added += [w for words in self.augmenter().draws.values() for candidate in words[2] for w in candidate]
            for word in added:
                self.index.setdefault(word, len(self.index) + 1)
            counts = torch.tensor([vocabulary.counts.get(w, 0) for w in self.index], dtype=torch.float64)
            device = next(self.parameters(), torch.empty(0)).device
            self.backbone = Doc2VecC(len(self.index), s.embedding_dim, counts, s.negative_samples, s.corruption,
                                     s.window_size, s.learning_rate).to(device)
        if self.token_cache is not None:  # a resumed fit restores the checkpoint's vocabulary after setup
            self.token_cache = self.word_cache()
            self.trainer.datamodule.connect(self.collator, self.token_cache)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The vocabulary as one string of words and two count tensors: pickling its dictionaries word by word
        cost a second per checkpoint on MR (every epoch saves one)."""
        v = self.vocabulary
        words = list(v.counts)
        checkpoint["deca_vocabulary"] = {
            "words": "\n".join(words), "num_documents": v.num_documents,
            "counts": torch.tensor([v.counts[w] for w in words], dtype=torch.int64),
            "document_frequency": torch.tensor([v.document_frequency.get(w, 0) for w in words], dtype=torch.int64)}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "deca_vocabulary" not in checkpoint:
            raise ConfigError("--ckpt_path: not a DECA checkpoint: it has no 'deca_vocabulary'")
        saved = checkpoint["deca_vocabulary"]
        if "words" not in saved:
            raise ConfigError("--ckpt_path: a DECA checkpoint from before Doc2VecC was trained as Chen's program "
                              "trains it (its vocabulary kept as dictionaries): fit it again")
        words = saved["words"].split("\n") if saved["words"] else []
        self._set_vocabulary(Vocabulary(
            counts=dict(zip(words, saved["counts"].tolist(), strict=True)),
            document_frequency={w: f for w, f in zip(words, saved["document_frequency"].tolist(), strict=True) if f},
            num_documents=saved["num_documents"]))

    def augmenter(self) -> DocumentAugmenter:
        if self.vocabulary is None:
            raise RuntimeError("DECA has no vocabulary yet: it is built in setup('fit') or read from a checkpoint")
        if self.augmentation is None:
            raise RuntimeError(f"DECA's framework {type(self.framework).__name__} draws no augmentation")
        if self._augmenter is None:
            self._augmenter = self._vocabulary_bound(self.augmentation).build(self.vocabulary)
        return self._augmenter

    def _vocabulary_bound(self, augmentation: Augmentation) -> Augmentation:
        """With the Doc2VecC backbone and the dictionary constraint, the replacements' corpus count is the
        vocabulary's ``min_word_count`` unless the config sets it (§4.4: "only words inside the vocabulary are
        considered as replacement candidates"; a candidate outside it would have no id and become a deletion)."""
        if (isinstance(self.backbone_spec, Doc2VecCBackbone) and getattr(augmentation, "dictionary_constraint", False)
                and getattr(augmentation, "replacement_min_count", 0) is None):
            augmentation = copy.copy(augmentation)
            augmentation.replacement_min_count = self.backbone_spec.min_word_count
        return augmentation

    # --- the method -------------------------------------------------------------------------------------
    def collator(self, stage: str):
        s = self.backbone_spec
        if isinstance(s, EncoderBackbone):
            if stage == "predict":
                return DocumentCollator(self.tokenizer, self.max_length, with_title=True)
            return AugmentedTextCollator(self.tokenizer, self.augmenter(), self.max_length, stage != "fit")
        if self.index is None:
            raise RuntimeError("DECA's Doc2VecC has no vocabulary: fit first, or load a checkpoint")
        if stage == "predict":
            return WordDocumentCollator(self.index, s.max_words)
        if self.augmentation is None:  # Doc2VecCAlone: the documents' own words
            return Doc2VecCCollator(self.index, s.max_words, deterministic=stage != "fit")
        if self.word_rows is None and self.word_corpus is not None:
            cache = self.token_cache or self.word_cache()  # in fit, the cache setup connected
            if cache is not None:
                self.word_rows = FieldRows(cache.open(self.word_corpus))
        return self._pair_collator(stage, self.word_rows)

    def _pair_collator(self, stage: str, cached: FieldRows | None = None) -> Doc2VecCPairCollator:
        s = self.backbone_spec
        collator = AppendedAugmentationCollator if isinstance(self.framework, Append) else Doc2VecCPairCollator
        return collator(self.index, self.augmenter(), s.max_words, deterministic=stage != "fit", cached=cached)

    def losses(self, batch: Doc2VecCBatch | Doc2VecCPairBatch | ViewPairBatch, examples: Tensor | None = None,
               packed: list[BatchWords] | None = None) -> dict[str, Tensor]:
        """The terms of a batch. With :class:`~lit_docemb.methods.deca_components.Doc2VecCAdamBackbone`, l_d is the
        mean over word-level ``examples`` ((E, 2) rows of (document, position) in ``batch.words``; ``None``: every
        word of the batch) and the contrastive term is over the documents they come from. ``packed``: the batch's
        words (and augmentations) as :class:`~lit_docemb.models.doc2vecc.BatchWords`, made once for all of a batch's
        steps (:meth:`adam_steps`); none: made here."""
        if isinstance(batch, Doc2VecCBatch):  # Append or Doc2VecCAlone: l_d alone
            return {"doc2vecc_loss": self.doc2vecc_loss(batch.words, examples),
                    "skipped_documents": torch.full((), float(batch.skipped))}
        terms = {}
        if isinstance(batch, Doc2VecCPairBatch):
            terms["doc2vecc_loss"] = self.doc2vecc_loss(batch.words, examples)
            if examples is None:
                h, h_aug, doc_index = self.backbone(batch.words), self.backbone(batch.augmented), batch.doc_index
            else:
                U = self.backbone.word_embeddings.weight
                words, augmented = packed or [self._batch_words(batch.words), self._batch_words(batch.augmented)]
                documents = examples[:, 0].unique()
                h, h_aug = words.means(U, documents), augmented.means(U, documents)  # (N, D) eq. 1
                doc_index = batch.doc_index[documents]
        else:
            both = self.encoder(torch.cat([batch.view_a.input_ids, batch.view_b.input_ids]),
                                torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask]))  # (2B, D)
            h, h_aug = both[:len(batch)], both[len(batch):]
            doc_index = batch.doc_index
        if isinstance(self.framework, SimCLR):
            terms |= self.contrastive(h, h_aug, doc_index)
        else:
            if self.training and len(h) < 2:
                raise ValueError("SimSiam's predictor has BatchNorm, which needs >= 2 documents per training "
                                 "batch: raise data.global_batch_size (or batch_size) or set data.drop_last: true")
            terms |= self.contrastive(self.predictor(h), self.predictor(h_aug), h, h_aug)
        terms["skipped_documents"] = torch.full((), float(batch.skipped), device=h.device)
        return terms

    def doc2vecc_loss(self, words: PackedWords, examples: Tensor | None) -> Tensor:
        """l_d: by Chen's rule (:meth:`doc2vecc_step`), or (the Adam backbone) the mean loss of the word-level
        examples, differentiable; outside training every word of the batch, with fixed draws."""
        if self.trains_by_chen:
            return self.doc2vecc_step(words)
        s = self.backbone_spec
        generator = None
        if examples is None:
            examples = word_examples(words)
            generator = torch.Generator().manual_seed(0)
        return self.backbone.example_loss(words, examples, s.sample_words, s.dropout, generator).mean()

    def doc2vecc_step(self, words: PackedWords) -> Tensor:
        """l_d on a batch's documents: in training, Chen's rule updates the backbone in place (the rate's schedule
        follows the trainer's steps, the draws torch's generator, so a resumed run repeats them); otherwise the
        same estimate of the loss from fixed draws, nothing changed. Returns the mean loss per target word."""
        if not self.training:
            return self.backbone.train_on(words, (0.0, 0.0), seed=0, learn=False)
        trainer = self._trainer
        total = max(int(trainer.estimated_stepping_batches), 1) if trainer is not None else 1
        step = trainer.global_step if trainer is not None else 0
        return self.backbone.train_on(words, (step / total, (step + 1) / total), int(torch.randint(2**31, ())))

    def training_step(self, batch, batch_idx: int) -> Tensor:
        """Automatic optimisation for an encoder backbone; with Doc2VecC, l_d's SGD runs inside :meth:`losses` and
        the optimizer then steps lambda * l_c (no gradient for ``Doc2VecCAlone`` and ``Append``: the step only
        counts); with the Adam backbone, :meth:`adam_steps`."""
        if self.automatic_optimization:
            return super().training_step(batch, batch_idx)
        if not self.trains_by_chen:
            return self.adam_steps(batch)
        optimizer = self.optimizers()
        optimizer.zero_grad()
        loss = self._shared_step(batch, "train")
        if loss.requires_grad:
            self.manual_backward(loss)
        optimizer.step()
        self._scheduler_step()
        self._log_contrastive_steps()
        return loss.detach()

    def adam_steps(self, batch: Doc2VecCBatch | Doc2VecCPairBatch) -> Tensor:
        """Algorithm 1 on a batch of documents: every word of them a target once, in a random order (torch's
        generator: a resumed run repeats it), ``examples_per_step`` targets an optimizer step, each step's loss
        l_d + lambda * l_c over the documents of its targets (eq. 6 with both terms means). Returns the last step's
        loss."""
        optimizer = self.optimizers()
        examples = word_examples(batch.words)
        steps = examples[torch.randperm(len(examples))].split(self.backbone_spec.examples_per_step)
        packed = [self._batch_words(batch.words)]
        if isinstance(batch, Doc2VecCPairBatch):
            packed.append(self._batch_words(batch.augmented))
        for chunk in steps:
            optimizer.zero_grad()
            terms = self.losses(batch, chunk, packed)
            loss = self.total_loss(terms)
            self.manual_backward(loss)
            optimizer.step()
            self._scheduler_step()
        self._log_terms("train", loss, terms, len(batch))
        self._log_contrastive_steps()
        return loss.detach()

    def _batch_words(self, words: PackedWords) -> BatchWords:
        return BatchWords(words, self.backbone.word_embeddings.num_embeddings)

    @property
    def contrastive_steps(self) -> int:
        """The optimizer steps so far that trained the contrastive term (every one unless the framework has none);
        with Chen's SGD one a batch, with the Adam backbone hundreds an epoch."""
        return self.trainer.global_step if self.framework.loss_name is not None else 0

    def _log_contrastive_steps(self) -> None:
        if logging_step(self._trainer):
            self.log("train/contrastive_steps", float(self.contrastive_steps), on_step=True, on_epoch=False)

    def on_train_end(self) -> None:
        """One visible line (a WARNING, as a DataModule's reading summary) with the steps the run took."""
        log.warning("DECA: %d optimizer steps, %d of them on the contrastive term (%s)", self.trainer.global_step,
                    self.contrastive_steps,
                    "l_d by Chen's SGD" if self.trains_by_chen else "l_d by the optimizer, Algorithm 1")

    def _scheduler_step(self) -> None:
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()

    def predict_step(self, batch, batch_idx: int) -> dict:
        """Ids and embeddings; with Doc2VecC, a document with no word of the vocabulary (an all-zero mean) is
        left out and counted as ``empty_documents`` unless the backbone's ``keep_empty`` is set."""
        out = super().predict_step(batch, batch_idx)
        if not isinstance(self.backbone_spec, Doc2VecCBackbone):
            return out
        known = (batch.words.lengths > 0).cpu()  # (B,)
        out["empty_documents"] = int((~known).sum())
        if self.backbone_spec.keep_empty or bool(known.all()):
            return out
        return out | {"ids": [i for i, k in zip(out["ids"], known.tolist()) if k], "embeddings": out["embeddings"][known]}

    def embed(self, batch) -> Tensor:
        if isinstance(self.backbone_spec, Doc2VecCBackbone):
            return self.backbone(batch.words)
        return self.encoder(batch.tokens.input_ids, batch.tokens.attention_mask)
