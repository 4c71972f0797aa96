"""What a spawn does before any container sees it: the server's GPU check, the upload.

* ``spawn`` serializes its arguments and uploads them to blob storage when they
  exceed 8 KiB (an async invocation's limit: ``should_upload``,
  modal/_utils/function_utils.py:586-598; ``MAX_ASYNC_OBJECT_SIZE_BYTES``,
  modal/_utils/blob_utils.py:39), before ``spawn`` returns.
* The client passes any GPU string on (``parse_gpu_config`` only upper-cases it,
  function_utils.py:655-669); the server refuses a type Modal does not offer.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["GPU_TYPES", "upload_size"]

GPU_TYPES = frozenset(
    {
        "T4", "L4", "A10", "A10G", "L40S", "A100", "A100-40GB", "A100-80GB", "RTX-PRO-6000",
        "H100", "H100!", "H200", "B200", "B200+",
    }
)  # fmt: skip
"""GPU types Modal offers (modal.com/docs/guide/gpu)."""


def upload_size(request: dict[str, Any]) -> int:
    """Bytes a spawn of ``request`` uploads to blob storage (0: sent inline)."""
    from modal._utils.blob_utils import MAX_ASYNC_OBJECT_SIZE_BYTES

    size = len(pickle.dumps(((request, "queue"), {})))
    return size if size > MAX_ASYNC_OBJECT_SIZE_BYTES else 0
