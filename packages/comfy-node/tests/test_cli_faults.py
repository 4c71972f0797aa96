"""The real ``comfy-llm`` executable under hostile tokens, flaky networks and odd paths.

Each case runs the installed console script in a subprocess against the fake
Hub (loopback only), then reads everything the user could see: stdout,
stderr, and every file written under the storage root and HF_HOME.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from comfy_llm_testworld import FakeHub

from .conftest import GOOD_TOKEN, EchoingProxy

CLI = shutil.which("comfy-llm", path=os.path.dirname(sys.executable)) or "comfy-llm"
MODEL = "tiny/smolvlm"

# (token, substrings of it that must never be shown or written)
MALFORMED_TOKENS = {
    "newline": ("hf_SeCrEtZq9\nmore", ["SeCrEtZq9", "more"]),
    "header-injection": ("hf_SeCrEtZq9\r\nX-Evil: 1", ["SeCrEtZq9", "X-Evil"]),
    "non-ascii": ("hf_s\u00e9cretZq9", ["cretZq9", "\u00e9"]),
    "space": ("hf_SeCrEt Zq9tail", ["SeCrEt", "Zq9tail"]),
}
COMMANDS = {
    "resolve": ["resolve", MODEL],
    "stage": ["stage", MODEL],
    "run": ["run", "--model", MODEL, "--prompt", "hi", "--max-new-tokens", "2"],
}


@pytest.fixture
def cli_env(model_hub: FakeHub, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        env.pop(name, None)
    env["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"] = str(tmp_path / "storage")
    return env


def _cli(
    env: dict[str, str], *argv: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv, "--target", "local_cpu"],
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _written_bytes(*roots: Path) -> bytes:
    chunks = []
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            chunks.append(str(path).encode())
            if path.is_file() and not path.is_symlink():
                chunks.append(path.read_bytes())
    return b"\n".join(chunks)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error" in line.lower()]


CASES = [
    *((kind, "resolve", "HF_TOKEN") for kind in MALFORMED_TOKENS),
    *(
        (kind, command, "HF_TOKEN")
        for kind in ("header-injection", "non-ascii")
        for command in ("stage", "run")
    ),
    ("header-injection", "resolve", "HUGGING_FACE_HUB_TOKEN"),
]


@pytest.mark.parametrize(("kind", "command", "variable"), CASES)
def test_malformed_token_is_refused_and_never_shown_or_written(
    kind: str, command: str, variable: str, cli_env: dict[str, str], hf_env: FakeHub
) -> None:
    token, secret_parts = MALFORMED_TOKENS[kind]
    env = dict(cli_env, **{variable: token})
    done = _cli(env, *COMMANDS[command])
    assert done.returncode == 2, done.stderr  # fix the input
    assert done.stderr.splitlines()[-1].startswith("comfy-llm: error: ")
    assert _error_lines(done.stderr) == [done.stderr.splitlines()[-1]]
    assert variable in done.stderr and "malformed" in done.stderr
    written = _written_bytes(Path(env["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"]), Path(env["HF_HOME"]))
    for part in secret_parts:
        assert part not in done.stdout and part not in done.stderr
        assert part.encode() not in written
    assert hf_env.requests == []  # refused before any request


@pytest.fixture
def echoing_env(cli_env: dict[str, str], echoing_proxy: EchoingProxy) -> dict[str, str]:
    return dict(cli_env, HF_ENDPOINT=echoing_proxy.endpoint, HF_TOKEN=GOOD_TOKEN)


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_token_inside_library_error_text_is_scrubbed(
    debug: bool, echoing_env: dict[str, str]
) -> None:
    done = _cli(echoing_env, "stage", MODEL, *(["--debug"] if debug else []))
    assert done.returncode != 0
    last = done.stderr.splitlines()[-1]
    # the error line is composed from the answer's status, not from the library's text
    assert last.startswith("comfy-llm: error: ") and "HTTP 400" in last
    assert GOOD_TOKEN not in done.stdout + done.stderr
    if debug:  # the traceback, with the library's error as the cause, is shown scrubbed
        assert "Traceback" in done.stderr and "[REDACTED]" in done.stderr
    written = _written_bytes(
        Path(echoing_env["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"]), Path(echoing_env["HF_HOME"])
    )
    assert GOOD_TOKEN.encode() not in written


CHATTER = ("Trying to resume", "Error while downloading", "Retrying", "HTTP Request")


@pytest.mark.parametrize("where", ["quiet", "debug-before", "debug-after"], ids=lambda where: where)
def test_retry_chatter_stays_off_stderr_unless_debug(
    where: str, cli_env: dict[str, str], hf_env: FakeHub
) -> None:
    hf_env.inject_fault("GET", "model.safetensors", cut_after_bytes=100, times=50)
    argv = ["stage", MODEL]
    if where == "debug-before":
        argv = ["--debug", *argv]
    elif where == "debug-after":
        argv = [*argv, "--debug"]
    done = _cli(cli_env, *argv)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("comfy-llm: error: ") and MODEL in lines[-1]
    chatter = [line for line in lines if any(word in line for word in CHATTER)]
    if where == "quiet":
        assert chatter == []
        assert [line for line in lines if not line.startswith("[")] == [lines[-1]]
    else:
        assert chatter  # the library's own account is there with --debug
        assert "Traceback" in done.stderr


def test_seed_out_of_range_is_refused_before_any_model_work(
    cli_env: dict[str, str], hf_env: FakeHub
) -> None:
    done = _cli(cli_env, *COMMANDS["run"], "--seed", "1208925819614629174706176")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.splitlines()[-1]]  # no progress at all
    assert "seed" in done.stderr and "18446744073709551615" in done.stderr
    assert "Overflow" not in done.stderr
    assert hf_env.requests == []


def test_seed_minus_one_is_not_a_seed_and_says_the_range(
    cli_env: dict[str, str], hf_env: FakeHub
) -> None:
    # decided: -1 is refused (no "random" sentinel); leaving --seed out is the unseeded run
    done = _cli(cli_env, *COMMANDS["run"], "--seed", "-1")
    assert done.returncode == 2, done.stderr
    line = done.stderr.splitlines()[-1]
    assert line == (
        "comfy-llm: error: --seed must be a whole number from 0 to 18446744073709551615, or "
        "leave --seed out for an unseeded (random) run; got -1, and a negative number is not "
        "a seed (-1 does not mean random here)."
    )
    assert hf_env.requests == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--max-new-tokens", "0"], "--max-new-tokens must be a whole number >= 1, got 0."),
        (["--top-p", "0"], "--top-p must be greater than 0 and at most 1, got 0.0."),
        (
            ["--prompt", " "],
            "give a non-empty --prompt or an input (--image, --video, --file)",
        ),
    ],
    ids=["max-new-tokens", "top-p", "empty-prompt"],
)
def test_cli_errors_use_the_cli_flag_names(
    cli_env: dict[str, str], argv: list[str], expected: str
) -> None:
    done = _cli(cli_env, *COMMANDS["run"], *argv)
    assert done.returncode == 2, done.stderr
    line = done.stderr.splitlines()[-1]
    assert expected in line, line
    for widget in ("max_new_tokens", "top_p", "connect an input", "type a prompt"):
        assert widget not in line, line


PATH_CASES = [
    ("--file", "fifo"),
    ("--file", "directory"),
    ("--file", "stdin"),
    ("--image", "fifo"),
    ("--image", "stdin"),
    ("--video", "directory"),
]


@pytest.mark.parametrize(("flag", "kind"), PATH_CASES)
def test_non_regular_input_paths_say_what_they_are(
    flag: str, kind: str, cli_env: dict[str, str], hf_env: FakeHub, tmp_path: Path
) -> None:
    stdin: int | None = subprocess.DEVNULL
    if kind == "fifo":
        path = tmp_path / "pipe.txt"
        os.mkfifo(path)  # nobody ever writes to it: reading it would hang
        expected = "named pipe (FIFO)"
    elif kind == "directory":
        path = tmp_path / "folder.txt"
        path.mkdir()
        expected = "is a directory"
    else:
        path = Path("/dev/stdin")
        stdin = subprocess.PIPE  # stdin is a pipe that stays open and empty
        expected = "is standard input"
    done = _cli(cli_env, *COMMANDS["run"], flag, str(path), stdin=stdin)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.splitlines()[-1]]
    assert done.stderr.startswith(f"comfy-llm: error: {flag} ")
    assert expected in done.stderr and "was not found" not in done.stderr
    assert hf_env.requests == []  # refused before resolving anything


def test_exit_codes_follow_the_error_action() -> None:
    from comfy_llm._cli._main import EXIT_CODES, _exit_code
    from comfy_llm_core import ComfyLLMError, ErrorAction

    class Transient(ComfyLLMError):
        action = ErrorAction.RETRY

    class BadInput(ComfyLLMError):
        action = ErrorAction.FIX_INPUT

    assert _exit_code(Transient("x")) == EXIT_CODES[ErrorAction.RETRY] == 75
    assert _exit_code(BadInput("x")) == EXIT_CODES[ErrorAction.FIX_INPUT] == 2
    assert _exit_code(ComfyLLMError("x")) == 1
    assert _exit_code(RuntimeError("x")) == 1
    help_text = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert "75" in help_text.stdout and "exit codes" in help_text.stdout


def test_a_full_disk_exits_74_not_fix_the_input(tmp_path: Path) -> None:
    # decided: a full disk is neither "fix the input" (2) nor "just retry" (75):
    # free space there, then run again (sysexits EX_IOERR)
    from comfy_llm._cli._main import _exit_code
    from comfy_llm_core import DiskFullError
    from comfy_llm_staging import InsufficientDiskSpaceError

    assert _exit_code(DiskFullError(str(tmp_path / "m.json"), 0)) == 74
    assert _exit_code(InsufficientDiskSpaceError(str(tmp_path), 10, 0, margin_bytes=5)) == 74
    help_text = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert "74 the disk is full" in " ".join(help_text.stdout.split())


@pytest.mark.parametrize("inodes_left", [0, 1000])
def test_a_full_disk_under_the_hub_facts_cache_exits_74_with_the_disk_full_words(
    model_hub: FakeHub,
    storage: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    inodes_left: int,
) -> None:
    # profiles/pinned/<owner>/<model>/ is new: creating it is the first write that finds
    # the disk full (os.mkdir raises ENOSPC for bytes and inodes alike, as the kernel does)
    import errno

    from comfy_llm._cli._main import main

    real_mkdir = os.mkdir

    def full_disk_mkdir(path: object, *args: object, **kwargs: object) -> None:
        if "pinned" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    real_statvfs = os.statvfs

    def statvfs(path: object) -> object:
        found = real_statvfs(path)  # type: ignore[arg-type]
        return os.statvfs_result((*found[:7], inodes_left, *found[8:]))  # f_favail

    monkeypatch.setattr(os, "mkdir", full_disk_mkdir)
    monkeypatch.setattr(os, "statvfs", statvfs)
    code = main(["resolve", MODEL, "--target", "local_cpu"])
    error = capsys.readouterr().err
    assert code == 74, error
    assert "[Errno" not in error and "No space left" not in error, error
    assert "The disk holding" in error and "the Hub facts cache" in error, error
    assert ("ran out of inodes" in error) == (inodes_left == 0), error
