from __future__ import annotations

import pytest
from comfy_llm_profiles import ProfileError, load_curated_registry, parse_reference
from comfy_llm_profiles._reference import ModelReference
from comfy_llm_profiles.errors import InvalidModelReferenceError

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("text", "repository", "revision"),
    [
        ("HuggingFaceTB/SmolVLM-256M-Instruct", "HuggingFaceTB/SmolVLM-256M-Instruct", None),
        ("mlx-community/Qwen3.5-2B-4bit", "mlx-community/Qwen3.5-2B-4bit", None),
        ("owner/model@main", "owner/model", "main"),
        ("owner/model@v1.0", "owner/model", "v1.0"),
        ("owner/model@refs/pr/1", "owner/model", "refs/pr/1"),
        (f"owner/model@{COMMIT}", "owner/model", COMMIT),
        ("a/b", "a/b", None),
        ("o_w/m_", "o_w/m_", None),
        ("x" * 96 + "/" + "y" * 96, "x" * 96 + "/" + "y" * 96, None),
    ],
)
def test_accepts_hub_references(text: str, repository: str, revision: str | None) -> None:
    ref = parse_reference(text)
    assert ref == ModelReference(repository=repository, revision=revision)
    assert not ref.is_curated
    assert ref.is_pinned == (revision == COMMIT)
    assert str(ref) == text


@pytest.mark.parametrize(
    ("text", "repository", "revision", "quantization"),
    [
        (
            "ggml-org/SmolVLM-256M-Instruct-GGUF:Q8_0",
            "ggml-org/SmolVLM-256M-Instruct-GGUF",
            None,
            "Q8_0",
        ),
        (
            "unsloth/Qwen3-VL-8B-GGUF@main:UD-Q4_K_XL",
            "unsloth/Qwen3-VL-8B-GGUF",
            "main",
            "UD-Q4_K_XL",
        ),
        (f"o/m-GGUF@{COMMIT}:q4_k_m", "o/m-GGUF", COMMIT, "q4_k_m"),
        ("o/m-GGUF", "o/m-GGUF", None, None),
    ],
)
def test_a_gguf_quantization_follows_a_colon(
    text: str, repository: str, revision: str | None, quantization: str | None
) -> None:
    ref = parse_reference(text)
    assert ref == ModelReference(repository, revision, quantization=quantization)
    assert str(ref) == text


@pytest.mark.parametrize(
    ("pasted", "reference"),
    [
        ("https://huggingface.co/Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-2B-Instruct"),
        ("https://huggingface.co/Qwen/Qwen3-VL-2B-Instruct/", "Qwen/Qwen3-VL-2B-Instruct"),
        ("https://huggingface.co/Qwen/Qwen3-VL-2B-Instruct//", "Qwen/Qwen3-VL-2B-Instruct"),
        ("http://www.huggingface.co/owner/model", "owner/model"),
        ("huggingface.co/owner/model", "owner/model"),
        ("https://hf.co/owner/model", "owner/model"),
        ("https://huggingface.co/owner/model/tree/main", "owner/model@main"),
        ("https://huggingface.co/owner/model/tree/main/", "owner/model@main"),
        (f"https://huggingface.co/owner/model/tree/{COMMIT}", f"owner/model@{COMMIT}"),
        ("https://huggingface.co/owner/model/tree/refs%2Fpr%2F1", "owner/model@refs/pr/1"),
        ("https://huggingface.co/owner/model?library=transformers", "owner/model"),
    ],
)
def test_a_pasted_model_page_address_is_read_as_its_reference(pasted: str, reference: str) -> None:
    assert str(parse_reference(pasted)) == reference
    assert parse_reference(pasted) == parse_reference(reference)


def test_accepts_curated_ids() -> None:
    for curated_id in load_curated_registry().ids:
        ref = parse_reference(curated_id)
        assert ref == ModelReference(repository=None, revision=None, curated_id=curated_id)
        assert ref.is_curated
        assert str(ref) == curated_id


def test_curated_ids_can_be_supplied() -> None:
    assert parse_reference("my-model", curated_ids=["my-model"]).curated_id == "my-model"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("http://127.0.0.1/owner/model", "URL"),
        ("hf://owner/model", "URL"),
        ("https://huggingface.co/datasets/owner/data", "URL"),
        ("https://huggingface.co/spaces/owner/app", "URL"),
        ("https://huggingface.co/owner/model/blob/main/config.json", "URL"),
        ("https://huggingface.co/owner/mo--del", "'--'"),
        ("./owner/model", "relative path"),
        ("~someone/model", "'~user'"),
        ("/models/LLM/../secrets", "'..' folder"),
        ("/models/LLM/a\nb", "control character"),
        ("models/LLM/./x", "'.' or padded part"),
        ("models/LLM/x/", "'.' or padded part"),
        ("models/L*M/x", "is not a folder name"),
        ("owner/../model", ".."),
        ("owner/model@../main", ".."),
        ("owner/model ", "whitespace"),
        (" owner/model", "whitespace"),
        ("owner /model", "whitespace"),
        ("owner/model@ma in", "whitespace"),
        ("owner/model\n", "whitespace"),
        ("owner/", "model name is empty"),
        ("owner/model@", "empty"),
        ("owner/model@a@b", "more than one '@'"),
        ("owner/mo/del", "more than one '/'"),
        ("x" * 97 + "/model", "97 characters"),
        ("owner/" + "m" * 97, "97 characters"),
        ("owner/model@" + "r" * 256, "256 characters"),
        ("own$er/model", "only letters"),
        ("owner/mo%del", "only letters"),
        ("owner/-model", "only letters"),
        ("owner/model-", "only letters"),
        ("owner/mo--del", "'--'"),
        ("owner/model@-branch", "may hold only"),
        ("owner/model@feature/", "may hold only"),
        ("owner/model@a//b", "may hold only"),
        ("owner/model@x.lock", "may hold only"),
        ("not-a-curated-id", "neither owner/model nor a known curated id"),
        ("UPPER", "neither owner/model"),
        ("smolvlm-256m-instruct@main", "already pinned"),
        ("owner/model-GGUF:", "the quantization '' after ':'"),
        ("owner/model-GGUF:Q4 K", "the quantization 'Q4 K'"),
        ("owner/model-GGUF:Q4/K", "the quantization 'Q4/K' after ':'"),
        ("owner/model-GGUF:-Q4", "the quantization '-Q4' after ':'"),
        ("owner/model-GGUF:" + "Q" * 33, "at most 32"),
        ("owner/model:a:b", "relative path"),
        ("smolvlm-256m-instruct:Q8_0", "relative path"),
    ],
)
def test_refuses_everything_else(text: str, reason: str) -> None:
    with pytest.raises(InvalidModelReferenceError) as caught:
        parse_reference(text)
    error = caught.value
    assert isinstance(error, ValueError)
    assert isinstance(error, ProfileError)
    assert error.value == text
    message = str(error)
    assert repr(text) in message
    assert reason in message
    # Every refusal shows the accepted forms.
    assert "owner/model@revision" in message
    assert "curated id" in message


def test_refuses_non_text() -> None:
    with pytest.raises(InvalidModelReferenceError, match="not text"):
        parse_reference(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "path", "folder", "name"),
    [
        ("/models/owner/model", "/models/owner/model", None, None),
        ("/model", "/model", None, None),
        ("~/models/Qwen3-VL 2B", "~/models/Qwen3-VL 2B", None, None),
        ("C:\\models\\x", "C:\\models\\x", None, None),
        ("models/LLM/Qwen3-VL-2B-Instruct", None, "LLM", "Qwen3-VL-2B-Instruct"),
        ("models/VLM/Qwen/Qwen3.5-2B", None, "VLM", "Qwen/Qwen3.5-2B"),
    ],
)
def test_local_folders_are_references(
    text: str, path: str | None, folder: str | None, name: str | None
) -> None:
    ref = parse_reference(text)
    assert ref.is_local and ref.repository is None and ref.curated_id is None
    assert (ref.local_path, ref.model_folder, ref.local_name) == (path, folder, name)
    assert str(ref) == text


def test_models_with_one_slash_is_still_a_hub_id() -> None:
    ref = parse_reference("models/LLM")
    assert ref.repository == "models/LLM" and not ref.is_local


@pytest.mark.parametrize(
    ("typed", "first"),
    [
        ("qwen 3.5", "qwen3.5-0.8b"),
        ("Qwen3.5-2B", "qwen3.5-2b"),
        ("smolvlm", "smolvlm-256m-instruct"),
    ],
)
def test_a_mistyped_curated_id_is_offered_the_closest_ids(typed: str, first: str) -> None:
    known = ["qwen3.5-0.8b", "qwen3.5-2b", "smolvlm-256m-instruct", "smolvlm2-2.2b-instruct"]
    with pytest.raises(InvalidModelReferenceError) as caught:
        parse_reference(typed, curated_ids=known)
    assert f"closest curated ids: {first}" in str(caught.value)
