"""The one rule for file names that come from the Hub."""

from __future__ import annotations

import pytest
from comfy_llm_core import hub_path_problem, quote_untrusted


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../../../../victim/evil.safetensors", "'..'"),
        ("weights/../../evil.safetensors", "'..'"),
        ("..", "'..'"),
        ("/etc/passwd", "absolute"),
        ("//server/share/x.safetensors", "absolute"),
        ("..\\..\\evil.safetensors", "backslash"),
        ("weights\\evil.safetensors", "backslash"),
        ("evil\x00.safetensors", "NUL"),
        ("evil\n.json", "control"),
        ("evil\x7f.json", "control"),
        ("C:/Users/me/evil.safetensors", "colon"),
        ("C:evil.safetensors", "colon"),
        ("model.safetensors:stream", "colon"),
        ("./model.safetensors", "'.'"),
        ("weights//model.safetensors", "empty"),
        ("weights/", "empty"),
        ("", "empty"),
        ("a" * 256, "byte limit"),
        ("é" * 128, "byte limit"),
        ("a/" * 40 + "x", "components"),
        ("a" * 1025, "characters"),
        ("\ud800.json", "surrogate"),
        (None, "not a string"),
        (5, "not a string"),
    ],
)
def test_unsafe_names_are_refused(path: object, problem: str) -> None:
    found = hub_path_problem(path)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize(
    "path",
    [
        "config.json",
        "model-00001-of-00002.safetensors",
        "text_encoder/model.safetensors",
        ".gitattributes",
        "a..b.json",
        "weights/..hidden.safetensors",
        "é" * 125 + ".json",
    ],
)
def test_ordinary_names_pass(path: str) -> None:
    assert hub_path_problem(path) is None


def test_quote_untrusted_escapes_and_bounds() -> None:
    quoted = quote_untrusted("evil\x00\n" + "x" * 500)
    assert "\x00" not in quoted and "\n" not in quoted
    assert "\\x00" in quoted
    assert len(quoted) < 140
