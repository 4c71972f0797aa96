"""Errors raised by the resident model manager, and the backends' shared ones.

Every error a user can cause names the input, the limit and the fix. The
manager's derive from :class:`ResidencyError`; the four every backend package
raises (not installed, load failed, wrong profile, used after unload), and
the base of an engine's own out-of-memory while generating, derive
from :class:`BackendError` and are defined here once, beside the backend
contract, so every engine speaks the same words. Each also derives from the
built-in exception a caller would naturally catch (``ValueError``,
``MemoryError``, ``RuntimeError``, ``ImportError``).
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command, platform_extra
from comfy_llm_profiles import ENGINES

GIB = 1024**3
"""Bytes in one GiB; every size in a message is given in GiB."""


def format_gib(num_bytes: int | float) -> str:
    """Format a byte count as GiB with two decimals, e.g. ``"4.00 GiB"``.

    Args:
        num_bytes: The size in bytes.

    Returns:
        The human-readable size.
    """
    return f"{num_bytes / GIB:.2f} GiB"


class ResidencyError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_residency``.

    Errors pickle with their attributes (the Modal RemoteEngine ships them to
    the local dispatcher). The action is core's FATAL: unclassified manager
    trouble, so this worker stops trying.
    """


class GenerationSettingsError(ResidencyError, ValueError):
    """A :class:`~comfy_llm_residency.GenerationSettings` field is out of range.

    A request setting, not an environment variable (those raise
    :class:`comfy_llm_core.InvalidSettingError`).

    Attributes:
        field: The name of the offending field (e.g. ``"top_p"``).
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class UnsupportedInputError(ResidencyError, ValueError):
    """The request carries a kind of input the model's engine does not take.

    Every backend declares the modalities it accepts; a request with any other
    is refused before anything is generated (the model stays loaded).

    Attributes:
        modality: The refused modality (``"image"``, ``"video"``, ...).
        engine: The profile's backend (``"transformers"``, ``"mlx_vlm"``, ...).
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, modality: str, engine: str) -> None:
        self.modality = modality
        self.engine = engine
        super().__init__(
            f"The {engine} engine does not take {modality} input; disconnect the "
            f"{modality.upper()} input, or choose a model whose engine takes {modality}."
        )


class TargetMismatchError(ResidencyError, ValueError):
    """A profile resolved for one execution target was given to another.

    Attributes:
        profile_id: The refused profile.
        profile_target: The target the profile was resolved for.
        manager_target: The target of the manager that refused it.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, profile_id: str, profile_target: str, manager_target: str) -> None:
        super().__init__(
            f"Model profile {profile_id!r} was resolved for execution target "
            f"{profile_target!r} and cannot be loaded by the {manager_target!r} manager. "
            f"Fix: re-resolve the model for this target ({manager_target!r}) from its "
            "original Hugging Face reference."
        )
        self.profile_id = profile_id
        self.profile_target = profile_target
        self.manager_target = manager_target


class InsufficientMemoryError(ResidencyError, MemoryError):
    """Admission refused a cold load: estimate plus reserve does not fit.

    Attributes:
        profile_id: The profile that was refused.
        needed_bytes: The profile's memory estimate.
        reserve_bytes: The free memory the caller asked to keep.
        available_bytes: Memory available at the last reading.
        total_bytes: Total memory of the device.
        device: The device the probe measured (e.g. ``"cuda:0"``).
        evicted_profiles: Resident profiles unloaded while trying to make room.
        waited_seconds: How long the manager polled for memory to come back.
        recovery_timed_out: True when models were evicted and the memory did
            not come back within the recovery timeout (the process may be
            leaking memory; the manager marks itself unsafe for reuse).
    """

    # Lower the reserve or pick a smaller model. An instance whose evicted memory
    # never came back is FATAL: the worker is unsafe (see __init__).
    action = ErrorAction.FIX_INPUT

    def __init__(
        self,
        *,
        profile_id: str,
        repository: str,
        needed_bytes: int,
        reserve_bytes: int,
        available_bytes: int,
        total_bytes: int,
        device: str,
        reserve_name: str,
        evicted_profiles: tuple[str, ...] = (),
        waited_seconds: float = 0.0,
        recovery_timed_out: bool = False,
    ) -> None:
        required = needed_bytes + reserve_bytes
        steps = ["after asking ComfyUI to free memory"]
        if evicted_profiles:
            steps.append(f"evicting {len(evicted_profiles)} resident LLM(s)")
        if waited_seconds > 0:
            steps.append(f"waiting {waited_seconds:.1f} s for memory to come back")
        super().__init__(
            f"Not enough memory on {device} to load {repository} ({profile_id}): "
            f"needed {format_gib(needed_bytes)} for the model + "
            f"{format_gib(reserve_bytes)} reserve = {format_gib(required)}, "
            f"but only {format_gib(available_bytes)} of {format_gib(total_bytes)} total "
            f"is available ({', '.join(steps)}). "
            f"Fix: lower {reserve_name}, choose a smaller or quantized model, "
            "or close other applications using this memory."
        )
        self.profile_id = profile_id
        self.needed_bytes = needed_bytes
        self.reserve_bytes = reserve_bytes
        self.available_bytes = available_bytes
        self.total_bytes = total_bytes
        self.device = device
        self.evicted_profiles = evicted_profiles
        self.waited_seconds = waited_seconds
        self.recovery_timed_out = recovery_timed_out
        if recovery_timed_out:
            self.action = ErrorAction.FATAL


class MemoryProbeError(ResidencyError, RuntimeError):
    """The memory probe cannot measure its device (e.g. no CUDA device)."""


class ReentrantCallError(ResidencyError, RuntimeError):
    """The manager was called again from inside its own request.

    A progress or token callback must not start another request or unload
    models on the manager that is calling it: the model it would touch is in
    the middle of generating.
    """


# -- the backend vocabulary: what every backend package raises, defined once ----------------
# The words come from the engine table (``comfy_llm_profiles.ENGINES``): its label and the
# extra that installs it. An engine the table does not know (an old wire message, a test's
# sample) is named as given.


def _label(engine: str) -> str:
    spec = ENGINES.get(engine)
    return spec.label if spec else engine


class BackendError(ComfyLLMError):
    """Base of the errors every backend package shares (re-exported by each)."""


class EngineNotInstalledError(BackendError, ImportError):
    """An engine, or the package that loads it, cannot be imported here.

    Attributes:
        engine: The engine (a name in ``ENGINES``).
        module: The module that failed to import.
        reason: The import error's message.
    """

    def __init__(self, engine: str, module: str, reason: str) -> None:
        self.engine = engine
        self.module = module
        self.reason = reason
        spec = ENGINES.get(engine)
        install = spec.install_hint if spec else install_command(platform_extra())
        super().__init__(
            f"The {_label(engine)} engine needs {module!r}, which cannot be imported here "
            f"({reason}). Install it into ComfyUI's Python: {install}.",
            name=module,
        )


class ModelLoadError(BackendError, RuntimeError):
    """The engine could not load the processor or the model from the snapshot.

    FATAL, as its base: this engine installation cannot load the snapshot.

    Attributes:
        engine: The engine that tried.
        profile_id: The profile being loaded.
        path: The snapshot directory.
        what: ``processor`` or ``model``.
        reason: The underlying error's message.
    """

    def __init__(self, engine: str, profile_id: str, path: str, what: str, reason: str) -> None:
        self.engine = engine
        self.profile_id = profile_id
        self.path = path
        self.what = what
        self.reason = reason
        label = _label(engine)
        super().__init__(
            f"{label} could not load the {what} of profile {profile_id} from {path}: {reason}. "
            f"Check that this {label} version supports the architecture (no remote code is "
            "run) and that the snapshot is complete; delete the snapshot directory to "
            "download it again if its files are damaged."
        )


class UnsupportedBackendError(BackendError, ValueError):
    """A backend package was handed a profile it does not load.

    Attributes:
        profile_id: The profile that was refused.
        field: ``backend`` or ``execution_target``.
        value: What the profile says.
        expected: What this backend package loads.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, profile_id: str, field: str, value: str, expected: str) -> None:
        self.profile_id = profile_id
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(
            f"Profile {profile_id} has {field}={value}, but this backend package loads only "
            f"profiles with {field}={expected}. Load it with comfy_llm_residency.create_backend "
            "(which picks the package of the profile's engine), or resolve the model again for "
            "this execution target (a profile of one target is never loaded by another)."
        )


class BackendUnloadedError(BackendError, RuntimeError):
    """``generate`` was called after ``unload``.

    Attributes:
        profile_id: The profile the backend held.
    """

    # The manager loads a fresh backend on the next request.
    action = ErrorAction.RETRY

    def __init__(self, profile_id: str) -> None:
        self.profile_id = profile_id
        super().__init__(
            f"The backend of profile {profile_id} was unloaded; create a new backend "
            "(the resident model manager loads it again on the next request)."
        )


class DeviceOutOfMemoryError(BackendError, MemoryError):
    """The device ran out of memory while a loaded model generated (not at admission).

    Each engine raises its own subclass, with the facts it has; this base is
    what a caller catches without knowing the engine. comfy-node hands it to
    ComfyUI as ComfyUI's own out-of-memory class, so ComfyUI unloads its models
    as it does for any out-of-memory (execution.py, ``is_oom``).
    """

    # Memory another program holds may be freed before the next run.
    action = ErrorAction.RETRY
