"""Tiny random-weight checkpoints of the vision families under review, built offline.

One builder per family (Qwen2-VL, Qwen2.5-VL, Gemma 3, LLaVA-1.5, JoyCaption's
LLaVA with a Llama 3.1 template, LLaVA-NeXT, Llama 3.2 Vision, InternVL 3,
Mistral 3, Phi-4-multimodal, GLM-4.1V, LFM2-VL, Florence-2): each writes a
real Hugging Face repository layout (``config.json``, ``model.safetensors``
under the names ``save_pretrained`` writes, ``generation_config.json``, a
trained tokenizer, the family's chat template and processor files) that loads
through ``AutoProcessor`` and the family's auto model class with no remote
code, so the engines see what they would see in the real repository, only
64 wide. Nothing is downloaded; weights come from a fixed seed, so the bytes
and the fake Hub's hashes are stable.

:data:`FAMILIES` says, per family, which engines run it at the pinned versions
(``""``) and why not otherwise; :func:`family_spec` gives the rest (the image
marker the chat template writes, the generation prompt, thinking).

GLM-4.1V also has a *scripted* variant, as ``checkpoints`` builds for
Qwen3.5: greedy decoding emits `` a``, `` b``, ``</think>``, `` answer`` and
the end token whatever the prompt, so the reasoning split can be checked.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comfy_llm_testworld._fam_base import FamilySpec

__all__ = [
    "FAMILY_KINDS",
    "build_family_files",
    "family_spec",
    "write_family_checkpoint",
]

#: Every family builder, in a stable order (handy for ``pytest.mark.parametrize``).
FAMILY_KINDS: tuple[str, ...] = (
    "qwen2_vl",
    "qwen2_5_vl",
    "gemma3",
    "llava",
    "llava_joycaption",
    "llava_next",
    "mllama",
    "internvl",
    "mistral3",
    "phi4_multimodal",
    "glm4v",
    "lfm2_vl",
    "florence2",
)


def _specs() -> dict[str, FamilySpec]:
    from comfy_llm_testworld import _fam_gemma, _fam_glm, _fam_llava, _fam_misc, _fam_qwen

    specs = (
        _fam_qwen.QWEN2_VL,
        _fam_qwen.QWEN2_5_VL,
        _fam_gemma.GEMMA3,
        _fam_llava.LLAVA,
        _fam_llava.LLAVA_JOYCAPTION,
        _fam_llava.LLAVA_NEXT,
        _fam_llava.MLLAMA,
        _fam_qwen.INTERNVL,
        _fam_llava.MISTRAL3,
        _fam_misc.PHI4_MULTIMODAL,
        _fam_glm.GLM4V,
        _fam_misc.LFM2_VL,
        _fam_misc.FLORENCE2,
    )
    return {spec.kind: spec for spec in specs}


def family_spec(kind: str) -> FamilySpec:
    """The description of family builder ``kind``.

    Raises:
        ValueError: ``kind`` is not one of :data:`FAMILY_KINDS`.
    """
    specs = _specs()
    if kind not in specs:
        raise ValueError(f"unknown family kind {kind!r}; expected one of {FAMILY_KINDS}")
    return specs[kind]


@cache
def _tokenizer(kind: str) -> Any:
    from comfy_llm_testworld._ckpt_tokenizer import train_tokenizer

    return train_tokenizer(family_spec(kind).tokenizer)


@cache
def _build(kind: str, scripted: bool) -> tuple[tuple[str, bytes], ...]:
    from comfy_llm_testworld._ckpt_tokenizer import dump_json, tokenizer_files
    from comfy_llm_testworld._ckpt_weights import random_state_dict, safetensors_bytes

    spec = family_spec(kind)
    if scripted and spec.layout is None:
        raise ValueError(f"family {kind!r} has no scripted variant (only thinking families do)")
    tokenizer = _tokenizer(kind)
    # every bracketed token: the added specials and a SentencePiece vocabulary's leading ones
    ids = {
        token: index
        for token, index in tokenizer.get_vocab(with_added_tokens=True).items()
        if token[:1] in "<[" and len(token) > 2
    }
    configs = spec.configs(ids, tokenizer.get_vocab_size(with_added_tokens=True))
    tensors = _renamed(random_state_dict(configs.config, spec.auto_class, as_saved=True), spec)
    if scripted:
        _script(tensors, spec, tokenizer)
    files = {
        "config.json": dump_json(configs.config),
        "generation_config.json": dump_json(configs.generation_config),
        "model.safetensors": safetensors_bytes(tensors),
        **tokenizer_files(spec.tokenizer, tokenizer),
        **{name: dump_json(content) for name, content in configs.processor_files.items()},
    }
    if not spec.template_file:
        del files["chat_template.jinja"]
    elif spec.template_file == "chat_template.json":
        template = files.pop("chat_template.jinja").decode("utf-8")
        files["chat_template.json"] = dump_json({"chat_template": template})
    return tuple(sorted(files.items()))


def _renamed(tensors: dict[str, Any], spec: FamilySpec) -> dict[str, Any]:
    """Apply the family's ``renames`` to the saved names."""
    import re

    renamed = {}
    for saved, tensor in tensors.items():
        name = saved
        for pattern, replacement in spec.renames:
            name = re.sub(pattern, replacement, name)
        renamed[name] = tensor
    return dict(sorted(renamed.items()))


def _script(tensors: dict[str, Any], spec: FamilySpec, tokenizer: Any) -> None:
    """The scripted chain of ``checkpoints`` (see its module docstring)."""
    from comfy_llm_testworld._ckpt_tokenizer import CHAIN_PIECES, THINK_CLOSE, THINK_OPEN
    from comfy_llm_testworld._ckpt_weights import apply_script

    def token_id(text: str) -> int:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) != 1:
            raise RuntimeError(f"{text!r} is not a single token: {ids}")
        return int(ids[0])

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
    assert spec.layout is not None
    apply_script(tensors, spec.layout, transitions, default_next=think_open)


def build_family_files(kind: str, *, scripted: bool = False) -> dict[str, bytes]:
    """Build a family's tiny checkpoint in memory (cached per process).

    Args:
        kind: One of :data:`FAMILY_KINDS`.
        scripted: The scripted variant (thinking families only).

    Returns:
        Repository-relative path -> file content (a fresh dict per call).

    Raises:
        ValueError: ``kind`` is unknown, or has no scripted variant.
    """
    family_spec(kind)
    return dict(_build(kind, bool(scripted)))


def write_family_checkpoint(kind: str, dest: Path, *, scripted: bool = False) -> Path:
    """Write a family's tiny checkpoint into ``dest`` (created if missing).

    Returns:
        ``dest``, ready for ``from_pretrained``, ``mlx_vlm.load`` or vLLM.
    """
    dest = Path(dest)
    for name, content in build_family_files(kind, scripted=scripted).items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return dest


def rendered_template(kind: str) -> str:
    """The chat template the builder writes for ``kind`` (for placement checks)."""
    files = build_family_files(kind)
    if "chat_template.json" in files:
        return str(json.loads(files["chat_template.json"])["chat_template"])
    return files["chat_template.jinja"].decode("utf-8")
