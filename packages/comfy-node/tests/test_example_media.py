"""The video template's sample clip and notes reach ComfyUI's input folder, never
overwriting what an artist put there."""

from __future__ import annotations

from pathlib import Path

from comfy_llm._comfyui._example_media import SAMPLE_PREFIX, install_example_media, media_folder


def test_the_checkout_carries_the_samples() -> None:
    folder = media_folder()
    assert folder is not None
    names = sorted(path.name for path in folder.iterdir())
    assert names == [
        "comfy-llm-example-clip.mp4",
        "comfy-llm-example-lora",
        "comfy-llm-example-notes.txt",
    ]
    assert all(name.startswith(SAMPLE_PREFIX) for name in names)
    assert sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) < 64 * 1024


def test_missing_samples_are_copied_and_existing_files_kept(tmp_path: Path) -> None:
    source, target = tmp_path / "media", tmp_path / "input"
    source.mkdir()
    (source / f"{SAMPLE_PREFIX}clip.mp4").write_bytes(b"clip")
    (source / f"{SAMPLE_PREFIX}notes.txt").write_bytes(b"notes")
    (source / "other.txt").write_bytes(b"not a sample")
    target.mkdir()
    (target / f"{SAMPLE_PREFIX}notes.txt").write_bytes(b"the artist's own")
    assert install_example_media(source, target) == [f"{SAMPLE_PREFIX}clip.mp4"]
    assert (target / f"{SAMPLE_PREFIX}clip.mp4").read_bytes() == b"clip"
    assert (target / f"{SAMPLE_PREFIX}notes.txt").read_bytes() == b"the artist's own"
    assert not (target / "other.txt").exists()
    assert install_example_media(source, target) == []


def test_a_sample_folder_is_copied_whole_once(tmp_path: Path) -> None:
    source, target = tmp_path / "media", tmp_path / "input"
    (source / f"{SAMPLE_PREFIX}lora").mkdir(parents=True)
    (source / f"{SAMPLE_PREFIX}lora" / "a.jpg").write_bytes(b"a")
    assert install_example_media(source, target) == [f"{SAMPLE_PREFIX}lora"]
    assert (target / f"{SAMPLE_PREFIX}lora" / "a.jpg").read_bytes() == b"a"
    (target / f"{SAMPLE_PREFIX}lora" / "a.txt").write_text("a caption the template wrote")
    assert install_example_media(source, target) == []  # the artist's copy stays as it is
    assert (target / f"{SAMPLE_PREFIX}lora" / "a.txt").exists()
    assert sorted(p.name for p in target.iterdir()) == [f"{SAMPLE_PREFIX}lora"]  # no .partial


def test_an_unwritable_input_folder_costs_only_the_media(tmp_path: Path) -> None:
    source = tmp_path / "media"
    source.mkdir()
    (source / f"{SAMPLE_PREFIX}clip.mp4").write_bytes(b"clip")
    blocker = tmp_path / "input"
    blocker.write_text("a file where the folder should be")
    assert install_example_media(source, blocker) == []


def test_outside_comfyui_nothing_happens(tmp_path: Path) -> None:
    assert install_example_media(tmp_path, None) == []
