"""OPENAI_INPUT_FILES values, mappings and paths to bounded text."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pydantic
import pytest
from comfy_llm_core import FileLimits
from comfy_llm_inputs import FileInputError, read_input_files


class InputFileContent(pydantic.BaseModel):
    """Shaped like ComfyUI's OpenAI input file (pydantic, read by attribute)."""

    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None
    type: str = "input_file"


def uri(data: bytes, mime: str = "text/plain") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_comfy_objects_mappings_and_paths(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\r\nline two\r\n", encoding="utf-8")
    files = [
        InputFileContent(file_data=uri(b"\xef\xbb\xbfhello"), filename="a.txt"),
        {"filename": "b.json", "file_data": uri(b'{"k": 1}', "application/json")},
        str(path),
    ]
    a, b, c = read_input_files(files)
    assert (a.name, a.mime_type, a.text, a.size_bytes, a.page_count) == (
        "a.txt",
        "text/plain",
        "hello",
        8,
        None,
    )
    assert (b.name, b.mime_type, b.text) == ("b.json", "application/json", '{"k": 1}')
    assert (c.name, c.mime_type, c.text) == ("notes.md", "text/markdown", "# Notes\nline two\n")


def test_single_item_and_none() -> None:
    assert read_input_files(None) == ()
    (only,) = read_input_files(InputFileContent(file_data=uri(b"x"), filename="x.txt"))
    assert only.text == "x"


def test_generic_type_falls_back_to_the_extension() -> None:
    (file,) = read_input_files(
        [{"filename": "table.csv", "file_data": uri(b"a,b\n1,2", "application/octet-stream")}]
    )
    assert file.mime_type == "text/csv"


def test_directories_are_dropped_from_names() -> None:
    (file,) = read_input_files([{"filename": "/secret/dir/x.txt", "file_data": uri(b"x")}])
    assert file.name == "x.txt"


def test_pdf_text_by_page(pdf_bytes) -> None:
    data = pdf_bytes(["First page", None, "Third (page)"])
    seen = []
    (file,) = read_input_files(
        [InputFileContent(file_data=uri(data, "application/pdf"), filename="r.pdf")],
        progress=lambda *event: seen.append(event),
    )
    assert file.page_count == 3
    assert file.text == "[page 1]\nFirst page\n\n[page 2]\n\n\n[page 3]\nThird (page)"
    assert ("Extracting PDF text from r.pdf", 3, 3) in seen
    assert seen[-1] == ("Reading files", 1, 1)


def test_pdf_path(tmp_path: Path, pdf_bytes) -> None:
    path = tmp_path / "doc.pdf"
    path.write_bytes(pdf_bytes(["Hello"]))
    (file,) = read_input_files([path])
    assert file.mime_type == "application/pdf"
    assert "Hello" in file.text


def _refused(files, pattern: str, limits: FileLimits | None = None) -> FileInputError:
    with pytest.raises(FileInputError, match=pattern) as info:
        read_input_files(files, limits=limits)
    return info.value


def test_encrypted_pdf(encrypted_pdf_bytes) -> None:
    error = _refused(
        [{"filename": "locked.pdf", "file_data": uri(encrypted_pdf_bytes, "application/pdf")}],
        "'locked.pdf' is an encrypted",
    )
    assert error.filename == "locked.pdf"


def test_pdf_without_text(pdf_bytes) -> None:
    _refused(
        [{"filename": "scan.pdf", "file_data": uri(pdf_bytes([None, None]), "application/pdf")}],
        r"'scan.pdf' is a PDF with no extractable text \(2 pages;.* pass the pages as images",
    )
    _refused(  # one page is "1 page"
        [{"filename": "one.pdf", "file_data": uri(pdf_bytes([None]), "application/pdf")}],
        r"'one.pdf' is a PDF with no extractable text \(1 page;",
    )


def test_pdf_over_the_page_limit_is_refused_before_extraction(pdf_bytes, monkeypatch) -> None:
    import pypdf

    def boom(*args, **kwargs):
        raise AssertionError("no page may be extracted")

    monkeypatch.setattr(pypdf.PageObject, "extract_text", boom)
    data = pdf_bytes([f"page {n}" for n in range(6)])
    error = _refused(
        [{"filename": "big.pdf", "file_data": uri(data, "application/pdf")}],
        "'big.pdf' has 6 pages; the limit is 5",
        FileLimits(max_pdf_pages=5),
    )
    assert (error.value, error.limit) == (6, 5)


def test_corrupt_pdf() -> None:
    _refused(
        [{"filename": "bad.pdf", "file_data": uri(b"%PDF-1.4 nonsense", "application/pdf")}],
        "'bad.pdf' is not a readable PDF",
    )


@pytest.mark.parametrize(
    ("item", "pattern"),
    [
        (
            {"filename": "b.txt", "file_data": "data:text/plain;base64,@@@"},
            "'b.txt'.*not valid base64",
        ),
        ({"filename": "u.txt", "file_data": "hello"}, "'u.txt'.*not a data URI"),
        ({"filename": "i.txt", "file_id": "file-abc"}, "'i.txt' refers to an uploaded file id"),
        ({"filename": "n.txt"}, "'n.txt'.*has no file_data"),
        (
            {"filename": "l.txt", "file_data": uri(b"caf\xe9")},
            r"'l.txt' is not valid UTF-8 .*0xe9 at offset 3",
        ),
        (
            {"filename": "c.txt", "file_data": "data:text/plain;charset=latin-1;base64,YQ=="},
            "'c.txt' declares 'charset=latin-1'",
        ),
        (
            {"filename": "p.png", "file_data": uri(b"\x89PNG", "image/png")},
            "'p.png' has unsupported type 'image/png'",
        ),
        (
            {"filename": "x.bin", "file_data": uri(b"x", "application/octet-stream")},
            "'x.bin' has unsupported type",
        ),
    ],
)
def test_refusals_name_the_file(item: dict, pattern: str) -> None:
    error = _refused([item], pattern)
    assert error.filename == item["filename"]


def test_missing_path(tmp_path: Path) -> None:
    _refused([tmp_path / "gone.txt"], "'gone.txt' was not found")


def test_size_is_checked_before_decoding(monkeypatch) -> None:
    import comfy_llm_inputs._files as files_module

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded before the size check")

    monkeypatch.setattr(files_module.base64, "b64decode", no_decoding)
    payload = "A" * (12 * 1024 * 1024)  # decodes to ~9 MiB, over 8 MiB
    started = time.perf_counter()
    error = _refused(
        [{"filename": "huge.txt", "file_data": "data:text/plain;base64," + payload}],
        "'huge.txt' is about 9,437,184 bytes; the limit is 8,388,608 bytes per file",
    )
    assert time.perf_counter() - started < 1.0
    assert error.limit == 8 * 1024 * 1024


def test_total_bytes_and_characters() -> None:
    items = [{"filename": f"f{n}.txt", "file_data": uri(b"x" * 600)} for n in range(2)]
    error = _refused(
        items,
        "'f1.txt'.*1,200 bytes; the limit is 1,000 bytes in total",
        FileLimits(max_total_file_bytes=1000),
    )
    assert (error.value, error.limit) == (1200, 1000)
    error = _refused(
        items[:1],
        r"^File 'f0.txt' has at least 600 characters of text \(reading stopped there\); at most "
        r"500 are allowed per file; ",
        FileLimits(max_file_characters=500),
    )
    assert "so far" not in str(error)
    error = _refused(
        items,
        "'f1.txt' brings .* more than 1,000 characters",
        FileLimits(max_total_characters=1000),
    )
    assert error.filename == "f1.txt"


def test_pdf_character_limit_stops_extraction(pdf_bytes) -> None:
    data = pdf_bytes(["x" * 80 for _ in range(20)])
    _refused(
        [{"filename": "long.pdf", "file_data": uri(data, "application/pdf")}],
        r"'long.pdf' has at least \d+ characters of text \(reading stopped there\); at most 300",
        FileLimits(max_file_characters=300),
    )


def test_unsupported_container() -> None:
    with pytest.raises(FileInputError, match=r"int is not supported"):
        read_input_files(42)


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (1 is the catalog) with an exact cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    size = len(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


def _page_tree_pdf(count: int) -> bytes:
    """A valid PDF whose one /Kids array lists ``count`` pages (one page object, shared)."""
    kids = b" ".join([b"3 0 R"] * count)
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Count " + str(count).encode() + b" /Kids [" + kids + b"] >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >>",
        ]
    )


_HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
# A composite font with no /ToUnicode: pypdf decodes its glyphs as control codes
_UNMAPPED = (
    b"<< /Type /Font /Subtype /Type0 /BaseFont /Foo /Encoding /Identity-H /DescendantFonts "
    b"[<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Foo /CIDSystemInfo "
    b"<< /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>] >>"
)


def _one_page_pdf(content: bytes, font: bytes) -> bytes:
    """One page whose content stream is ``content``, with ``font`` as /F1."""
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
            font,
        ]
    )


@pytest.mark.parametrize(
    ("content", "font"),
    [
        (b"BT /F1 12 Tf 10 10 Td (   ) Tj ET", _HELVETICA),  # the only text shown is blank
        (b"BT /F1 12 Tf 10 10 Td <00010002> Tj ET", _UNMAPPED),  # glyphs, no characters
    ],
)
def test_pdf_whose_text_operators_yield_no_text_says_so(content: bytes, font: bytes) -> None:
    data = _one_page_pdf(content, font)
    item = {"filename": "odd.pdf", "file_data": uri(data, "application/pdf")}
    error = _refused([item], r"'odd.pdf' is a PDF with no extractable text \(1 page; its text ")
    assert "scanned" not in str(error)


def test_pdf_with_real_text_and_one_without_any(pdf_bytes) -> None:
    data = _one_page_pdf(b"BT /F1 12 Tf 10 10 Td (Hi) Tj ET", _HELVETICA)
    item = {"filename": "hi.pdf", "file_data": uri(data, "application/pdf")}
    assert "Hi" in read_input_files([item])[0].text
    scan = {"filename": "scan.pdf", "file_data": uri(pdf_bytes([None]), "application/pdf")}
    _refused([scan], r"no extractable text \(1 page; no page draws any text: scanned")


def test_pdf_pypdf_cannot_open_is_told_the_page_limit_it_broke() -> None:
    # pypdf refuses a /Kids array over 100,000 elements ("Reached maximum array
    # element count") before it can count pages; the page tree's /Count still says
    data = _page_tree_pdf(100_001)
    item = {"filename": "huge.pdf", "file_data": uri(data, "application/pdf")}
    error = _refused([item], "'huge.pdf' has 100001 pages; the limit is 200")
    assert (error.value, error.limit) == (100_001, 200)
    # within the page limit, the same refusal is not blamed on the page count
    _refused([item], "'huge.pdf' is not a readable PDF", FileLimits(max_pdf_pages=200_000))
