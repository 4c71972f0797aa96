"""``comfy-llm caption --on-modal`` and the caption node's ``run_on_modal`` on N workers.

The transport is the strict Modal stand-in (the real stager and engine
bodies in container processes); no Modal credentials are set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import item_seed
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import StrictTransport
from PIL import Image

pytestmark = pytest.mark.slow

SCRIPTED = "tiny/smolvlm-scripted"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[list[StrictTransport]]:
    from comfy_llm_modal_remote import use_transport

    made: list[StrictTransport] = []

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=tmp_path / "modal"))
        return made[-1]

    use_transport(factory)
    yield made
    use_transport(None)
    for transport in made:
        transport.close()


def _folder(tmp_path: Path, count: int) -> Path:
    folder = tmp_path / "dataset"
    folder.mkdir()
    for index in range(count):
        suffix = "png" if index % 3 == 0 else "jpg"
        Image.new("RGB", (40, 30), (20 * index, 200, 90)).save(folder / f"i{index:02d}.{suffix}")
    return folder


def _answered(transport: StrictTransport) -> list[int]:
    """Image indices whose chunk call came back with captions (completed engine requests)."""
    done: list[int] = []
    for kind, info, call in transport.calls:
        if kind != "chunk":
            continue
        call.join()
        if call.raised is None and "ok" in call.outcome():
            done.extend(image["index"] for image in info["request"]["images"])
    return done


def test_cli_caption_on_modal_writes_like_the_local_run_with_cost_on_record(
    model_hub: FakeHub,
    storage: Path,
    standin: list[StrictTransport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._cli import main

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = _folder(tmp_path, 5)
    (folder / "i01.txt").write_text("kept caption\n")
    (folder / "i04.jpg").write_bytes(b"\xff\xd8\xff broken")
    argv = ["caption", str(folder), "--model", SCRIPTED, "--prefix", "sks", "--json"]
    argv += ["--max-new-tokens", "6", "--seed", "5"]
    assert main([*argv, "--no-write"]) == 0  # local, no files: the reference captions
    local = json.loads(capsys.readouterr().out)
    remote_argv = [*argv, "--write", "--on-modal", "--gpu", "H100", "--workers", "2"]
    assert main([*remote_argv, "--chunk-images", "2"]) == 0
    remote = json.loads(capsys.readouterr().out)

    assert remote["captions"] == local["captions"]
    # every image ran with its own seed, from the job's seed and its name, on both paths
    for run in (local, remote):
        seeds = {r["name"]: r.get("seed") for r in run["metadata"]["per_image"]}
        assert {n: seeds[n] for n in ("i00.png", "i02.jpg", "i03.png")} == {
            n: item_seed(5, n) for n in ("i00.png", "i02.jpg", "i03.png")
        }
    statuses = [r["status"] for r in remote["metadata"]["per_image"]]
    assert statuses == ["captioned", "kept_existing", "captioned", "captioned", "failed"]
    assert "i04.jpg" in remote["metadata"]["per_image"][4]["error"]
    for index in (0, 2, 3):
        name = next(folder.glob(f"i{index:02d}.*")).with_suffix(".txt")
        assert name.read_text() == remote["captions"][index] + "\n"
        assert remote["captions"][index].startswith("sks, ")
    assert (folder / "i01.txt").read_text() == "kept caption\n"
    assert not (folder / "i04.txt").exists()
    metadata = remote["metadata"]
    assert metadata["execution_target"] == "modal"
    assert metadata["modal_gpu"] == "H100" and metadata["modal_workers"] == 2
    assert metadata["modal_app_name"].startswith("comfy-llm-")
    assert metadata["modal_gpu_seconds"] > 0 and metadata["modal_images_per_gpu_second"] > 0
    assert metadata["modal_chunks"] == 2 and metadata["modal_chunks_retried"] == 0
    assert metadata["repository"] == SCRIPTED
    assert {"comfy-llm", "comfy-llm-modal-remote"} <= set(metadata["comfy_llm_versions"])
    (transport,) = standin
    assert sorted(_answered(transport)) == [0, 2, 3]  # the kept and the broken never sent


def test_cancel_at_half_then_rerun_captions_every_image_exactly_once(
    model_hub: FakeHub, storage: Path, standin: list[StrictTransport], tmp_path: Path
) -> None:
    from comfy_llm._caption_job import CaptionJob, caption_items
    from comfy_llm._caption_modal import ModalCaptionOptions, run_captions_on_modal
    from comfy_llm_residency.backend import GenerationSettings

    class Interrupted(BaseException):
        pass

    folder = _folder(tmp_path, 12)
    job = CaptionJob(
        model=SCRIPTED,
        prompt="Caption it.",
        settings=GenerationSettings(temperature=0.0, max_new_tokens=24),
        write_files=True,
        reserve_gb=0.0,
    )
    options = ModalCaptionOptions("H100", workers=2, chunk_images=2)

    def cancel_at_half(event: Any) -> None:
        if event.unit == "images" and event.value >= 6:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_captions_on_modal(job, caption_items(folder=folder), options, progress=cancel_at_half)
    first = sorted(p.stem for p in folder.glob("*.txt"))
    assert 6 <= len(first) < 12
    batch = run_captions_on_modal(job, caption_items(folder=folder), options, progress=print)
    statuses = [r["status"] for r in batch.metadata["per_image"]]
    assert statuses.count("kept_existing") == len(first)
    assert statuses.count("captioned") == 12 - len(first)
    assert sorted(p.stem for p in folder.glob("*.txt")) == [f"i{i:02d}" for i in range(12)]
    answered = [index for transport in standin for index in _answered(transport)]
    assert sorted(answered) == list(range(12))  # each image's engine work exactly once


def test_caption_node_runs_on_modal_workers_with_its_new_inputs_last(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    standin: list[StrictTransport],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    names = [i.id for i in CaptionImagesNode.define_schema().inputs]
    modal = names.index("run_on_modal")
    assert names[modal : modal + 3] == ["run_on_modal", "modal_gpu", "modal_workers"]
    assert names[modal - 1] == "batch_size"  # saved workflows keep their positions

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    images = np.random.default_rng(0).random((3, 24, 32, 3), dtype=np.float32)
    folder = _folder(tmp_path, 2)
    common = {"model_profile": SCRIPTED, "prompt": "Caption it.", "images": images}
    common |= {"folder": str(folder), "max_new_tokens": 6}
    local = CaptionImagesNode.execute(**common, write_caption_files=False).args
    remote = CaptionImagesNode.execute(
        **common,
        run_on_modal=True,
        modal_gpu="A100-80GB",
        modal_workers=3,
    ).args
    assert remote[0] == local[0]
    metadata = json.loads(remote[1])
    assert metadata["modal_workers"] == 3 and metadata["modal_gpu"] == "A100-80GB"
    assert metadata["captioned"] == 5 and metadata["written"] == 2
    assert sorted(p.name for p in folder.glob("*.txt")) == ["i00.txt", "i01.txt"]
    (transport,) = standin
    chunk_keys = {info["affinity_key"] for kind, info, _ in transport.calls if kind == "chunk"}
    assert chunk_keys == {"caption-a100-80gb-0"}  # 5 images: one chunk of the default size


def test_video_clips_caption_on_modal_from_the_frames_the_local_batch_samples(
    model_hub: FakeHub,
    storage: Path,
    standin: list[StrictTransport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm_testworld.media import write_test_video

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    folder = tmp_path / "dataset"
    (folder / "clips").mkdir(parents=True)
    (folder / "a").mkdir()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(folder / "a" / "still.png")
    # 6 frames: fewer than local_cpu's 8 and the Modal target's 12, so both take all six
    write_test_video(folder / "clips" / "walk.mp4", frames=6)
    argv = ["caption", str(folder), "--model", SCRIPTED, "--recursive", "--json"]
    argv += ["--max-new-tokens", "6", "--seed", "5"]
    assert main_cli([*argv, "--no-write"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main_cli([*argv, "--write", "--on-modal", "--gpu", "H100"]) == 0
    remote = json.loads(capsys.readouterr().out)

    names = ["a/still.png", "clips/walk.mp4"]
    for run in (local, remote):
        records = run["metadata"]["per_image"]
        assert [r["name"] for r in records] == names
        assert [r["status"] for r in records] == ["captioned", "captioned"], records
        # each its own seed from its path below the folder, on both paths
        assert [r["seed"] for r in records] == [item_seed(5, name) for name in names]
    assert remote["captions"] == local["captions"]
    assert (folder / "clips" / "walk.txt").read_text() == remote["captions"][1] + "\n"
    # the clip's request (the last one) is the local one: its frames, and the prompt
    # with their timestamps, in as many tokens
    clip_local, clip_remote = local["metadata"], remote["metadata"]
    assert clip_remote["last_request"]["video_frame_count"] == 6
    for key in ("video_frame_count", "image_count", "prompt_tokens"):
        assert clip_remote["last_request"][key] == clip_local["last_request"][key], key
    (transport,) = standin
    [(_, info, _)] = [call for call in transport.calls if call[0] == "chunk"]
    clip = info["request"]["images"][1]
    assert clip["data"] == b"" and len(clip["frames"]) == 6
    assert {frame["kind"] for frame in clip["frames"]} == {"video_frame"}
    assert clip_remote["modal_bytes_sent"] >= sum(len(f["data"]) for f in clip["frames"])


def main_cli(argv: list[str]) -> int:
    from comfy_llm._cli import main

    return main(argv)
