"""vLLM execution modes: eager, throughput, and auto's one-way promotion.

The setting is deployment-scoped (``COMFY_MODAL_LLM_VLLM_EXECUTION_MODE``),
never part of a profile: a profile change would make another copy of the
same weights. ``auto`` starts eager; the second distinct ComfyUI prompt id
this process serves through vLLM promotes it to throughput for good. Several
nodes, components or retries with one prompt id are one workflow. A caption
batch promotes at once (:meth:`ExecutionModes.observe_captions`): it is
usually the first, the only and the largest job, and runs for minutes, where
eager decode steps are several times slower (a deliberate difference from
the seed, which counts workflows only). A pinned setting (``eager`` or
``throughput``) counts no workflow: it reports 0 observed, as the seed does.

The state is process-global (one engine process, one decision) and can be
exported and imported as plain data, so the Modal dispatcher can carry a
promotion into the fresh container of a retry. Nothing here imports vLLM.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from comfy_llm_core import env_choice

from ..errors import InvalidExecutionStateError

__all__ = [
    "EXECUTION_MODE_ENV",
    "EXECUTION_SETTINGS",
    "MAX_OBSERVED_WORKFLOWS",
    "ExecutionModes",
    "execution_modes",
]

EXECUTION_MODE_ENV: Final = "COMFY_MODAL_LLM_VLLM_EXECUTION_MODE"
EXECUTION_SETTINGS: Final = ("auto", "eager", "throughput")
#: The observed-workflow count (and the prompt ids remembered) stop growing here.
MAX_OBSERVED_WORKFLOWS: Final = 64
_STATE_VERSION: Final = 1


class ExecutionModes:
    """Which vLLM mode this process runs, and the prompt ids that decided it."""

    def __init__(self) -> None:
        """Start un-promoted with no workflow observed."""
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._count = 0
        self._promoted = False

    @staticmethod
    def setting() -> str:
        """The configured setting, read now: ``auto`` (default), ``eager`` or ``throughput``.

        Raises:
            InvalidSettingError: The variable holds another value.
        """
        return env_choice(EXECUTION_MODE_ENV, "auto", EXECUTION_SETTINGS)

    def mode(self) -> str:
        """The effective mode: ``eager`` or ``throughput``."""
        setting = self.setting()
        if setting != "auto":
            return setting
        with self._lock:
            return "throughput" if self._promoted else "eager"

    @property
    def promoted(self) -> bool:
        """Whether auto promoted this process to throughput."""
        with self._lock:
            return self._promoted

    @property
    def observed_workflow_count(self) -> int:
        """Distinct prompt ids seen, capped at :data:`MAX_OBSERVED_WORKFLOWS`."""
        with self._lock:
            return self._count

    def observe(self, prompt_id: str | None) -> bool:
        """Record the prompt id of a request about to be served.

        Args:
            prompt_id: ComfyUI's prompt id; None or blank (a CLI call) counts
                as no workflow.

        Returns:
            True when this call promoted the process (auto, second distinct id).
        """
        if not isinstance(prompt_id, str) or not prompt_id.strip():
            return False
        auto = self.setting() == "auto"
        if not auto:  # a pinned setting never counts workflows (the seed's metadata)
            return False
        with self._lock:
            if prompt_id in self._seen:
                return False
            self._remember(prompt_id)
            if not self._promoted and self._count >= 2:
                self._promoted = True
                return True
            return False

    def observe_captions(self) -> bool:
        """A caption batch is about to run: ``auto`` promotes to throughput now.

        Returns:
            True when this call promoted the process.
        """
        if self.setting() != "auto":
            return False
        with self._lock:
            promoted, self._promoted = self._promoted, True
        return not promoted

    def _remember(self, prompt_id: str) -> None:
        self._seen[prompt_id] = None
        while len(self._seen) > MAX_OBSERVED_WORKFLOWS:
            self._seen.popitem(last=False)
        self._count = min(self._count + 1, MAX_OBSERVED_WORKFLOWS)

    def export_state(self) -> dict[str, Any]:
        """The promotion state as JSON-ready data (for :meth:`import_state` elsewhere)."""
        with self._lock:
            return {
                "version": _STATE_VERSION,
                "promoted": self._promoted,
                "observed_workflow_count": self._count,
                "prompt_ids": list(self._seen),
            }

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Merge an exported state: a promotion is never undone, ids are remembered.

        Args:
            state: What :meth:`export_state` returned (possibly in another process).

        Raises:
            InvalidExecutionStateError: The data is not such a state.
        """
        promoted, count, ids = _checked(state)
        with self._lock:
            for prompt_id in ids:
                if prompt_id not in self._seen:
                    self._seen[prompt_id] = None
            while len(self._seen) > MAX_OBSERVED_WORKFLOWS:
                self._seen.popitem(last=False)
            self._count = min(MAX_OBSERVED_WORKFLOWS, max(self._count, count, len(self._seen)))
            self._promoted = self._promoted or promoted

    def reset(self) -> None:
        """Forget everything (tests; a fresh process starts like this)."""
        with self._lock:
            self._seen.clear()
            self._count = 0
            self._promoted = False

    def metadata(self) -> dict[str, object]:
        """The ``vllm_*`` metadata fields of the request being served."""
        setting = self.setting()
        with self._lock:
            promoted, count = self._promoted, self._count
        mode = setting if setting != "auto" else ("throughput" if promoted else "eager")
        return {
            "vllm_execution_setting": setting,
            "vllm_execution_mode": mode,
            "vllm_auto_promoted": setting == "auto" and promoted,
            "vllm_observed_workflow_count": count if setting == "auto" else 0,
        }


def _checked(state: Mapping[str, Any]) -> tuple[bool, int, list[str]]:
    if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
        raise InvalidExecutionStateError(state, f"a mapping with version {_STATE_VERSION}")
    promoted = state.get("promoted")
    count = state.get("observed_workflow_count")
    ids = state.get("prompt_ids", [])
    if not isinstance(promoted, bool):
        raise InvalidExecutionStateError(state, "'promoted' true or false")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidExecutionStateError(state, "'observed_workflow_count' a whole number >= 0")
    if (
        not isinstance(ids, list)
        or len(ids) > MAX_OBSERVED_WORKFLOWS
        or not all(isinstance(i, str) and 0 < len(i) <= 200 for i in ids)
    ):
        raise InvalidExecutionStateError(
            state, f"'prompt_ids' a list of at most {MAX_OBSERVED_WORKFLOWS} short strings"
        )
    return promoted, min(count, MAX_OBSERVED_WORKFLOWS), ids


_MODES = ExecutionModes()


def execution_modes() -> ExecutionModes:
    """The process-global execution-mode state."""
    return _MODES
