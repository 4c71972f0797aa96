"""comfy-llm's cross-cutting plumbing, one home each.

* :class:`ComfyLLMError` and :class:`ErrorAction`: the base every package's
  base error derives from (pickling, what the caller should do).
* ``env_*`` and :class:`InvalidSettingError`: environment variables read one way.
* :func:`hub_path_problem`, :func:`quote_untrusted`: Hub file names checked one way.
* :func:`render_error`, :func:`redact`, :func:`check_token`: tokens never reach output.
* :func:`write_atomically`: files replaced whole (temp + rename), mode 0644 minus umask;
  :func:`make_folder`: folders made with a full disk said as such.
* :func:`install_command`: what to install for an extra, from this install.
* :func:`fold_seed`: a ComfyUI seed folded into an engine's seed width;
  :func:`item_seed`: one batch item's own seed.
* :func:`configure_library_logging`: library chatter off stderr unless debugging;
  :func:`library_progress_bars_quiet` tells engines to hide their bars too.
* :class:`ExecutionTarget`, :class:`ProgressEvent` (:class:`ProgressStage`,
  :data:`ProgressCallback`, :func:`ignore_progress`): where a request runs and
  how every slow step reports, the vocabulary every package above shares.
* :class:`Modality` and the bounds of each (:class:`MediaLimits` of
  :class:`ImageLimits`, :class:`VideoLimits`, :class:`FileLimits`): what a
  request may carry, declared once for profiles, inputs and backends.
* :func:`reuse_answer`: how long a resolved branch reference is trusted, for every cache.
* :mod:`comfy_llm_core.defaults`: the defaults the node, the CLI and the manager share.
"""

from comfy_llm_core import defaults
from comfy_llm_core._env import (
    InvalidSettingError,
    env_changed,
    env_choice,
    env_float,
    env_int,
    env_restore,
    env_scope,
    env_set,
    env_snapshot,
    env_str,
)
from comfy_llm_core._errors import ComfyLLMError, DiskFullError, ErrorAction, rebuild_error
from comfy_llm_core._files import DISK_FULL_ERRNOS, make_folder, write_atomically
from comfy_llm_core._install import install_command, platform_extra
from comfy_llm_core._logs import (
    RedactingFilter,
    configure_library_logging,
    library_progress_bars_quiet,
)
from comfy_llm_core._modalities import (
    FileLimits,
    ImageLimits,
    MediaLimits,
    Modality,
    VideoLimits,
)
from comfy_llm_core._paths import hub_path_problem, quote_untrusted
from comfy_llm_core._progress import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
)
from comfy_llm_core._reuse import reuse_answer
from comfy_llm_core._secrets import (
    REDACTED,
    TOKEN_ENVS,
    InvalidTokenError,
    check_token,
    redact,
    render_error,
)
from comfy_llm_core._seeds import SEED_BITS_INT64, SEED_BITS_UINT64, fold_seed, item_seed
from comfy_llm_core._targets import ExecutionTarget

__version__ = "0.1.0"

__all__ = [
    "DISK_FULL_ERRNOS",
    "DiskFullError",
    "REDACTED",
    "SEED_BITS_INT64",
    "SEED_BITS_UINT64",
    "VideoLimits",
    "TOKEN_ENVS",
    "ComfyLLMError",
    "ErrorAction",
    "ExecutionTarget",
    "FileLimits",
    "ImageLimits",
    "InvalidSettingError",
    "InvalidTokenError",
    "MediaLimits",
    "Modality",
    "ProgressCallback",
    "ProgressEvent",
    "ProgressStage",
    "RedactingFilter",
    "check_token",
    "configure_library_logging",
    "defaults",
    "env_choice",
    "env_float",
    "env_int",
    "env_changed",
    "env_restore",
    "env_scope",
    "env_set",
    "env_snapshot",
    "env_str",
    "fold_seed",
    "item_seed",
    "library_progress_bars_quiet",
    "make_folder",
    "hub_path_problem",
    "ignore_progress",
    "install_command",
    "platform_extra",
    "quote_untrusted",
    "rebuild_error",
    "redact",
    "render_error",
    "reuse_answer",
    "write_atomically",
]
