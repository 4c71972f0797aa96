r"""Tiny Qwen3.5 and SmolVLM checkpoints, built on the spot for tests.

Each checkpoint is a real Hugging Face repository layout (``config.json``,
``model.safetensors``, ``generation_config.json``, ``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``, processor configs) of
well under 2 MB that loads with Transformers (``AutoProcessor`` +
``AutoModelForImageTextToText``, no remote code) and with ``mlx_vlm.load``,
and generates from prompts with images. Nothing is downloaded: the
byte-level BPE tokenizer is trained from a fixed corpus and the weights come
from a fixed seed, so the bytes (and the fake Hub's hashes) are stable.

Chat templates honour ``enable_thinking`` the way Qwen3.5's does; always
pass it explicitly (MLX-VLM defaults it to False, Transformers' template
default is True):

* enabled: the generation prompt ends with ``<think>`` + ``"\n"``;
* disabled: it ends with ``<think>`` ``"\n\n"`` ``</think>`` ``"\n\n"``.

Qwen3.5's generation prompt is ``<|im_start|>assistant\n`` + the above,
SmolVLM's is ``Assistant: `` + the above.

The *scripted* variant answers every prompt the same way under greedy
decoding, in both engines. The next token depends only on the last one::

    "\n"       -> " a"          <think>  -> " a"
    " a"       -> " b"          " b"     -> </think>
    </think>   -> " answer"     " answer" -> end token
    any other token -> <think>

so after the generation prompt it emits

* thinking enabled (prompt ends in ``"\n"``): `` a``, `` b``, ``</think>``,
  `` answer``, end token;
* thinking disabled (prompt ends in ``"\n\n"``): ``<think>``, `` a``,
  `` b``, ``</think>``, `` answer``, end token;

where the end token is ``<|im_end|>`` (Qwen3.5) or ``<end_of_utterance>``
(SmolVLM). :func:`scripted_pieces` returns these sequences. Either way a
reasoning parser reports reasoning :data:`SCRIPTED_REASONING` and answer
:data:`SCRIPTED_ANSWER`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from comfy_llm_testworld._ckpt_tokenizer import (
    CHAIN_PIECES,
    QWEN_SPEC,
    SMOLVLM_SPEC,
    THINK_CLOSE,
    THINK_OPEN,
    TokenizerSpec,
    dump_json,
    tokenizer_files,
    train_tokenizer,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from comfy_llm_testworld._ckpt_configs import ArchConfigs
    from comfy_llm_testworld._ckpt_weights import WeightLayout

__all__ = [
    "CHECKPOINT_KINDS",
    "SCRIPTED_ANSWER",
    "SCRIPTED_REASONING",
    "CheckpointKind",
    "build_checkpoint_files",
    "end_token",
    "scripted_pieces",
    "scripted_text",
    "think_token_ids",
    "with_unopened_think",
    "write_checkpoint",
]

CheckpointKind = Literal["qwen3_5", "smolvlm"]

#: Every kind, in a stable order (handy for ``pytest.mark.parametrize``).
CHECKPOINT_KINDS: tuple[CheckpointKind, ...] = get_args(CheckpointKind)

#: Reasoning of the scripted variant, stripped, as a parser reports it.
SCRIPTED_REASONING = "a b"
#: Answer of the scripted variant, stripped, as a parser reports it.
SCRIPTED_ANSWER = "answer"


@dataclass(frozen=True)
class _Kind:
    """How to build one kind of checkpoint."""

    tokenizer: TokenizerSpec
    configs: Callable[[dict[str, int], int], ArchConfigs]
    layout: WeightLayout


def _kind(kind: str) -> _Kind:
    """Look up the builder of ``kind`` (importing the heavy parts lazily)."""
    from comfy_llm_testworld import _ckpt_configs as configs
    from comfy_llm_testworld import _ckpt_weights as weights

    kinds = {
        "qwen3_5": _Kind(QWEN_SPEC, configs.qwen3_5_configs, weights.QWEN3_5_LAYOUT),
        "smolvlm": _Kind(SMOLVLM_SPEC, configs.smolvlm_configs, weights.SMOLVLM_LAYOUT),
    }
    if kind not in kinds:
        raise ValueError(f"unknown checkpoint kind {kind!r}; expected one of {CHECKPOINT_KINDS}")
    return kinds[kind]


def end_token(kind: CheckpointKind) -> str:
    """The token that ends an assistant turn (generation stops on it).

    Args:
        kind: The checkpoint kind.

    Returns:
        ``<|im_end|>`` for Qwen3.5, ``<end_of_utterance>`` for SmolVLM.
    """
    return _kind(kind).tokenizer.end_token


def scripted_pieces(kind: CheckpointKind, *, enable_thinking: bool) -> tuple[str, ...]:
    """Tokens (as text) the scripted variant emits after the chat prompt.

    Args:
        kind: The checkpoint kind.
        enable_thinking: The ``enable_thinking`` passed to the chat template.

    Returns:
        One string per generated token, the end token last. With thinking
        enabled the prompt already opened ``<think>``, so it is not repeated.
    """
    chain = (*CHAIN_PIECES[:2], THINK_CLOSE, CHAIN_PIECES[2], end_token(kind))
    return chain if enable_thinking else (THINK_OPEN, *chain)


def scripted_text(kind: CheckpointKind, *, enable_thinking: bool) -> str:
    """The scripted completion decoded with ``skip_special_tokens=True``.

    ``<think>``/``</think>`` are not special tokens, so they stay; the end
    token is special and disappears.

    Args:
        kind: The checkpoint kind.
        enable_thinking: The ``enable_thinking`` passed to the chat template.

    Returns:
        ``" a b</think> answer"`` with thinking enabled,
        ``"<think> a b</think> answer"`` with thinking disabled.
    """
    return "".join(scripted_pieces(kind, enable_thinking=enable_thinking)[:-1])


@cache
def _tokenizer(kind: str) -> Any:
    """Train (once per process) the kind's tokenizer."""
    return train_tokenizer(_kind(kind).tokenizer)


@cache
def _random_tensors(kind: str) -> tuple[ArchConfigs, dict[str, Any]]:
    """Configs and seeded random weights of ``kind`` (once per process)."""
    from comfy_llm_testworld._ckpt_weights import random_state_dict

    spec = _kind(kind)
    tokenizer = _tokenizer(kind)
    ids = {token: tokenizer.token_to_id(token) for token in spec.tokenizer.specials}
    configs = spec.configs(ids, tokenizer.get_vocab_size(with_added_tokens=True))
    return configs, random_state_dict(configs.config)


@cache
def _build(kind: str, scripted: bool) -> tuple[tuple[str, bytes], ...]:
    """Build the files of one checkpoint; cached because training is slow."""
    from comfy_llm_testworld._ckpt_weights import apply_script, safetensors_bytes

    spec = _kind(kind)
    tokenizer = _tokenizer(kind)
    configs, random = _random_tensors(kind)
    tensors = dict(random)
    if scripted:

        def token_id(text: str) -> int:
            ids = tokenizer.encode(text, add_special_tokens=False).ids
            if len(ids) != 1:
                raise RuntimeError(f"{text!r} is not a single token: {ids}")
            return ids[0]

        think_open, a, b, think_close, answer = map(
            token_id, (THINK_OPEN, *CHAIN_PIECES[:2], THINK_CLOSE, CHAIN_PIECES[2])
        )
        transitions = {
            token_id("\n"): a,
            think_open: a,
            a: b,
            b: think_close,
            think_close: answer,
            answer: token_id(spec.tokenizer.end_token),
        }
        apply_script(tensors, spec.layout, transitions, default_next=think_open)
    files = {
        "config.json": dump_json(configs.config),
        "generation_config.json": dump_json(configs.generation_config),
        "model.safetensors": safetensors_bytes(tensors),
        **tokenizer_files(spec.tokenizer, tokenizer),
        **{name: dump_json(content) for name, content in configs.processor_files.items()},
    }
    return tuple(sorted(files.items()))


def build_checkpoint_files(kind: CheckpointKind, *, scripted: bool = False) -> dict[str, bytes]:
    """Build a tiny checkpoint in memory.

    The first call per process trains the tokenizer and instantiates the
    model through Transformers (needs torch, ~1 s per kind once torch is
    imported); later calls return the cached bytes. Output is identical
    across runs and machines with the same locked versions.

    Args:
        kind: ``"qwen3_5"`` or ``"smolvlm"``.
        scripted: Build the scripted variant (see the module docstring).

    Returns:
        Repository-relative path -> file content (a fresh dict per call).

    Raises:
        ValueError: If ``kind`` is unknown.
    """
    _kind(kind)
    return dict(_build(kind, bool(scripted)))


def write_checkpoint(kind: CheckpointKind, dest: Path, *, scripted: bool = False) -> Path:
    """Write a tiny checkpoint into ``dest`` (created if missing).

    Args:
        kind: ``"qwen3_5"`` or ``"smolvlm"``.
        dest: Target directory; existing files of the same names are replaced.
        scripted: Write the scripted variant.

    Returns:
        ``dest``, ready for ``from_pretrained(dest)`` or ``mlx_vlm.load(dest)``.
    """
    dest = Path(dest)
    for name, content in build_checkpoint_files(kind, scripted=scripted).items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return dest


def think_token_ids(files_or_path: Mapping[str, bytes] | Path | str) -> tuple[int, int]:
    """Ids of ``<think>`` and ``</think>`` in a checkpoint's tokenizer.

    Args:
        files_or_path: The mapping :func:`build_checkpoint_files` returned, or
            a checkpoint directory.

    Returns:
        ``(think_open_id, think_close_id)``.

    Raises:
        KeyError: If the tokenizer lacks either token.
    """
    if isinstance(files_or_path, Mapping):
        raw = files_or_path["tokenizer.json"]
    else:
        raw = (Path(files_or_path) / "tokenizer.json").read_bytes()
    added = {token["content"]: token["id"] for token in json.loads(raw)["added_tokens"]}
    return added[THINK_OPEN], added[THINK_CLOSE]


_OPENING_BRANCH = "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
"""The enabled branch of the Qwen3.5 template (``_ckpt_tokenizer.QWEN_CHAT_TEMPLATE``)."""


def with_unopened_think(files: Mapping[str, bytes]) -> dict[str, bytes]:
    r"""A qwen3_5 checkpoint whose template opens no think block with thinking on.

    As an instruct template that is not a thinking template (Qwen3-VL
    Instruct's): the generation prompt ends ``<|im_start|>assistant\n``, so the
    scripted variant emits `` a``, `` b``, ``</think>``, `` answer``, end token
    with the prompt not having opened the block (a parser still reads "a b"
    as reasoning once ``</think>`` arrives; cut before it, "a b" is the answer).

    Raises:
        ValueError: ``files`` is not a qwen3_5 checkpoint from :func:`build_checkpoint_files`.
    """
    template = files["chat_template.jinja"].decode("utf-8")
    if _OPENING_BRANCH not in template:
        raise ValueError("not a qwen3_5 checkpoint of build_checkpoint_files")
    changed = dict(files)
    changed["chat_template.jinja"] = template.replace(_OPENING_BRANCH, "{%- endif -%}").encode(
        "utf-8"
    )
    return changed
