"""Whether this machine has a CUDA device, for the ``gpu``-marked tests.

The GPU tests run on a lent machine (``scripts/gpu-check.sh``) and are skipped,
and counted so, everywhere else; one probe keeps their skip reason the same.
"""

from __future__ import annotations

import pytest

__all__ = ["cuda_available", "requires_cuda"]


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


requires_cuda = pytest.mark.skipif(
    not cuda_available(), reason="no CUDA device (torch.cuda.is_available() is False)"
)
