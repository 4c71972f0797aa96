"""Library logging for command-line use: quiet by default, scrubbed when shown.

huggingface_hub and the HTTP clients log retries and resumes ("Trying to
resume download...", "Retrying in 1s") at WARNING on stderr. Our own errors
already say what happened, so that chatter stays off unless asked for.
huggingface_hub and Transformers ("[transformers] ... is falling back to its
reference implementation") install their own stderr handler and set their
level from ``HF_HUB_VERBOSITY`` / ``TRANSFORMERS_VERBOSITY`` when first
imported, so the variables are set here before that import; levels and
filters are set on whatever exists now.

Third-party progress bars (Transformers' "Loading weights" tqdm) are not
logging: :func:`library_progress_bars_quiet` tells the engine packages, which
alone may import those libraries, to keep them off stderr too. Staging's own
download progress is a tqdm stand-in handed to huggingface_hub and is not
affected (nothing here disables huggingface_hub's bars globally).
"""

from __future__ import annotations

import logging
import sys

from comfy_llm_core._env import env_set
from comfy_llm_core._secrets import redact

__all__ = [
    "LIBRARY_LOGGERS",
    "RedactingFilter",
    "configure_library_logging",
    "library_progress_bars_quiet",
]

LIBRARY_LOGGERS = (
    "huggingface_hub",
    "transformers",
    "httpx2",
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
)
"""Third-party loggers whose messages are chatter unless debugging."""

_HANDLER_NAME = "comfy-llm-debug"
_VERBOSITY_VARIABLES = {  # libraries that set their level from these when first imported
    "huggingface_hub": "HF_HUB_VERBOSITY",
    "transformers": "TRANSFORMERS_VERBOSITY",
}
_QUIET_BARS: dict[str, bool] = {"quiet": False}  # set by configure_library_logging


def library_progress_bars_quiet() -> bool:
    """Whether third-party progress bars must stay off stderr.

    True once :func:`configure_library_logging` ran without ``debug`` (the
    CLI); False otherwise (ComfyUI's console shows them as usual).
    """
    return _QUIET_BARS["quiet"]


class RedactingFilter(logging.Filter):
    """Scrubs Hub tokens from every record before a handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message by its scrubbed text (always keeps it)."""
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def configure_library_logging(debug: bool) -> None:
    """Keep library logging off stderr (errors only), or show it, scrubbed.

    Args:
        debug: Show INFO and above from the libraries and from comfy-llm on
            stderr, every line through :class:`RedactingFilter`.
    """
    _QUIET_BARS["quiet"] = not debug
    level = logging.INFO if debug else logging.ERROR
    for module, variable in _VERBOSITY_VARIABLES.items():
        if module not in sys.modules:
            env_set(variable, "info" if debug else "error")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for module in _VERBOSITY_VARIABLES:
        for handler in logging.getLogger(module).handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
    if not debug:
        return
    root = logging.getLogger()
    if not any(handler.get_name() == _HANDLER_NAME for handler in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(_HANDLER_NAME)
        handler.addFilter(RedactingFilter())
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    if logging.getLogger("huggingface_hub").handlers:
        logging.getLogger("huggingface_hub").propagate = False  # it has its own handler
