r"""Byte-level BPE tokenizers and chat templates for the tiny checkpoints.

The tokenizer is trained on the spot from a small, fixed corpus so that no
tokenizer file has to be downloaded or committed. The corpus is chosen so
that every piece the scripted variant emits (`` a``, `` b``, `` answer``)
and the blank line of the chat templates (``"\n\n"``) become single
tokens: the scripted weights map one token to the next, so a piece that
split into several tokens (or shared a token with another piece) would
break the chain.

Training is deterministic for a fixed corpus and vocabulary size, so the
serialised ``tokenizer.json`` (and with it the content hashes the fake Hub
serves) is stable across runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Target size of the trained vocabulary, before added tokens. Small keeps
#: the embedding matrices (vocab x hidden) tiny; 256 of these are the bytes.
TRAINED_VOCAB_SIZE = 384

#: The reasoning delimiters: single added tokens, deliberately *not* special,
#: so decoding with ``skip_special_tokens=True`` keeps them (as the real
#: Qwen3 tokenizers do) and a parser can look their ids up in the vocabulary.
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

#: Text pieces of the scripted chain between the think tags.
CHAIN_PIECES = (" a", " b", " answer")

# Qwen's pre-tokenizer regex (as Qwen3_5Tokenizer rebuilds it on load):
# Transformers re-creates the Qwen3.5 pipeline from vocab + merges, so the
# tokenizer must be trained with the very same pre-tokenization to agree.
_QWEN_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"""
    r""" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

_QWEN_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Idefics3/SmolVLM: the image expansion uses <fake_token_around_image>,
# <global-img>, <image> and, when images are split into tiles,
# <row_R_col_C>; <video> is the placeholder its video template writes.
_SMOLVLM_GRID = 4
_SMOLVLM_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<global-img>",
    "<image>",
    "<video>",
    *(
        f"<row_{row}_col_{col}>"
        for row in range(1, _SMOLVLM_GRID + 1)
        for col in range(1, _SMOLVLM_GRID + 1)
    ),
)

# Qwen3.5-style template. With thinking enabled (the default, as in the real
# Qwen3.5 template) the generation prompt opens the think block; with
# thinking disabled it writes an empty, closed one.
QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

# SmolVLM's own template (role capitalised, "User:<image>text") extended with
# the same think-block convention as the Qwen one, so that both kinds end
# their generation prompt on the same tokens.
SMOLVLM_CHAT_TEMPLATE = (
    "<|im_start|>"
    "{%- for message in messages -%}"
    "{{- message['role'] | capitalize -}}"
    "{%- if message['content'] is string -%}{{- ': ' + message['content'] -}}"
    "{%- else -%}"
    "{%- if message['content'][0]['type'] == 'image' -%}{{- ':' -}}"
    "{%- else -%}{{- ': ' -}}{%- endif -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- elif part['type'] == 'image' -%}{{- '<image>' -}}"
    "{%- elif part['type'] == 'video' -%}{{- '<video>' -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<end_of_utterance>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- 'Assistant:' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- ' <think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}{{- ' <think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class TokenizerSpec:
    """What differs between the two tokenizers.

    Attributes:
        specials: Special added tokens, in id order after the trained vocab.
        qwen_pretokenizer: Use Qwen's regex split + NFC (else GPT-2 style).
        end_token: The token a chat turn ends with (generation stops there).
        chat_template: The Jinja chat template.
        tokenizer_config: ``tokenizer_config.json`` content, shaped like the
            real checkpoints' (Transformers picks the tokenizer class from
            the model type for both kinds, so the declared class is cosmetic).
        metaspace: Train a SentencePiece-style BPE instead (spaces become
            ``▁``, byte fallback, no pre-tokenizer): what ``GemmaTokenizer``
            rebuilds from vocab + merges on load, so a byte-level vocabulary
            would not survive it.
        adds_bos: Encoding with special tokens prepends ``bos_token`` (a
            ``TemplateProcessing`` post-processor in ``tokenizer.json``), as
            the real Llama 3.x (JoyCaption, Llama 3.2 Vision), LLaVA and
            Mistral 3 tokenizers do; their templates write it as well, which
            is how an engine ends up with two.
    """

    specials: tuple[str, ...]
    qwen_pretokenizer: bool
    end_token: str
    chat_template: str
    tokenizer_config: dict[str, object] = field(default_factory=dict)
    metaspace: bool = False
    adds_bos: bool = False


QWEN_SPEC = TokenizerSpec(
    specials=_QWEN_SPECIALS,
    qwen_pretokenizer=True,
    end_token="<|im_end|>",
    chat_template=QWEN_CHAT_TEMPLATE,
    tokenizer_config={
        "tokenizer_class": "Qwen2Tokenizer",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "model_max_length": 4096,
        "split_special_tokens": False,
        "add_prefix_space": False,
    },
)
SMOLVLM_SPEC = TokenizerSpec(
    specials=_SMOLVLM_SPECIALS,
    qwen_pretokenizer=False,
    end_token="<end_of_utterance>",
    chat_template=SMOLVLM_CHAT_TEMPLATE,
    tokenizer_config={
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": "<|im_start|>",
        "eos_token": "<end_of_utterance>",
        "pad_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "model_max_length": 4096,
        "add_prefix_space": False,
        "extra_special_tokens": {
            "fake_image_token": "<fake_token_around_image>",
            "image_token": "<image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    },
)


def _corpus() -> list[str]:
    """A fixed English-ish corpus covering the template words and chain pieces.

    Why: BPE merges follow pair frequencies, so repeating the pieces that
    must be single tokens guarantees they are learned early.
    """
    words = (
        "the image shows a small red square on a blue field and the video has "
        "three frames one two three four five six seven eight nine ten seconds "
        "describe what you see in this picture please answer briefly user "
        "assistant system Assistant User System think thinking reasoning "
        "You are provided the following series of frames from a video Frame from"
    )
    lines = [words, words, words.upper(), "0123456789 00:00 00:01 00:02 0:00:03"]
    for _ in range(40):
        lines.append(" a b answer a b answer\n\n")
        lines.append("user\nassistant\nAssistant: User: System:\n\n")
    return lines


def train_tokenizer(spec: TokenizerSpec) -> Any:
    """Train the byte-level BPE tokenizer and add the special/think tokens.

    Args:
        spec: Which kind's special tokens and pre-tokenizer to use.

    Returns:
        A ``tokenizers.Tokenizer`` ready to be serialised.

    Raises:
        RuntimeError: If a chain piece did not become a single token.
    """
    from tokenizers import AddedToken

    tokenizer = _metaspace_tokenizer(spec) if spec.metaspace else _byte_level_tokenizer(spec)
    tokenizer.add_special_tokens(
        [AddedToken(tok, special=True, normalized=False) for tok in spec.specials]
    )
    tokenizer.add_tokens(
        [AddedToken(tok, special=False, normalized=False) for tok in (THINK_OPEN, THINK_CLOSE)]
    )
    for piece in (*CHAIN_PIECES, "\n", "\n\n"):
        ids = tokenizer.encode(piece, add_special_tokens=False).ids
        if len(ids) != 1:
            raise RuntimeError(f"piece {piece!r} is not a single token: {ids}")
    if spec.adds_bos:
        _prepend_bos(tokenizer, str(spec.tokenizer_config["bos_token"]))
    return tokenizer


def _prepend_bos(tokenizer: Any, bos: str) -> None:
    """The post-processor the real Llama 3 / LLaVA tokenizer.json files carry."""
    from tokenizers import processors

    bos_id = tokenizer.token_to_id(bos)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B:1", special_tokens=[(bos, bos_id)]
    )


def _byte_level_tokenizer(spec: TokenizerSpec) -> Any:
    """GPT-2 / Qwen byte-level BPE, trained (specials not yet added)."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tokenizer = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    if spec.qwen_pretokenizer:
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=TRAINED_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    return tokenizer


#: The byte-fallback pieces a SentencePiece-style vocabulary starts with.
_BYTE_PIECES = tuple(f"<0x{value:02X}>" for value in range(256))


def _metaspace_tokenizer(spec: TokenizerSpec) -> Any:
    """SentencePiece-style BPE as GemmaTokenizer rebuilds it (specials not yet added).

    Its first ids are the specials the class defaults name (``<pad>``,
    ``<eos>``, ``<bos>``, ``<unk>``), then the 256 byte pieces, then the
    trained merges, as in the real Gemma vocabularies.
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tokenizer = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    # Trained word by word (as SentencePiece never merges across a "▁"), then
    # given GemmaTokenizer's own pipeline: the merges are the same either way.
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    leading = ("<pad>", "<eos>", "<bos>", "<unk>", *_BYTE_PIECES)
    trainer = BpeTrainer(
        vocab_size=TRAINED_VOCAB_SIZE + len(leading),
        min_frequency=2,
        show_progress=False,
        special_tokens=list(leading),
    )
    # runs of 3 and 4 newlines are single tokens in Gemma's vocabulary, and vLLM's Gemma 3
    # processor looks them up (vllm/model_executor/models/gemma3_mm.py:343-352)
    newlines = ["\n\n\n", "\n\n\n\n"] * 40
    tokenizer.train_from_iterator([*_corpus(), *newlines], trainer=trainer)
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(
        pattern=" ", behavior="merged_with_previous", invert=False
    )
    return tokenizer


def tokenizer_files(spec: TokenizerSpec, tokenizer: Any) -> dict[str, bytes]:
    """Serialise the tokenizer, its config and the chat template.

    The chat template goes to ``chat_template.jinja`` only (the current Hub
    layout): both Transformers and MLX-VLM read it from there, and a second
    copy inside ``tokenizer_config.json`` could drift from it.

    Args:
        spec: The kind's tokenizer description.
        tokenizer: The trained ``tokenizers.Tokenizer``.

    Returns:
        Repository-relative file name -> content.
    """
    return {
        "tokenizer.json": tokenizer.to_str(pretty=True).encode("utf-8"),
        "tokenizer_config.json": dump_json(spec.tokenizer_config),
        "chat_template.jinja": spec.chat_template.encode("utf-8"),
    }


def dump_json(data: object) -> bytes:
    """Serialise JSON the same way every time (sorted keys, fixed indent).

    Why: the fake Hub serves content hashes; they must not change between
    runs or machines.
    """
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
