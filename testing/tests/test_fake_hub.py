"""The fake Hub against the real huggingface_hub client (always with endpoint=)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from comfy_llm_testworld import FakeHub, RecordedRequest
from huggingface_hub import (
    HfApi,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

WEIGHTS = bytes(range(256)) * 64  # 16 KiB, LFS by name
CONFIG = b'{"model_type": "tiny"}'
FILES = {
    "config.json": CONFIG,
    "model.safetensors": WEIGHTS,
    "tokenizer/vocab.json": b'{"a": 0}',
}
TOKEN = "hf_test_token"


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _http(hub: FakeHub, path: str, method: str = "GET", **headers: str):
    request = urllib.request.Request(hub.endpoint + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def test_model_info_reports_sizes_lfs_and_settings(fake_hub: FakeHub) -> None:
    sha = fake_hub.add_repo(
        "acme/tiny",
        FILES,
        card_data={"license": "mit"},
        security_findings=["model.safetensors"],
    )
    api = HfApi(endpoint=fake_hub.endpoint)

    info = api.model_info("acme/tiny", files_metadata=True)
    assert info.id == "acme/tiny"
    assert info.sha == sha and len(sha) == 40
    assert info.private is False and info.gated is False
    assert info.card_data is not None and info.card_data["license"] == "mit"
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert set(siblings) == set(FILES)
    weights = siblings["model.safetensors"]
    assert weights.size == len(WEIGHTS)
    assert weights.lfs is not None and weights.lfs.sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == _git_sha1(CONFIG)
    assert info.security_repo_status is None

    flagged = api.model_info("acme/tiny", securityStatus=True)
    assert flagged.security_repo_status == {
        "scansDone": True,
        "filesWithIssues": [{"path": "model.safetensors", "level": "unsafe"}],
    }


def test_snapshot_download_gets_every_file_at_the_pinned_commit(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    first = fake_hub.add_repo("acme/tiny", FILES)
    second = fake_hub.add_commit("acme/tiny", {**FILES, "config.json": b"{}"})
    fake_hub.add_tag("acme/tiny", "v1", first)
    assert fake_hub.head("acme/tiny") == second != first

    for revision, expected_config in (("main", b"{}"), ("v1", CONFIG), (first, CONFIG)):
        target = tmp_path / revision
        path = snapshot_download(
            "acme/tiny", revision=revision, local_dir=target, endpoint=fake_hub.endpoint
        )
        assert Path(path) == target
        assert (target / "config.json").read_bytes() == expected_config
        assert (target / "model.safetensors").read_bytes() == WEIGHTS
        assert (target / "tokenizer/vocab.json").read_bytes() == FILES["tokenizer/vocab.json"]

    info = HfApi(endpoint=fake_hub.endpoint).model_info("acme/tiny", revision="v1")
    assert info.sha == first
    # The files are fetched by commit sha, never by the moving branch name.
    assert {r.revision for r in fake_hub.requests if r.filename} == {first, second}


def test_hf_hub_download_fetches_only_the_requested_file(fake_hub: FakeHub, tmp_path: Path) -> None:
    sha = fake_hub.add_repo("acme/tiny", FILES)
    path = hf_hub_download(
        "acme/tiny", "config.json", cache_dir=tmp_path, endpoint=fake_hub.endpoint
    )
    assert Path(path).read_bytes() == CONFIG
    assert sha in path  # the cache is keyed by X-Repo-Commit
    assert fake_hub.file_requests() == ["config.json"]
    assert fake_hub.file_requests("HEAD") == ["config.json"]
    assert fake_hub.file_requests(repo_id="other/repo") == []


def test_lfs_head_headers_and_no_xet(fake_hub: FakeHub) -> None:
    sha = fake_hub.add_repo("acme/tiny", FILES)
    url = hf_hub_url("acme/tiny", "model.safetensors", endpoint=fake_hub.endpoint)
    meta = get_hf_file_metadata(url)
    assert meta.commit_hash == sha
    assert meta.etag == hashlib.sha256(WEIGHTS).hexdigest()
    assert meta.size == len(WEIGHTS)
    assert meta.xet_file_data is None

    status, headers, body = _http(fake_hub, "/acme/tiny/resolve/main/config.json", "HEAD")
    assert status == 200 and body == b""
    assert headers["ETag"] == f'"{_git_sha1(CONFIG)}"'
    assert headers["Content-Length"] == str(len(CONFIG))
    assert "X-Linked-Etag" not in headers
    assert not any(name.lower().startswith("x-xet") for name in headers)
    assert "xet" not in headers.get("Link", "")


def test_range_requests_are_answered_with_206(fake_hub: FakeHub) -> None:
    fake_hub.add_repo("acme/tiny", FILES)
    path = "/acme/tiny/resolve/main/model.safetensors"
    size = len(WEIGHTS)
    for header, start, stop in (
        ("bytes=100-", 100, size),
        ("bytes=10-19", 10, 20),
        ("bytes=-5", size - 5, size),
    ):
        status, headers, body = _http(fake_hub, path, Range=header)
        assert status == 206
        assert headers["Content-Range"] == f"bytes {start}-{stop - 1}/{size}"
        assert body == WEIGHTS[start:stop]
    status, headers, _ = _http(fake_hub, path, Range=f"bytes={size}-")
    assert status == 416 and headers["Content-Range"] == f"bytes */{size}"


def test_cut_connection_is_retried_and_the_file_is_identical(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    fake_hub.add_repo("acme/tiny", FILES)
    fake_hub.inject_fault(path_contains="model.safetensors", cut_after_bytes=1000)
    path = hf_hub_download(
        "acme/tiny", "model.safetensors", cache_dir=tmp_path, endpoint=fake_hub.endpoint
    )
    assert Path(path).read_bytes() == WEIGHTS
    assert fake_hub.pending_faults() == 0
    gets = [r for r in fake_hub.requests if r.method == "GET" and r.filename]
    assert [(r.status, r.bytes_sent) for r in gets] == [(200, 1000), (200, len(WEIGHTS))]


def test_cut_connection_after_a_full_chunk_resumes_with_a_range(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    chunk = 10 * 1024 * 1024  # huggingface_hub keeps only whole 10 MiB chunks
    weights = os.urandom(chunk + 4096)
    fake_hub.add_repo("acme/big", {"model.safetensors": weights})
    fake_hub.inject_fault(cut_after_bytes=chunk + 1000)
    path = snapshot_download("acme/big", local_dir=tmp_path, endpoint=fake_hub.endpoint)
    assert (Path(path) / "model.safetensors").read_bytes() == weights
    last = [r for r in fake_hub.requests if r.method == "GET" and r.filename][-1]
    assert last.headers["Range"] == f"bytes={chunk}-"
    assert (last.status, last.bytes_sent) == (206, 4096)


def test_injected_status_is_returned_and_recorded(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add_repo("acme/tiny", FILES)
    fake_hub.inject_fault(path_contains="config.json", status=500)
    with pytest.raises(HfHubHTTPError) as caught:
        hf_hub_download("acme/tiny", "config.json", cache_dir=tmp_path, endpoint=fake_hub.endpoint)
    assert caught.value.response.status_code == 500
    assert [(r.method, r.status) for r in fake_hub.requests] == [("HEAD", 200), ("GET", 500)]
    # The fault was used up: the next try succeeds.
    hf_hub_download("acme/tiny", "config.json", cache_dir=tmp_path, endpoint=fake_hub.endpoint)


@pytest.mark.parametrize(
    ("repo_id", "revision", "filename", "expected"),
    [
        ("acme/missing", "main", "config.json", RepositoryNotFoundError),
        ("acme/private", "main", "config.json", RepositoryNotFoundError),
        ("acme/tiny", "nope", "config.json", RevisionNotFoundError),
        ("acme/tiny", "main", "missing.json", RemoteEntryNotFoundError),
    ],
)
def test_errors_map_to_the_client_exceptions(
    fake_hub: FakeHub,
    tmp_path: Path,
    repo_id: str,
    revision: str,
    filename: str,
    expected: type[Exception],
) -> None:
    fake_hub.add_repo("acme/tiny", FILES)
    fake_hub.add_repo("acme/private", FILES, private=True)
    with pytest.raises(expected) as caught:
        hf_hub_download(
            repo_id, filename, revision=revision, cache_dir=tmp_path, endpoint=fake_hub.endpoint
        )
    assert not isinstance(caught.value, GatedRepoError)
    if expected is not RemoteEntryNotFoundError:  # model_info has no file to miss
        with pytest.raises(expected):
            HfApi(endpoint=fake_hub.endpoint).model_info(repo_id, revision=revision)


def test_private_repo_needs_a_valid_token(fake_hub: FakeHub) -> None:
    fake_hub.add_repo("acme/private", FILES, private=True)
    api = HfApi(endpoint=fake_hub.endpoint)
    assert api.model_info("acme/private", token=TOKEN).private is True
    assert _http(fake_hub, "/api/models/acme/private")[0] == 401
    status, headers, body = _http(
        fake_hub, "/api/models/acme/private", Authorization="Bearer hf_wrong"
    )
    assert (status, headers["X-Error-Code"]) == (404, "RepoNotFound")
    assert "error" in json.loads(body)


def test_gated_repo_without_wrong_and_with_token(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add_repo("acme/gated", FILES, gated="manual")
    api = HfApi(endpoint=fake_hub.endpoint)
    assert api.model_info("acme/gated").gated == "manual"  # metadata stays public

    for token, status in ((None, 401), ("hf_wrong", 403)):
        fake_hub.clear_requests()
        with pytest.raises(GatedRepoError):
            hf_hub_download(
                "acme/gated",
                "config.json",
                cache_dir=tmp_path,
                token=token or False,
                endpoint=fake_hub.endpoint,
            )
        assert fake_hub.requests[-1].status == status

    path = hf_hub_download(
        "acme/gated", "config.json", cache_dir=tmp_path, token=TOKEN, endpoint=fake_hub.endpoint
    )
    assert Path(path).read_bytes() == CONFIG
    assert fake_hub.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"


def test_tree_is_paginated_through_link_headers(fake_hub: FakeHub) -> None:
    files = {f"shards/part-{i}.json": b"%d" % i for i in range(5)}
    fake_hub.add_repo("acme/tiny", {**files, "config.json": CONFIG})
    fake_hub.tree_page_size = 2
    api = HfApi(endpoint=fake_hub.endpoint)

    entries = list(api.list_repo_tree("acme/tiny", recursive=True))
    assert [e.path for e in entries] == ["shards", "config.json", *sorted(files)]
    tree_requests = [r for r in fake_hub.requests if "/tree/" in r.path]
    assert len(tree_requests) == 4  # 7 entries, 2 per page
    assert [r.query.get("cursor") for r in tree_requests] == [None, ["2"], ["4"], ["6"]]

    top = [e.path for e in api.list_repo_tree("acme/tiny")]
    assert top == ["shards", "config.json"]
    assert len(list(api.list_repo_tree("acme/tiny", path_in_repo="shards"))) == 5
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree("acme/tiny", path_in_repo="nowhere"))


def test_request_log_records_method_path_query_headers(fake_hub: FakeHub) -> None:
    fake_hub.add_repo("acme/tiny", FILES)
    HfApi(endpoint=fake_hub.endpoint).model_info("acme/tiny", files_metadata=True, token=TOKEN)
    (request,) = fake_hub.requests
    assert isinstance(request, RecordedRequest)
    assert (request.method, request.path, request.status) == ("GET", "/api/models/acme/tiny", 200)
    assert request.query == {"blobs": ["true"]}
    assert request.headers["Authorization"] == request.headers["authorization"]
    assert request.bytes_sent > 0 and request.repo_id == "acme/tiny"
    fake_hub.clear_requests()
    assert fake_hub.requests == []
    assert _http(fake_hub, "/not/a/route")[0] == 404
    assert fake_hub.requests[0].status == 404


def test_add_repo_validates_its_input() -> None:
    hub = FakeHub()
    hub.add_repo("acme/tiny", {"a.txt": b"a"})
    with pytest.raises(ValueError, match="exists"):
        hub.add_repo("acme/tiny", {})
    for bad in ("../x", "a//b", "/abs", "a\\b"):
        with pytest.raises(ValueError, match="invalid file path"):
            hub.add_commit("acme/tiny", {bad: b""})
    with pytest.raises(ValueError, match="invalid repo id"):
        hub.add_repo("not a repo", {})
    with pytest.raises(ValueError, match="gated"):
        hub.add_repo("acme/other", {}, gated="yes")
    with pytest.raises(TypeError):
        hub.add_repo("acme/text", {"a.txt": "text"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="status="):
        hub.inject_fault()
    with pytest.raises(ValueError, match="at most one"):
        hub.inject_fault(status=500, cut_after_bytes=1)
    with pytest.raises(RuntimeError):
        _ = hub.endpoint


def test_lifecycle_is_restartable_and_stop_is_idempotent() -> None:
    hub = FakeHub(valid_tokens={"t"})
    hub.add_repo("acme/tiny", FILES, gated=True)
    with hub:
        first = hub.endpoint
        assert _http(hub, "/acme/tiny/resolve/main/config.json", Authorization="Bearer t")[0] == 200
    hub.stop()
    with hub:
        assert hub.endpoint.startswith("http://127.0.0.1:") and first
        assert _http(hub, "/api/models/acme/tiny")[0] == 200
    assert hub.internal_errors == []


def test_hf_env_points_the_environment_at_the_hub(hf_env: FakeHub) -> None:
    assert os.environ["HF_ENDPOINT"] == hf_env.endpoint
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert Path(os.environ["HF_HOME"]).is_dir()
    assert "HF_TOKEN" not in os.environ and "HUGGING_FACE_HUB_TOKEN" not in os.environ


def test_delayed_cut_is_logged_while_it_stalls_and_stop_ends_it() -> None:
    hub = FakeHub()
    hub.add_repo("acme/tiny", FILES)
    hub.inject_fault(cut_after_bytes=100, delay=30)
    outcome: list[object] = []

    def download() -> None:
        try:
            outcome.append(_http(hub, "/acme/tiny/resolve/main/model.safetensors"))
        except http.client.IncompleteRead as error:
            outcome.append(error)

    with hub:
        worker = threading.Thread(target=download)
        worker.start()
        stalled = hub.wait_for_request(lambda r: r.method == "GET" and r.bytes_sent == 100)
        assert stalled.filename == "model.safetensors"
        assert worker.is_alive()  # still held open by the delay
        started = time.monotonic()
    assert time.monotonic() - started < 5  # stop() did not wait out the delay
    worker.join(timeout=5)
    assert len(outcome) == 1 and isinstance(outcome[0], http.client.IncompleteRead)
    assert len(outcome[0].partial) == 100
    with pytest.raises(TimeoutError):
        hub.wait_for_request(lambda r: r.status == 999, timeout=0.05)


def test_refs_and_tag_resolution(fake_hub: FakeHub) -> None:
    sha = fake_hub.add_repo("acme/tiny", FILES)
    fake_hub.add_tag("acme/tiny", "v1", "main")
    dev = fake_hub.add_commit("acme/tiny", {"config.json": b"{}"}, branch="dev")
    refs = HfApi(endpoint=fake_hub.endpoint).list_repo_refs("acme/tiny")
    assert {b.name: b.target_commit for b in refs.branches} == {"main": sha, "dev": dev}
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", sha)]
    with pytest.raises(ValueError, match="unknown revision"):
        fake_hub.add_tag("acme/tiny", "v2", "0" * 40)


def test_a_subprocess_reaches_the_hub_through_hf_env(hf_env: FakeHub, tmp_path: Path) -> None:
    hf_env.add_repo("acme/private", FILES, private=True)
    script = (
        "import sys\n"
        "from huggingface_hub import snapshot_download\n"
        "print(snapshot_download('acme/private', local_dir=sys.argv[1], token='hf_test_token'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "model.safetensors").read_bytes() == WEIGHTS
    assert sorted(hf_env.file_requests(repo_id="acme/private")) == sorted(FILES)
