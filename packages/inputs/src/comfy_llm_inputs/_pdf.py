"""Bounded text extraction from PDF files with pypdf."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from ._limits import ProgressCallback, report
from .errors import FileInputError

# pypdf parses untrusted bytes; malformed files surface as any of these
# (plus pypdf's own PyPdfError). pypdf is imported on first use only.
_PARSE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    AssertionError,
    RecursionError,
    ZeroDivisionError,
    OSError,
)


_COUNT = re.compile(rb"/Count\s+(\d{1,12})")
_PAGES_TYPE = re.compile(rb"/Type\s*/Pages(?![A-Za-z])")


def declared_page_count(data: bytes) -> int | None:
    """The page count a PDF's page tree declares, read from its raw bytes.

    Only for messages when pypdf refuses the file (a ``/Kids`` array past its
    element limit, "Reached maximum array element count"): the largest
    ``/Count`` of a dictionary typed ``/Pages`` (the root's counts all pages).
    ``None`` when no such dictionary is readable as plain text (compressed
    object streams), so nothing is claimed then.
    """
    counts = []
    for match in _COUNT.finditer(data):
        opening = data.rfind(b"<<", 0, match.start())
        closing = data.find(b">>", match.end())
        if opening >= 0 and closing >= 0 and _PAGES_TYPE.search(data, opening, closing):
            counts.append(int(match.group(1)))
    return max(counts, default=None)


_SHOW_TEXT = frozenset({b"Tj", b"TJ", b"'", b'"'})


def _is_blank(text: str) -> bool:
    """No visible character: spaces, or control codes pypdf emits for unmapped glyphs."""
    return all(char.isspace() or not char.isprintable() for char in text)


def _draws_text(page: object, pdf_errors: tuple[type[BaseException], ...]) -> bool:
    """Whether a page's content stream has any text-showing operator (Tj, TJ, ', ")."""
    try:
        contents = page.get_contents()  # type: ignore[attr-defined]
        operations = contents.operations if contents is not None else []
    except pdf_errors:
        return False
    return any(operator in _SHOW_TEXT for _, operator in operations)


def _over_page_limit(name: str, page_count: int, max_pages: int) -> FileInputError:
    return FileInputError(
        f"File {name!r} has {page_count} pages; the limit is {max_pages} pages per PDF; "
        f"split it or attach only the pages you need (at most {max_pages})",
        filename=name,
        value=page_count,
        limit=max_pages,
    )


def extract_pdf_text(
    data: bytes,
    *,
    name: str,
    max_pages: int,
    check_characters: Callable[[int], None],
    progress: ProgressCallback | None = None,
) -> tuple[str, int]:
    """Extract the text of a PDF, page by page, within bounds.

    Each page's text follows a ``[page N]`` line so the model can cite pages.
    The page count is checked before any page is read, and the character
    budget after each page, so an oversized PDF is refused early.

    Args:
        data: The PDF bytes.
        name: The file's name, for messages.
        max_pages: Most pages allowed.
        check_characters: Called with the characters extracted so far;
            raises :class:`FileInputError` when a character limit is broken.
        progress: Optional ``progress(message, done, total)`` callback.

    Returns:
        ``(text, page_count)``.

    Raises:
        FileInputError: Not a readable PDF, encrypted, no pages, more pages
            than ``max_pages``, a character limit broken, or no extractable
            text at all.
    """
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    pdf_errors: tuple[type[BaseException], ...] = (PyPdfError, *_PARSE_ERRORS)
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
        page_count = 0 if encrypted else len(reader.pages)
    except pdf_errors as error:
        declared = declared_page_count(data)
        if declared is not None and declared > max_pages:  # e.g. a page tree past pypdf's limits
            raise _over_page_limit(name, declared, max_pages) from error
        raise FileInputError(
            f"File {name!r} is not a readable PDF ({type(error).__name__}: {error}); "
            "re-save or re-export it as PDF, or pass its text as a .txt file",
            filename=name,
        ) from error
    if encrypted:
        raise FileInputError(
            f"File {name!r} is an encrypted (password-protected) PDF, which is not supported; "
            "save an unencrypted copy (e.g. print to PDF) and attach that",
            filename=name,
        )
    if page_count == 0:
        raise FileInputError(
            f"File {name!r} is a PDF with no pages; attach a PDF with content", filename=name
        )
    if page_count > max_pages:
        raise _over_page_limit(name, page_count, max_pages)
    parts: list[str] = []
    characters = 0
    found_text = False
    message = f"Extracting PDF text from {name}"
    for number in range(page_count):
        try:
            text = reader.pages[number].extract_text() or ""
        except pdf_errors as error:
            raise FileInputError(
                f"File {name!r}: page {number + 1} of {page_count} could not be read "
                f"({type(error).__name__}: {error}); re-export the PDF or pass that page "
                "as an image",
                filename=name,
            ) from error
        text = text.strip()
        found_text = found_text or not _is_blank(text)
        part = f"[page {number + 1}]\n{text}"
        parts.append(part)
        characters += len(part) + (2 if number else 0)
        check_characters(characters)
        report(progress, message, number + 1, page_count)
    if not found_text:
        pages = f"{page_count} page{'' if page_count == 1 else 's'}"
        if any(_draws_text(page, pdf_errors) for page in reader.pages):
            why = "its text operators yield only blank text or glyphs with no Unicode mapping"
        else:
            why = "no page draws any text: scanned or image-only?"
        raise FileInputError(
            f"File {name!r} is a PDF with no extractable text ({pages}; {why}); pass the "
            "pages as images (IMAGE input) instead",
            filename=name,
        )
    return "\n\n".join(parts), page_count
