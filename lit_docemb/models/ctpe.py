"""CTPE's encoders (seed paper 004, §3.2): token vectors → four parallel 1-D convolutions → a text vector,
one CNN for former parts and one for latter parts, and the coupled-pair similarity of eq. 2.

Plain ``nn.Module``s: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoModel

from lit_docemb.models.encoder import resolve_model_path


class ConvTextEncoder(nn.Module):
    """The CNN model of CTPE's Figure 1: parallel convolutions (stride 1, ReLU), max-pool over time, concatenation.

    A text of ``l`` tokens gives, for a kernel of width ``w``, ``n_filters`` feature maps of ``l - w + 1``
    positions, each max-pooled to one value; the widths' vectors are concatenated into ``len(widths) *
    n_filters`` values (4 x 1,024 in the paper). Padding never enters the pool: padded token vectors are zeroed
    and only windows lying inside the text are pooled; a text shorter than a kernel is zero-padded to one window.

    Args:
        input_dim: Dimension of the token vectors (100 for the paper's word2vec).
        n_filters: Filters per kernel width, ``n_f`` (paper: 1,024).
        widths: Kernel widths ``n_s`` (paper: 1, 2, 3, 5).
    """

    def __init__(self, input_dim: int, n_filters: int = 1024, widths: Sequence[int] = (1, 2, 3, 5)) -> None:
        super().__init__()
        if not widths or min(widths) < 1 or n_filters < 1:
            raise ValueError(f"need positive kernel widths and n_filters, got widths={list(widths)}, "
                             f"n_filters={n_filters}")
        self.widths = list(widths)
        self.convs = nn.ModuleList(nn.Conv1d(input_dim, n_filters, w) for w in self.widths)
        self.output_dim = len(self.widths) * n_filters

    def forward(self, vectors: Tensor, mask: Tensor) -> Tensor:
        """Token vectors (B, T, E) and mask (B, T) (1 = token) → text vectors (B, len(widths) * n_filters)."""
        lengths = mask.sum(1)  # (B,)
        x = (vectors * mask.unsqueeze(-1).to(vectors.dtype)).transpose(1, 2)  # (B, E, T), padding zeroed
        if x.shape[-1] < max(self.widths):
            x = F.pad(x, (0, max(self.widths) - x.shape[-1]))
        pooled = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            maps = F.relu(conv(x))  # (B, n_f, T - w + 1)
            positions = torch.arange(maps.shape[-1], device=maps.device)
            inside = positions < (lengths - width + 1).clamp(min=1).unsqueeze(1)  # (B, T - w + 1)
            # maps are >= 0 after ReLU, so zeroing the windows outside the text never changes the maximum
            pooled.append((maps * inside.unsqueeze(1).to(maps.dtype)).amax(-1))  # (B, n_f)
        return torch.cat(pooled, dim=-1)  # (B, len(widths) * n_f)


class WordVectors(nn.Module):
    """Trainable word embeddings (index 0 is padding), optionally initialised from given vectors (word2vec).

    Args:
        vocabulary_size: Number of rows, padding and unknown-word rows included.
        dim: Vector dimension (paper: 100).
        initial: Optional (vocabulary_size, dim) starting weights.
    """

    def __init__(self, vocabulary_size: int, dim: int = 100, initial: Tensor | None = None) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, dim, padding_idx=0)
        if initial is not None:
            if tuple(initial.shape) != (vocabulary_size, dim):
                raise ValueError(f"initial vectors {tuple(initial.shape)} != ({vocabulary_size}, {dim})")
            with torch.no_grad():
                self.embedding.weight.copy_(initial)
        self.dim = dim

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return self.embedding(input_ids)  # (B, T, E)


class FrozenTransformerStates(nn.Module):
    """Contextual token states of a pretrained Hugging Face encoder, frozen (CTPE §4.2/§4.5 use the deep
    language models "without fine-tuning"; only the CNNs train). It stays in eval mode even when its parent is
    put in training mode, so dropout never touches the states.

    Args:
        name_or_path: Local folder, hub name or ``package:<module>`` of the encoder.
    """

    def __init__(self, name_or_path: str) -> None:
        super().__init__()
        self.model = AutoModel.from_pretrained(resolve_model_path(name_or_path))
        self.model.requires_grad_(False)
        self.model.eval()
        self.dim: int = self.model.config.hidden_size
        self.max_positions: int | None = getattr(self.model.config, "max_position_embeddings", None)

    def train(self, mode: bool = True) -> FrozenTransformerStates:
        super().train(mode)
        self.model.eval()
        return self

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        if input_ids.shape[0] == 0:
            return input_ids.new_zeros((*input_ids.shape, self.dim), dtype=torch.float)
        with torch.no_grad():
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, E)


class CoupledPairEncoder(nn.Module):
    """Token vectors shared by both parts, then a former-part CNN and a latter-part CNN.

    §3.2 / Figure 1: the four texts of a training example (f_i, b_i, f_x, b_y) go through "four CNN models
    (former part, latter part, former part and latter part)", and "positive and negative samples usually
    share the same model parameters": so one CNN encodes every former part and another every latter part,
    positive or negative. ``share_part_encoders=True`` uses one CNN for both parts (not the paper's layout).
    The embedding model E is one for the whole text, so the token vectors are shared by both parts.

    Args:
        token_vectors: Module (input_ids (B, T), attention_mask (B, T)) → (B, T, E) with an attribute ``dim``, or
            with a ``units`` method → ((B, U, E), mask (B, U)) (sentence vectors: :meth:`part_vectors`).
        n_filters: Filters per kernel width (paper: 1,024).
        widths: Kernel widths (paper: 1, 2, 3, 5).
        share_part_encoders: One CNN for former and latter parts instead of one each.
    """

    def __init__(self, token_vectors: nn.Module, n_filters: int = 1024, widths: Sequence[int] = (1, 2, 3, 5),
                 share_part_encoders: bool = False) -> None:
        super().__init__()
        self.token_vectors = token_vectors
        self.former = ConvTextEncoder(token_vectors.dim, n_filters, widths)
        self.latter = self.former if share_part_encoders else ConvTextEncoder(token_vectors.dim, n_filters, widths)
        self.output_dim = self.former.output_dim

    def part_vectors(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The vectors (B, U, E) of a part's units and their mask (B, U): its tokens', or, for a source with a
        ``units`` method (sentence vectors), the units it groups the ids into."""
        units = getattr(self.token_vectors, "units", None)
        if units is not None:
            return units(input_ids, attention_mask)
        return self.token_vectors(input_ids, attention_mask), attention_mask

    def encode(self, input_ids: Tensor, attention_mask: Tensor, part: str) -> Tensor:
        """Token ids (B, T) of former (``part="former"``) or latter parts → (B, D)."""
        cnn = {"former": self.former, "latter": self.latter}[part]
        return cnn(*self.part_vectors(input_ids, attention_mask))

    def forward(self, former_ids: Tensor, former_mask: Tensor, latter_ids: Tensor,
                latter_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The pair (v_f, v_b), each (B, D)."""
        return self.encode(former_ids, former_mask, "former"), self.encode(latter_ids, latter_mask, "latter")


def coupled_pair_similarity(former_a: Tensor, latter_a: Tensor, former_b: Tensor, latter_b: Tensor) -> Tensor:
    """CTPE eq. 2 between every document of set a (Q) and every document of set b (N):
    ``sim(a_q, b_n) = cos(v_f(a_q), v_b(b_n)) + cos(v_f(b_n), v_b(a_q))`` as a (Q, N) matrix in fp32.

    It is symmetric in its two documents but not a self-similarity: sim(d, d) is not 2 in general (§3.3).
    """
    fa, la, fb, lb = (F.normalize(x.float(), dim=-1) for x in (former_a, latter_a, former_b, latter_b))
    return fa @ lb.T + la @ fb.T  # (Q, N)
