"""ELMo (Peters et al., 2018) in plain torch, read from the files that allennlp.org/elmo released: the options
``elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json`` and the weights ``..._5.5B_weights.hdf5`` ("Original (5.5B)",
the model of CTPE's Table 4 ELMo row; the other releases of the same layout load as well).

The options file has two groups: ``char_cnn`` (``embedding.dim`` 16, ``filters`` ``[[width, count], ...]``,
``n_highway`` 2, ``n_characters`` 262, ``max_characters_per_token`` 50, ``activation`` ``relu``) and ``lstm``
(``dim`` 4096 cells, ``projection_dim`` 512, ``n_layers`` 2, ``cell_clip`` 3, ``proj_clip`` 3,
``use_skip_connections`` true). The weights file holds TensorFlow's variables (inputs times weights, ``x @ W``):

- ``char_embed`` (n_characters - 1, char_dim): the vectors of character ids 1 and up; id 0 is padding (a zero vector);
- ``CNN/W_cnn_{i}`` (1, width, char_dim, count) and ``CNN/b_cnn_{i}`` (count,), filter group i;
- ``CNN_high_{k}/W_transform``, ``W_carry`` (F, F) and ``b_transform``, ``b_carry`` (F,), F the sum of the counts;
- ``CNN_proj/W_proj`` (F, P) and ``b_proj`` (P,), P = ``projection_dim``;
- ``RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0`` (input + P, 4 * cell), ``B`` (4 * cell,), ``W_P_0`` (cell, P): layer
  l of direction d (0 forward, 1 backward), the gates packed as TensorFlow's LSTMCell packs them (i, j, f, o).

The computation, for a sentence of tokens:

- a token is ``max_characters_per_token`` character ids: begin-of-word (258), the UTF-8 bytes of the token cut to
  ``max_characters_per_token - 2``, end-of-word (259), padding characters (260), every id plus one (0 is padding);
  the sentence boundaries ``<S>`` and ``</S>`` are the tokens whose one "byte" is 256 and 257 (:func:`character_ids`);
- character CNN: each filter group convolves the character vectors, max-pools over positions, then applies the
  activation; the groups are concatenated into x (F); highway layer k: ``g = sigmoid(x W_carry + b_carry)``,
  ``x = g * relu(x W_transform + b_transform) + (1 - g) * x``; token vector ``x W_proj + b_proj`` (P);
- biLSTM: ``<S>`` + tokens + ``</S>`` run left to right through the forward layers and right to left through the
  backward ones; one step of a layer (TensorFlow's LSTMCell with ``num_proj``, forget bias 1): ``[i, j, f, o] =
  [x_t, h_{t-1}] W_0 + B``, ``c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)``,
  ``h_t = clip((sigmoid(o) * tanh(c_t)) W_P_0, proj_clip)``; with skip connections every layer but the first adds
  its input to its output; states start at zero for every sentence;
- the layers of a token: layer 0 is its token vector twice ``[x; x]`` (2P), layer l its forward and backward
  outputs ``[h_fwd; h_bwd]`` (2P); the boundary tokens' outputs are dropped.

Plain ``nn.Module``s; reading the hdf5 file needs h5py (a base requirement).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.errors import BadArgument

BEGIN_SENTENCE, END_SENTENCE, BEGIN_WORD, END_WORD, PADDING_CHARACTER = 256, 257, 258, 259, 260

LayerMix = Literal["mean", "top"]


@dataclass(frozen=True)
class ElmoOptions:
    """What an ELMo options file says (see the module docstring for the keys)."""

    filters: tuple[tuple[int, int], ...]
    n_highway: int
    character_dim: int
    n_characters: int
    max_characters_per_token: int
    activation: str
    cell_dim: int
    projection_dim: int
    n_layers: int
    cell_clip: float | None
    projection_clip: float | None
    use_skip_connections: bool

    @classmethod
    def read(cls, path: str) -> ElmoOptions:
        """The options of an ``..._options.json`` file; a missing file or key stops with one line naming it."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            cnn, lstm = raw["char_cnn"], raw["lstm"]
            options = cls(tuple((int(w), int(n)) for w, n in cnn["filters"]), int(cnn["n_highway"]),
                          int(cnn["embedding"]["dim"]), int(cnn["n_characters"]), int(cnn["max_characters_per_token"]),
                          str(cnn["activation"]), int(lstm["dim"]), int(lstm["projection_dim"]), int(lstm["n_layers"]),
                          lstm.get("cell_clip"), lstm.get("proj_clip"), bool(lstm.get("use_skip_connections", False)))
        except FileNotFoundError as err:
            raise BadArgument("options_file", f"no file at {path!r}: download "
                                              "elmo_2x4096_512_2048cnn_2xhighway_5.5B_options.json from allennlp.org/elmo") from err
        except (ValueError, KeyError, TypeError) as err:
            raise BadArgument("options_file", f"{path!r} is not an ELMo options file (char_cnn and lstm groups): "
                                              f"{type(err).__name__} {err}") from err
        if options.activation not in ("relu", "tanh"):
            raise BadArgument("options_file", f"{path!r}: char_cnn.activation must be relu or tanh, got "
                                              f"{options.activation!r}")
        return options


def character_ids(word: str, max_characters: int = 50) -> list[int]:
    """The ``max_characters`` ids of a token (module docstring); ``"<S>"`` and ``"</S>"`` are the sentence
    boundaries."""
    if word in ("<S>", "</S>"):
        inner = [BEGIN_SENTENCE if word == "<S>" else END_SENTENCE]
    else:
        inner = list(word.encode("utf-8", "ignore")[:max_characters - 2])
    ids = [BEGIN_WORD, *inner, END_WORD] + [PADDING_CHARACTER] * (max_characters - 2 - len(inner))
    return [i + 1 for i in ids]


class CharacterEncoder(nn.Module):
    """Token character ids (N, C) → token vectors (N, P): character CNN, highway layers, projection."""

    def __init__(self, options: ElmoOptions) -> None:
        super().__init__()
        self.embedding = nn.Embedding(options.n_characters, options.character_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(nn.Conv1d(options.character_dim, count, width)
                                          for width, count in options.filters)
        total = sum(count for _, count in options.filters)
        self.transforms = nn.ModuleList(nn.Linear(total, total) for _ in range(options.n_highway))
        self.carries = nn.ModuleList(nn.Linear(total, total) for _ in range(options.n_highway))
        self.projection = nn.Linear(total, options.projection_dim)
        self.activation = torch.relu if options.activation == "relu" else torch.tanh

    def forward(self, characters: Tensor) -> Tensor:
        x = self.embedding(characters).transpose(1, 2)  # (N, char_dim, C)
        x = torch.cat([self.activation(conv(x).amax(-1)) for conv in self.convolutions], dim=-1)  # (N, F)
        for transform, carry in zip(self.transforms, self.carries, strict=True):
            gate = torch.sigmoid(carry(x))
            x = gate * F.relu(transform(x)) + (1 - gate) * x
        return self.projection(x)  # (N, P)


class ProjectedLSTM(nn.Module):
    """One direction of one layer: TensorFlow's LSTMCell with a projection and clipping (module docstring); the
    gates are chunked in TensorFlow's packing order (i, j, f, o), so ``W_0`` and ``B`` load without reordering."""

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int, cell_clip: float | None,
                 projection_clip: float | None) -> None:
        super().__init__()
        self.input_linearity = nn.Linear(input_dim, 4 * cell_dim)  # W_0's input rows, and B (forget bias added)
        self.state_linearity = nn.Linear(projection_dim, 4 * cell_dim, bias=False)  # W_0's recurrent rows
        self.projection = nn.Linear(cell_dim, projection_dim, bias=False)  # W_P_0
        self.cell_dim, self.cell_clip, self.projection_clip = cell_dim, cell_clip, projection_clip

    def forward(self, inputs: Tensor) -> Tensor:
        """(B, S, input) → (B, S, P), left to right from zero states."""
        batch, steps, _ = inputs.shape
        gates_in = self.input_linearity(inputs)  # (B, S, 4 * cell)
        state = inputs.new_zeros(batch, self.projection.out_features)
        cell = inputs.new_zeros(batch, self.cell_dim)
        outputs = []
        for t in range(steps):
            i, j, f, o = (gates_in[:, t] + self.state_linearity(state)).chunk(4, dim=-1)
            cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(j)
            if self.cell_clip is not None:
                cell = cell.clamp(-self.cell_clip, self.cell_clip)
            state = self.projection(torch.sigmoid(o) * torch.tanh(cell))
            if self.projection_clip is not None:
                state = state.clamp(-self.projection_clip, self.projection_clip)
            outputs.append(state)
        return torch.stack(outputs, dim=1) if outputs else inputs.new_zeros(batch, 0, self.projection.out_features)


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """(B, S, D) with each row's first ``lengths[b]`` steps reversed, the rest kept (its own inverse)."""
    steps = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, S)
    index = torch.where(steps < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - steps, steps)  # (B, S)
    return x.gather(1, index.unsqueeze(-1).expand_as(x))


def group_units(input_ids: Tensor, attention_mask: Tensor, end_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Ids (B, T) that close each unit (a word of characters, a sentence of words) with ``end_id`` → the members
    (N, L) of the N units in order (row by row; a last unit without its end id counts too; 0 after a unit's end),
    their lengths (N,) and the units of each row (B,)."""
    valid = attention_mask.bool()
    is_end = (input_ids == end_id) & valid
    lengths = valid.long().sum(1)  # (B,)
    last = input_ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    count = is_end.long().sum(1) + ((lengths > 0) & (last != end_id)).long()  # (B,)
    row_start = torch.cumsum(count, 0) - count  # (B,) the first unit of each row
    unit_of = (row_start.unsqueeze(1) + torch.cumsum(is_end.long(), 1) - is_end.long())  # (B, T)
    is_member = valid & ~is_end
    unit_of_member = unit_of[is_member]  # (K,), nondecreasing
    position = torch.arange(len(unit_of_member), device=input_ids.device) - \
        torch.searchsorted(unit_of_member, unit_of_member)  # (K,) index within its unit
    total = int(count.sum())
    unit_lengths = torch.bincount(unit_of_member, minlength=total)  # (N,)
    members = input_ids.new_zeros(total, max(int(unit_lengths.max()) if total else 0, 1))  # (N, L)
    members[unit_of_member, position] = input_ids[is_member]
    return members, unit_lengths, count


def unit_mask(count: Tensor) -> Tensor:
    """(B, U) 1 where a row has its u-th unit, U the most units of a row (at least 1)."""
    width = max(int(count.max()) if len(count) else 0, 1)
    return (torch.arange(width, device=count.device).unsqueeze(0) < count.unsqueeze(1)).long()


class ElmoBiLM(nn.Module):
    """ELMo's character encoder and biLSTM (module docstring); build it from the released files with
    :meth:`from_files`."""

    def __init__(self, options: ElmoOptions) -> None:
        super().__init__()
        self.options = options
        self.characters = CharacterEncoder(options)
        size = options.projection_dim

        def layer() -> ProjectedLSTM:
            return ProjectedLSTM(size, options.cell_dim, size, options.cell_clip, options.projection_clip)

        self.forward_layers = nn.ModuleList(layer() for _ in range(options.n_layers))
        self.backward_layers = nn.ModuleList(layer() for _ in range(options.n_layers))
        boundaries = [character_ids(w, options.max_characters_per_token) for w in ("<S>", "</S>")]
        self.register_buffer("boundaries", torch.tensor(boundaries), persistent=False)  # (2, C)
        self.dim = 2 * size

    @classmethod
    def from_files(cls, options_file: str, weights_file: str) -> ElmoBiLM:
        """The model of an options json and its weights hdf5 (:func:`load_weights`)."""
        model = cls(ElmoOptions.read(options_file))
        load_weights(model, weights_file, options_file)
        return model

    def forward(self, characters: Tensor, mask: Tensor) -> Tensor:
        """Token character ids (B, T, C) and mask (B, T) (1 = token, tokens first) → the layers (L + 1, B, T, 2P)
        of the tokens (zero at padding); the sentence boundaries are added here."""
        batch, tokens, width = characters.shape
        lengths = mask.long().sum(1)  # (B,)
        rows = torch.arange(batch, device=characters.device)
        sentence = characters.new_zeros(batch, tokens + 2, width)
        sentence[:, 0] = self.boundaries[0]
        sentence[:, 1:tokens + 1] = characters * mask.unsqueeze(-1).to(characters.dtype)
        sentence[rows, lengths + 1] = self.boundaries[1]
        x = self.characters(sentence.reshape(-1, width)).reshape(batch, tokens + 2, -1)  # (B, S, P)
        layers = [torch.cat([x, x], dim=-1)]
        forward_input, backward_input = x, reverse_within_length(x, lengths + 2)
        for index, (forward_lstm, backward_lstm) in enumerate(zip(self.forward_layers, self.backward_layers,
                                                                  strict=True)):
            forward_output, backward_output = forward_lstm(forward_input), backward_lstm(backward_input)
            if index > 0 and self.options.use_skip_connections:
                forward_output, backward_output = forward_output + forward_input, backward_output + backward_input
            layers.append(torch.cat([forward_output, reverse_within_length(backward_output, lengths + 2)], dim=-1))
            forward_input, backward_input = forward_output, backward_output
        inside = mask.to(x.dtype).unsqueeze(-1)  # (B, T, 1)
        return torch.stack([layer[:, 1:tokens + 1] * inside for layer in layers])  # (L + 1, B, T, 2P)


def _dataset(handle, name: str, shape: tuple[int, ...], weights_file: str, options_file: str) -> np.ndarray:
    """The float32 array of dataset ``name``, which must have ``shape`` (the options' sizes)."""
    if name not in handle:
        raise BadArgument("weights_file", f"{weights_file!r} has no dataset {name} (not an ELMo weights file, or "
                                          f"not the one of {options_file!r})")
    array = np.asarray(handle[name][...], dtype=np.float32)
    if array.shape != shape:
        raise BadArgument("options_file", f"{options_file!r} does not match {weights_file!r}: dataset {name} is "
                                          f"{array.shape}, the options give {shape}")
    return array


def load_weights(model: ElmoBiLM, weights_file: str, options_file: str = "the options file") -> None:
    """Copies the released hdf5 datasets (module docstring) into ``model``; a missing file, a missing dataset or a
    shape the options do not give stops with one line naming the file."""
    try:
        import h5py
    except ImportError as err:
        raise BadArgument("weights_file", "reading ELMo's hdf5 weights needs h5py, a base requirement of lit_docemb: "
                                          "pip install -e . (or pip install h5py)") from err
    if not Path(weights_file).is_file():
        raise BadArgument("weights_file", f"no file at {weights_file!r}: download "
                                          "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5 from allennlp.org/elmo")
    options = model.options
    try:
        handle = h5py.File(weights_file, "r")
    except OSError as err:
        raise BadArgument("weights_file", f"{weights_file!r} is not an hdf5 file ({err})") from err
    with handle, torch.no_grad():
        def read(name: str, *shape: int) -> Tensor:
            return torch.from_numpy(_dataset(handle, name, tuple(shape), weights_file, options_file))

        characters = model.characters
        characters.embedding.weight.zero_()
        characters.embedding.weight[1:] = read("char_embed", options.n_characters - 1, options.character_dim)
        for i, ((width, count), conv) in enumerate(zip(options.filters, characters.convolutions, strict=True)):
            weight = read(f"CNN/W_cnn_{i}", 1, width, options.character_dim, count)[0]  # (width, char_dim, count)
            conv.weight.copy_(weight.permute(2, 1, 0))  # (count, char_dim, width)
            conv.bias.copy_(read(f"CNN/b_cnn_{i}", count))
        total = sum(count for _, count in options.filters)
        for k, (transform, carry) in enumerate(zip(characters.transforms, characters.carries, strict=True)):
            transform.weight.copy_(read(f"CNN_high_{k}/W_transform", total, total).T)
            transform.bias.copy_(read(f"CNN_high_{k}/b_transform", total))
            carry.weight.copy_(read(f"CNN_high_{k}/W_carry", total, total).T)
            carry.bias.copy_(read(f"CNN_high_{k}/b_carry", total))
        characters.projection.weight.copy_(read("CNN_proj/W_proj", total, options.projection_dim).T)
        characters.projection.bias.copy_(read("CNN_proj/b_proj", options.projection_dim))
        size, cell = options.projection_dim, options.cell_dim
        for direction, layers in enumerate((model.forward_layers, model.backward_layers)):
            for index, lstm in enumerate(layers):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{index}/LSTMCell"
                packed = read(f"{prefix}/W_0", size + size, 4 * cell).T  # (4 * cell, input + P)
                lstm.input_linearity.weight.copy_(packed[:, :size])
                lstm.state_linearity.weight.copy_(packed[:, size:])
                bias = read(f"{prefix}/B", 4 * cell).clone()
                bias[2 * cell:3 * cell] += 1.0  # TensorFlow's LSTMCell adds forget_bias = 1 at run time
                lstm.input_linearity.bias.copy_(bias)
                lstm.projection.weight.copy_(read(f"{prefix}/W_P_0", cell, size).T)


def mix_layers(layers: Tensor, layer_mix: LayerMix) -> Tensor:
    """(L + 1, B, T, D) → (B, T, D): ``"mean"``, the mean of the character layer and the biLSTM layers (what a
    scalar mix gives at its start, softmax of equal weights and scale 1: the release has no task weights); ``"top"``,
    the top biLSTM layer."""
    return layers.mean(0) if layer_mix == "mean" else layers[-1]


class FrozenElmoStates(nn.Module):
    """ELMo's contextual word vectors, frozen (CTPE §4.2 uses the pretrained models without fine-tuning): ids (B, T)
    of each word's UTF-8 bytes (``first_byte_id`` + byte) closed by ``word_end_id`` → the vectors of the words (B, W,
    2P) and their mask (B, W) (:meth:`units`), each part of a document one ELMo sentence. Any word encodes (ELMo reads
    characters). It stays in eval mode when its parent trains.

    Args:
        bilm: The loaded :class:`ElmoBiLM`.
        layer_mix: ``"mean"`` or ``"top"`` (:func:`mix_layers`).
        word_end_id: The id that closes a word.
        first_byte_id: The id of byte 0.
    """

    def __init__(self, bilm: ElmoBiLM, layer_mix: LayerMix = "mean", word_end_id: int = 1,
                 first_byte_id: int = 2) -> None:
        super().__init__()
        if layer_mix not in ("mean", "top"):
            raise BadArgument("layer_mix", f"must be 'mean' or 'top', got {layer_mix!r}")
        self.bilm = bilm.requires_grad_(False).eval()
        self.layer_mix, self.dim = layer_mix, bilm.dim
        self.word_end_id, self.first_byte_id = word_end_id, first_byte_id

    def train(self, mode: bool = True) -> FrozenElmoStates:
        super().train(mode)
        self.bilm.eval()
        return self

    def units(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Byte and word-end ids (B, T) with their mask → word vectors (B, W, 2P) and word mask (B, W)."""
        with torch.no_grad():
            members, lengths, count = group_units(input_ids, attention_mask, self.word_end_id)  # (N, L), (N,), (B,)
            width = self.bilm.options.max_characters_per_token
            kept = lengths.clamp(max=width - 2)  # ELMo reads a word's first max_characters - 2 bytes
            steps = torch.arange(width, device=input_ids.device).unsqueeze(0)  # (1, C)
            characters = torch.full((len(members), width), PADDING_CHARACTER + 1, dtype=torch.long,
                                    device=input_ids.device)
            characters[:, 0] = BEGIN_WORD + 1
            inside = (steps >= 1) & (steps <= kept.unsqueeze(1))
            source = (steps - 1).clamp(min=0, max=members.shape[1] - 1).expand(len(members), -1)
            bytes_ = members.gather(1, source) - self.first_byte_id + 1  # (N, C) byte + 1
            characters = torch.where(inside, bytes_, characters)
            characters = torch.where(steps == kept.unsqueeze(1) + 1, torch.full_like(characters, END_WORD + 1),
                                     characters)
            mask = unit_mask(count)  # (B, W)
            words = characters.new_zeros(*mask.shape, width)  # (B, W, C)
            words[mask.bool()] = characters
            return mix_layers(self.bilm(words, mask), self.layer_mix), mask  # (B, W, 2P), (B, W)
