"""Options that keep what a pretrained encoder knew while a method trains it on a small corpus (issue 22).

Contrastive training on a user's corpus sharpens what its views teach and can erode what the starting encoder
knew (clustering, linear probes). :class:`Retention` holds the switches a method takes as its ``retention``
argument; the base method (:class:`~lit_docemb.methods.base.EmbeddingMethod`) applies them:

* **Embedding anchoring** (``anchor_weight``): a term pulling the trained encoder's embeddings of the batch
  towards those of a frozen copy of the starting encoder (:class:`~lit_docemb.losses.EmbeddingAnchorLoss`;
  :class:`EmbeddingAnchor` here keeps the copy and feeds it the same inputs).
* **Layer-wise learning-rate decay** (``layer_learning_rate_decay``) and **frozen layers** (``freeze_layers``,
  ``freeze_embeddings``): :func:`parameter_groups` and :func:`freeze`.
* **Heads first** (``head_warmup_steps``, ``head_learning_rate_scale``): the weights beside the pretrained backbone
  (a masked-LM head its checkpoint lacks, a projection) train alone for the first steps, at their own rate, before
  the backbone moves (:func:`drop_backbone_gradients`).

Weight-space interpolation with the starting weights (WiSE-FT) is applied after training, by ``embed``,
``export`` and ``evaluate`` (:func:`interpolated_state`); :func:`choose_alpha` picks its α on validation. The
heads' identity initialisation is each model's ``head_init`` (Graph-RoBERTa, CoLDE). ``docs/retention.md`` lists
them all.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

import torch
from torch import Tensor, nn

from lit_docemb.errors import BadArgument, ConfigError
from lit_docemb.losses import EmbeddingAnchorLoss
from lit_docemb.models.encoder import HFEncoder, pool

#: A backbone parameter's transformer layer in its name (``encoder.layer.3.``, ``layers.3.``, ``layer.3.``).
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")


class Retention:
    """What a method does to keep its starting encoder's knowledge (``docs/retention.md``).

    Args:
        anchor_weight: Weight of ``anchor_loss``, the distance between the trained encoder's pooled embeddings of
            every encoder pass of a training step and a frozen copy's of the same inputs (the starting encoder,
            in eval mode, never saved in checkpoints). Distillation from the model one starts from, as
            Learning without Forgetting (Li & Hoiem 2016) does on outputs and L2-SP (Xuhong et al. 2018) on
            weights. 0 turns it off; logged as ``train/anchor_loss``.
        anchor_distance: ``"cosine"`` (1 - cosine similarity, the geometry retrieval and clustering use) or
            ``"mse"`` (squared error of the vectors, which also keeps their norms).
        layer_learning_rate_decay: Multiplier of the learning rate per transformer layer going down (ELECTRA,
            Clark et al. 2020; ULMFiT's discriminative fine-tuning, Howard & Ruder 2018): the weights beside the
            encoder's layers (heads, graph layers, a final norm) keep the optimizer's rate lr, transformer layer k
            of L (0 the lowest) gets lr x decay^(L - k), the input embeddings lr x decay^(L + 1). 1 is one rate.
        freeze_layers: The lowest transformer layers of the encoder kept as they start (not trained, not in the
            optimizer); 0 freezes none.
        freeze_embeddings: Keep the encoder's input embeddings (tokens, positions) as they start. A masked-LM
            decoder tied to the token embeddings stays fixed with them.
        head_warmup_steps: The first optimizer steps in which only the weights beside the encoder's backbone train
            (a masked-LM head, a projection, graph layers): the backbone's gradients are dropped before each of
            these steps, so it stays as it starts while a head it did not come with learns to read it. Linear
            probing then fine-tuning (LP-FT, Kumar et al. 2022): a random head's first gradients otherwise distort
            the pretrained features. 0: none. Not with DeepSpeed (ZeRO holds the gradients partitioned).
        head_learning_rate_scale: Multiplier of the learning rate of the weights beside the backbone (a fresh head
            learns little in a short run at a rate chosen for pretrained layers); 1: one rate. A masked-LM decoder
            tied to the token embeddings is a backbone weight.
    """

    def __init__(self, anchor_weight: float = 0.0, anchor_distance: Literal["cosine", "mse"] = "cosine",
                 layer_learning_rate_decay: float = 1.0, freeze_layers: int = 0,
                 freeze_embeddings: bool = False, head_warmup_steps: int = 0,
                 head_learning_rate_scale: float = 1.0) -> None:
        self.anchor_weight, self.anchor_distance = anchor_weight, anchor_distance
        self.layer_learning_rate_decay = layer_learning_rate_decay
        self.freeze_layers, self.freeze_embeddings = freeze_layers, freeze_embeddings
        self.head_warmup_steps, self.head_learning_rate_scale = head_warmup_steps, head_learning_rate_scale

    def problems(self) -> dict[str, str]:
        """{argument: what is wrong} for each out-of-range value; the method taking it raises the first as a
        :class:`~lit_docemb.errors.BadArgument` under its own key (``model.init_args.retention.init_args.<name>``)."""
        found = {}
        if not self.anchor_weight >= 0:
            found["anchor_weight"] = f"must be >= 0 (0 turns anchoring off), got {self.anchor_weight}"
        if self.anchor_distance not in ("cosine", "mse"):
            found["anchor_distance"] = f"must be 'cosine' or 'mse', got {self.anchor_distance!r}"
        if not 0 < self.layer_learning_rate_decay <= 1:
            found["layer_learning_rate_decay"] = (f"must be in (0, 1] (1: one rate for all layers), got "
                                                  f"{self.layer_learning_rate_decay}")
        if self.freeze_layers < 0:
            found["freeze_layers"] = f"must be >= 0 (0 freezes none), got {self.freeze_layers}"
        if self.head_warmup_steps < 0:
            found["head_warmup_steps"] = f"must be >= 0 (0: none), got {self.head_warmup_steps}"
        if not self.head_learning_rate_scale > 0:
            found["head_learning_rate_scale"] = (f"must be > 0 (1: the optimizer's rate), got "
                                                 f"{self.head_learning_rate_scale}")
        return found

    def check(self) -> None:
        """Raises the first of :meth:`problems` as a :class:`~lit_docemb.errors.BadArgument` of the method."""
        for name, problem in self.problems().items():
            raise BadArgument(f"retention.init_args.{name}", problem)

    @property
    def changes_optimisation(self) -> bool:
        return (self.layer_learning_rate_decay != 1 or self.freeze_layers > 0 or self.freeze_embeddings
                or self.head_learning_rate_scale != 1)


# --- the encoder a method trains ---------------------------------------------------------------------------------
def encoder_of(method: nn.Module, key: str = "model.init_args.retention") -> HFEncoder:
    """The Hugging Face encoder a method trains (its first :class:`HFEncoder`); a :class:`ConfigError` naming
    ``key`` for a method without one (CTPE, DECA with Doc2VecC)."""
    found = next((module for module in method.modules() if isinstance(module, HFEncoder)), None)
    if found is None:
        raise ConfigError(f"{key}: {type(method).__name__} has no pretrained Hugging Face encoder to retain "
                          f"(its vectors are learnt from scratch): remove retention")
    return found


def layer_depths(encoder: HFEncoder) -> tuple[dict[int, int], int]:
    """({id(parameter): depth}, L) over the encoder's backbone: 0 the input embeddings, k + 1 transformer layer k,
    L + 1 anything else (a final norm: counted with the top)."""
    layers = int(getattr(encoder.backbone.config, "num_hidden_layers", 0))
    depths = {}
    for name, parameter in encoder.backbone.named_parameters():
        match = LAYER_INDEX.search(name)
        if match is not None:
            depths[id(parameter)] = int(match.group(1)) + 1
        elif name.startswith("embeddings.") or ".embeddings." in name or "embed" in name.split(".")[0]:
            depths[id(parameter)] = 0
        else:
            depths[id(parameter)] = layers + 1
    return depths, layers


def freeze(method: nn.Module, retention: Retention) -> int:
    """Sets ``requires_grad=False`` on the encoder's lowest ``freeze_layers`` layers (and its embeddings with
    ``freeze_embeddings``); returns how many tensors it froze."""
    if not (retention.freeze_layers or retention.freeze_embeddings):
        return 0
    depths, layers = layer_depths(encoder_of(method))
    if retention.freeze_layers > layers:
        raise ConfigError(f"model.init_args.retention.init_args.freeze_layers: {retention.freeze_layers} exceeds the "
                          f"encoder's {layers} layers: lower it")
    frozen = 0
    for parameter in method.parameters():
        depth = depths.get(id(parameter))
        if depth is not None and (depth == 0 and retention.freeze_embeddings or 1 <= depth <= retention.freeze_layers):
            parameter.requires_grad_(False)
            frozen += 1
    return frozen


def parameter_groups(method: nn.Module, retention: Retention) -> list[dict]:
    """The method's trainable parameters as optimizer groups, each with an ``lr_scale`` (see
    ``layer_learning_rate_decay`` and ``head_learning_rate_scale``); groups of one scale, in scale order."""
    depths, layers = layer_depths(encoder_of(method))
    decay = retention.layer_learning_rate_decay
    groups: dict[float, list[Tensor]] = {}
    for parameter in method.parameters():
        if parameter.requires_grad:
            depth = depths.get(id(parameter))
            scale = retention.head_learning_rate_scale if depth is None else decay ** (layers + 1 - depth)
            groups.setdefault(scale, []).append(parameter)
    return [{"params": params, "lr_scale": scale} for scale, params in sorted(groups.items())]


def scale_learning_rates(optimizer: torch.optim.Optimizer) -> None:
    """Multiplies each group's learning rate by its ``lr_scale`` (before any scheduler reads ``lr``)."""
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * group.get("lr_scale", 1.0)


def drop_backbone_gradients(encoder: HFEncoder) -> None:
    """Clears the gradients of the encoder's backbone, so that an optimizer step leaves it as it is (AdamW and
    SGD skip a parameter without a gradient: no moment update, no weight decay); ``head_warmup_steps``."""
    for parameter in encoder.backbone.parameters():
        parameter.grad = None


# --- anchoring -------------------------------------------------------------------------------------------------
class EmbeddingAnchor:
    """A frozen copy of the starting encoder's backbone and the inputs the trained one saw during a step.

    Not an ``nn.Module`` attribute of the method: the copy is not saved in checkpoints, not trained, not moved by
    ``.to`` (it follows the trained backbone's device and dtype itself) and stays in eval mode.

    Args:
        encoder: The trained encoder, as it starts (the copy is taken now).
        distance: ``"cosine"`` or ``"mse"`` (see :class:`Retention`).
    """

    def __init__(self, encoder: HFEncoder, distance: str = "cosine") -> None:
        self.encoder = encoder
        self.frozen = copy.deepcopy(encoder.backbone).eval().requires_grad_(False)
        self.loss = EmbeddingAnchorLoss(distance)
        self.seen: list[tuple[dict, Tensor, Tensor]] = []

    def _record(self, module, args, kwargs, output) -> None:
        inputs = {k: kwargs[k] for k in ("input_ids", "inputs_embeds") if kwargs.get(k) is not None}
        mask = kwargs["attention_mask"]
        self.seen.append((inputs, mask, pool(output.last_hidden_state, mask, self.encoder.pooling)))

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Within it, every forward pass of the trained backbone is recorded."""
        self.seen = []
        handle = self.encoder.backbone.register_forward_hook(self._record, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def terms(self) -> dict[str, Tensor]:
        """``{"anchor_loss": ...}`` over the passes recorded by :meth:`capture` (their rows together)."""
        reference = next(self.encoder.backbone.parameters())
        self.frozen.to(device=reference.device, dtype=reference.dtype)
        trained, targets = [], []
        with torch.no_grad():
            for inputs, mask, pooled in self.seen:
                detached = {k: v.detach() for k, v in inputs.items()}
                hidden = self.frozen(**detached, attention_mask=mask).last_hidden_state
                targets.append(pool(hidden, mask, self.encoder.pooling))
                trained.append(pooled)
        self.seen = []
        if not trained:
            raise RuntimeError("anchor_weight is set but the training step never ran the encoder's backbone")
        return self.loss(torch.cat(trained), torch.cat(targets))


# --- weight-space interpolation (WiSE-FT) ----------------------------------------------------------------------
def interpolated_state(trained: dict[str, Tensor], starting: dict[str, Tensor], alpha: float) -> dict[str, Tensor]:
    """``(1 - alpha) * starting + alpha * trained`` for every floating-point tensor of ``trained`` (WiSE-FT,
    Wortsman et al. 2022); integer buffers (position ids, counters) are the trained ones. ``alpha`` 0 gives
    ``starting`` exactly, 1 ``trained`` exactly. A weight ``starting`` lacks, or of another shape, is a
    :class:`ConfigError` naming it.

    Args:
        trained: The trained method's state dict.
        starting: The state dict of the method as its config builds it (the starting weights).
        alpha: The share of the trained weights, in [0, 1].
    """
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"--interpolate_alpha: must be in [0, 1] (0 the starting weights, 1 the trained ones), "
                          f"got {alpha}")
    mixed = {}
    for key, value in trained.items():
        if not torch.is_floating_point(value):
            mixed[key] = value
            continue
        start = starting.get(key)
        if start is None or start.shape != value.shape:
            raise ConfigError(f"--interpolate_alpha: weight {key} of the checkpoint has no counterpart of shape "
                              f"{tuple(value.shape)} in the method as its config builds it (a vocabulary sized by "
                              f"training?): this method cannot be interpolated; leave --interpolate_alpha unset")
        start = start.to(value.device, torch.float32)
        mixed[key] = ((1.0 - alpha) * start + alpha * value.float()).to(value.dtype)
    return mixed


#: The grid :func:`choose_alpha` scores by default.
ALPHA_GRID: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))


def choose_alpha(score: Callable[[float], float], alphas: Sequence[float] = ALPHA_GRID) -> tuple[float, dict]:
    """The α of ``alphas`` with the highest ``score(α)`` (the smallest α among ties: closest to the start), and
    every α's score.

    Args:
        score: The validation score of the method interpolated at α (higher is better).
        alphas: The α values tried.
    """
    scores = {float(alpha): float(score(float(alpha))) for alpha in alphas}
    best = max(scores, key=lambda alpha: (scores[alpha], -alpha))
    return best, scores
