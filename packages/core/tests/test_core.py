import pickle

import pytest
from comfy_llm_core import (
    REDACTED,
    ComfyLLMError,
    ErrorAction,
    InvalidSettingError,
    InvalidTokenError,
    check_token,
    env_choice,
    env_float,
    env_int,
    redact,
    render_error,
)


class _Custom(ComfyLLMError, ValueError):
    action = ErrorAction.FIX_INPUT

    def __init__(self, a: int, *, b: str) -> None:
        self.a = a
        self.b = b
        super().__init__(f"a={a} b={b}")


def test_subclass_with_own_arguments_round_trips_through_pickle() -> None:
    error = pickle.loads(pickle.dumps(_Custom(3, b="x")))
    assert isinstance(error, _Custom)
    assert str(error) == "a=3 b=x"
    assert (error.a, error.b, error.action) == (3, "x", ErrorAction.FIX_INPUT)


class _Memory(ComfyLLMError, MemoryError):
    def __init__(self, needed: int) -> None:
        self.needed = needed
        super().__init__(f"need {needed}")


class _Disk(ComfyLLMError, OSError):
    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"full: {path}")


@pytest.mark.parametrize("error", [_Memory(5), _Disk("/x")])
def test_builtin_layouts_round_trip(error: ComfyLLMError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_env_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_INT", " 7 ")
    assert env_int("X_INT", 1, minimum=0) == 7
    monkeypatch.setenv("X_INT", "7.5")
    with pytest.raises(InvalidSettingError, match=r"X_INT='7\.5'"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_FLOAT", "nan")
    with pytest.raises(InvalidSettingError, match="a number of at least 0"):
        env_float("X_FLOAT", 1.0, minimum=0)
    monkeypatch.setenv("X_FLOAT", "")
    assert env_float("X_FLOAT", 2.5) == 2.5
    monkeypatch.setenv("X_CHOICE", "EAGER")
    assert env_choice("X_CHOICE", "auto", {"auto", "eager"}) == "eager"
    monkeypatch.setenv("X_CHOICE", "fast")
    with pytest.raises(InvalidSettingError, match="one of auto, eager"):
        env_choice("X_CHOICE", "auto", {"auto", "eager"})


@pytest.mark.parametrize("token", ["hf_abc\ndef", "hf_abc\r\nX-Evil: 1", "hf_abcé", "hf_a b"])
def test_malformed_token_refused_without_echo(token: str) -> None:
    with pytest.raises(InvalidTokenError) as caught:
        check_token(token)
    assert "hf_abc" not in str(caught.value)
    assert "hf_a" not in str(caught.value).replace("'hf_'", "")


def test_render_error_scrubs_environment_token_in_every_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "hf_SECRETsecret\r\nX-Evil: 1"
    monkeypatch.setenv("HF_TOKEN", secret)
    error = ValueError(f"Illegal header value b'Bearer {secret!r}' / {secret}")
    text = render_error(error)
    assert "SECRETsecret" not in text
    assert REDACTED in text
    assert "\n" not in text


def test_redact_explicit_secret() -> None:
    assert redact("token=hf_explicit1 here", secrets=["hf_explicit1"]) == f"token={REDACTED} here"
