"""Random and scripted weights of the tiny checkpoints.

The model is instantiated through Transformers from the config dictionary
(so every tensor name and shape is exactly what both Transformers and
MLX-VLM expect), its weights are drawn from a fixed seed, and the state dict
is serialised with safetensors. torch is imported here, lazily: importing
:mod:`comfy_llm_testworld.checkpoints` must stay cheap.

The scripted variant replaces a few tensors so that greedy decoding follows
a fixed chain whatever the prompt (see :func:`apply_script`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Seed of the random weights: fixed so that content hashes are stable.
SEED = 1234

#: Logit given to the scripted next token (every other logit is 0).
_SCRIPT_LOGIT = 10.0


@dataclass(frozen=True)
class WeightLayout:
    """Where the scripted surgery acts in one architecture's state dict.

    Attributes:
        embed: Token embedding matrix.
        lm_head: Output projection (untied from the embedding).
        final_norm: Final RMSNorm weight of the language model.
        final_norm_identity: Value of that weight that makes the norm a pure
            rescale: 0 for Qwen3.5 (its RMSNorm multiplies by ``1 + weight``;
            MLX-VLM adds the 1 when it loads the checkpoint), 1 for Llama.
        layers_prefix: Prefix of the language model's decoder layers.
        residual_writers: Suffixes of every projection that writes into the
            residual stream: attention output, linear-attention (Gated
            DeltaNet) output and MLP down projection.
    """

    embed: str
    lm_head: str
    final_norm: str
    final_norm_identity: float
    layers_prefix: str
    residual_writers: tuple[str, ...]


QWEN3_5_LAYOUT = WeightLayout(
    embed="model.language_model.embed_tokens.weight",
    lm_head="lm_head.weight",
    final_norm="model.language_model.norm.weight",
    final_norm_identity=0.0,
    layers_prefix="model.language_model.layers.",
    residual_writers=(
        ".self_attn.o_proj.weight",
        ".linear_attn.out_proj.weight",
        ".mlp.down_proj.weight",
    ),
)

SMOLVLM_LAYOUT = WeightLayout(
    embed="model.text_model.embed_tokens.weight",
    lm_head="lm_head.weight",
    final_norm="model.text_model.norm.weight",
    final_norm_identity=1.0,
    layers_prefix="model.text_model.layers.",
    residual_writers=(".self_attn.o_proj.weight", ".mlp.down_proj.weight"),
)


def random_state_dict(
    config: dict[str, Any],
    auto_class: str = "AutoModelForImageTextToText",
    *,
    as_saved: bool = False,
) -> dict[str, Any]:
    """Instantiate the architecture with seeded random weights.

    Args:
        config: The ``config.json`` dictionary.
        auto_class: The Transformers auto class that builds the architecture
            (Phi-4-multimodal is not an image-text-to-text model there).
        as_saved: Return what ``save_pretrained`` writes instead of the
            module's state dict: Transformers 5 renames some architectures'
            weights on load (``conversion_mapping.py``: LLaVA's
            ``language_model.model.*`` becomes ``model.language_model.*``)
            and reverts that on save, and it leaves tied weights out. The
            real repositories carry the saved names, and MLX-VLM and vLLM
            read those.

    Returns:
        Tensor name -> float32 CPU tensor, in the names of the Hub layout.
    """
    import torch
    import transformers
    from transformers import AutoConfig

    params = dict(config)
    model_type = params.pop("model_type")
    params.pop("architectures", None)
    hf_config = AutoConfig.for_model(model_type, **params)
    # fork: seed our draw without disturbing the caller's RNG stream
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = getattr(transformers, auto_class).from_config(hf_config, dtype=torch.float32)
    if as_saved:
        return _saved_tensors(model)
    return {
        name: tensor.detach().to(torch.float32).contiguous().clone()
        for name, tensor in sorted(model.state_dict().items())
    }


def _saved_tensors(model: Any) -> dict[str, Any]:
    """The tensors ``save_pretrained`` writes (Hub names, tied weights left out)."""
    import tempfile
    from pathlib import Path

    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        shards = sorted(Path(folder).glob("*.safetensors"))
        tensors: dict[str, Any] = {}
        for shard in shards:
            tensors.update(load_file(str(shard)))
    return {name: tensors[name].contiguous() for name in sorted(tensors)}


def apply_script(
    tensors: dict[str, Any],
    layout: WeightLayout,
    transitions: dict[int, int],
    default_next: int,
) -> None:
    """Rewrite the weights so greedy decoding follows ``transitions``.

    With every residual writer zeroed, the hidden state at the last position
    is just that token's embedding, whatever came before it (attention and
    the vision tower still run, but add nothing). Each source token of
    ``transitions`` gets its own one-hot embedding direction; every other
    token shares direction 0. The final RMSNorm only rescales (weight set to
    its identity value), so the lm_head sees ``sqrt(hidden) * e_k`` and its
    row for the wanted next token is the only one with a non-zero entry in
    column ``k``: that logit is ``10 * sqrt(hidden)``, every other logit 0.

    Args:
        tensors: The state dict, modified in place.
        layout: Where the relevant tensors are.
        transitions: Token id -> the id greedy decoding must emit after it.
        default_next: The id emitted after any other token.

    Raises:
        ValueError: If the hidden size is too small for the chain.
    """
    import torch

    embed = tensors[layout.embed]
    vocab, hidden = embed.shape
    if len(transitions) + 1 > hidden:
        raise ValueError(f"hidden size {hidden} too small for {len(transitions)} transitions")
    new_embed = torch.zeros(vocab, hidden)
    new_embed[:, 0] = 1.0
    new_head = torch.zeros(vocab, hidden)
    new_head[default_next, 0] = _SCRIPT_LOGIT
    for direction, (source, target) in enumerate(sorted(transitions.items()), start=1):
        new_embed[source] = 0.0
        new_embed[source, direction] = 1.0
        new_head[target, direction] = _SCRIPT_LOGIT
    tensors[layout.embed] = new_embed
    tensors[layout.lm_head] = new_head
    tensors[layout.final_norm] = torch.full_like(
        tensors[layout.final_norm], layout.final_norm_identity
    )
    zeroed = 0
    for name, tensor in tensors.items():
        if name.startswith(layout.layers_prefix) and name.endswith(layout.residual_writers):
            tensors[name] = torch.zeros_like(tensor)
            zeroed += 1
    if zeroed == 0:
        raise ValueError("no residual writer found: the weight layout is out of date")


def safetensors_bytes(tensors: dict[str, Any]) -> bytes:
    """Serialise a state dict the way ``save_pretrained`` does.

    Args:
        tensors: Name -> tensor.

    Returns:
        The ``model.safetensors`` content (``format: pt`` metadata, which
        Transformers requires).
    """
    from safetensors.torch import save

    return save(dict(sorted(tensors.items())), metadata={"format": "pt"})
