"""Which GPU a request asks Modal for: one type, or a fallback list tried in order.

``with_options(gpu=...)`` takes one string (modal/cls.py:741; a list raises
``InvalidError``, modal/_utils/function_utils.py:655-669), and a type the
client passes on unchecked fails only at Modal. So ``modal_gpu`` is checked
here against the types Modal offers, and ``"H100,A100-80GB"`` means: spawn on
an H100; if no container of it starts within :data:`GPU_WAIT_ENV` seconds
(capacity exhausted, or a type this workspace cannot get), cancel and spawn
on the next. The last one waiting too long ends the request with one line.
"""

from __future__ import annotations

import re

from comfy_llm_core import InvalidSettingError, env_float

__all__ = [
    "DEFAULT_GPU_WAIT_SECONDS",
    "GPU_WAIT_ENV",
    "MODAL_GPU_TYPES",
    "gpu_choices",
    "gpu_wait_seconds",
]

MODAL_GPU_TYPES = (
    "T4",
    "L4",
    "A10",
    "A10G",
    "L40S",
    "A100",
    "A100-40GB",
    "A100-80GB",
    "RTX-PRO-6000",
    "H100",
    "H100!",
    "H200",
    "B200",
    "B200+",
)
"""GPU types Modal offers (modal.com/docs/guide/gpu); ``!`` pins a type Modal could upgrade."""

GPU_WAIT_ENV = "COMFY_MODAL_GPU_WAIT_SECONDS"
DEFAULT_GPU_WAIT_SECONDS = 600.0
"""How long a spawned request may wait for its container's first event: a cold
start pulls a ~10 GB image and loads nothing yet, so minutes are normal; far
longer means no GPU of that type is coming."""

_KNOWN = {name.upper() for name in MODAL_GPU_TYPES}
_ONE = re.compile(r"^(?P<type>[A-Za-z0-9-]+!?\+?)(?::(?P<count>[1-8]))?$")


def gpu_choices(text: str) -> tuple[str, ...]:
    """``modal_gpu`` as the GPU strings to try, in order.

    Raises:
        InvalidSettingError: Empty, or a type Modal does not offer (named, with the list).
    """
    choices = tuple(part.strip() for part in str(text).split(",") if part.strip())
    for choice in choices:
        match = _ONE.match(choice)
        if match is None or match["type"].upper() not in _KNOWN:
            break
    else:
        if choices:
            return choices
    raise InvalidSettingError(
        "modal_gpu",
        text,
        f"a Modal GPU type ({', '.join(MODAL_GPU_TYPES)}), optionally ':<count>', or a "
        "comma-separated fallback list tried in order, such as 'H100,A100-80GB'",
    )


def gpu_wait_seconds() -> float:
    """:data:`GPU_WAIT_ENV` (10 s to 24 h, default 600)."""
    return env_float(GPU_WAIT_ENV, DEFAULT_GPU_WAIT_SECONDS, minimum=10.0, maximum=86400.0)
