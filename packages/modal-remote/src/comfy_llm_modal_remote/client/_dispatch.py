"""The local dispatcher: what the node does when ``run_on_modal`` is on.

    transport ready (deploy on first use; Cancel stops the wait)
    ModelStager: resolve for ``modal`` + stage on the Volume   (no GPU yet)
      it echoes the code fingerprint baked into the deployed image, and the
      engine refuses a request carrying another one: another machine's code
      deployed under this app name → redeploy once, stage and run again; the
      same foreign code back after that redeploy → DeploymentConflictError
      (two machines would stop each other's containers forever)
      the app stopped outside ComfyUI (spawn: NotFoundError) → deploy and run
      once more
    prepare inputs locally with the modal profile's limits     (frames, not videos)
    RemoteEngine on the chosen GPU, progress relayed into the node; until the
      container's first event, "Waiting for a <gpu> container" (a cold start
      pulls the image, a busy GPU type queues)
      a call Modal cancelled (the dashboard, ``modal app stop``) → RemoteCallCancelledError
      WorkerUnsafeError → once more with a fresh affinity key and the
      retired worker's promotion state; when that succeeds the fresh key
      becomes the dispatcher's key (the retired container is gone; the
      promoted one is warm)
    result + Modal telemetry

Every event goes to ``progress`` (the node's bar and live text); when it or
``check_interrupt`` raises (ComfyUI's Cancel), the remote call is cancelled
and the exception propagates unchanged.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable

from comfy_llm_core import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
    reuse_answer,
)
from comfy_llm_inputs import PreparedInputs
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency import InferenceResult, ModalFacts, StagingFacts
from comfy_llm_residency.backend import GenerationSettings

from ..errors import (
    DeploymentConflictError,
    DeploymentMismatchError,
    GPUUnavailableError,
    ModalAppMissingError,
    SnapshotNotVisibleError,
    WorkerUnsafeError,
)
from ..wire._plain import WireDict, as_items, as_mapping
from ..wire._settings import ENGINE_TIMEOUT_SECONDS, STAGER_TIMEOUT_SECONDS
from ..wire._wire import EngineRequest, StageRequest, StageResult, result_from_wire, unwrap
from ._errors import call_outcome, ensure_ready, spawn_checked
from ._fanout_report import Reservation
from ._gpu import gpu_choices, gpu_wait_seconds
from ._transport import RemoteCall, Transport

__all__ = [
    "DEFAULT_AFFINITY_KEY",
    "Dispatcher",
    "RemoteRun",
    "waiting_event",
]

DEFAULT_AFFINITY_KEY = "default"


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteRun:
    """One remote request as the node hands it over.

    Attributes:
        model: ``owner/model[@revision]`` or a curated id.
        prepare: Builds the inputs once the modal profile (its limits) is known.
        settings: Sampling settings.
        gpu: The node's ``modal_gpu``.
        reserve_gb: VRAM to keep free on the worker (None: the worker's default).
        keep_loaded: Keep the model resident on the worker.
        prompt_id: The ComfyUI prompt id.
    """

    model: str
    prepare: Callable[[ModelProfile], PreparedInputs]
    settings: GenerationSettings
    gpu: str
    reserve_gb: float | None = None
    keep_loaded: bool = True
    prompt_id: str | None = None


class Dispatcher:
    """Runs requests on one deployed app through a transport.

    Args:
        transport: Reaches the workers.
        affinity_key: The warm worker pool requests go to.
        poll_seconds: Longest wait for events before checking for Cancel.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        affinity_key: str = DEFAULT_AFFINITY_KEY,
        poll_seconds: float = 0.1,
    ) -> None:
        self.transport = transport
        self.affinity_key = affinity_key
        self.poll_seconds = poll_seconds
        self._staged: dict[str, tuple[float, StageResult]] = {}
        self._displaced: set[str] = set()
        """Foreign fingerprints this dispatcher already redeployed over (finding 11)."""

    def redeploy_over(self, error: DeploymentMismatchError) -> None:
        """Deploy this machine's code on the next ``ensure_ready``, at most once per foreign code.

        Raises:
            DeploymentConflictError: That code was redeployed over before and is
                back: another machine redeploys too (a ping-pong of ``recreate``
                deploys stopping each other's containers).
        """
        if error.deployed in self._displaced:
            app_name = self.transport.app_name
            raise DeploymentConflictError(
                f"The Modal app {app_name!r} is deployed from another machine with other code "
                f"({error.deployed[:12]}; this machine has {error.expected[:12]}), and it "
                "redeployed over this machine's deploy: each deploy stops the other's "
                "containers. Fix: give each installation its own COMFY_MODAL_APP_NAME (or unset "
                "it), or install the same comfy-llm version on both, then queue the prompt again.",
                app_name=app_name,
                expected=error.expected,
                deployed=error.deployed,
            )
        self._displaced.add(error.deployed)
        self._staged.clear()
        self.transport.forget_deployment()

    def forget_staged(self) -> None:
        """Ask the stager again on the next request (after the Volume changed)."""
        self._staged.clear()

    def _stage(
        self, model: str, progress: ProgressCallback, check_interrupt: Callable[[], None]
    ) -> tuple[StageResult, bool]:
        cached = self._staged.get(model)
        if cached is not None and reuse_answer(cached[0], immutable=_immutable(model)):
            return cached[1], True
        request = StageRequest(_request_id(), model).to_wire()
        call = spawn_checked(self.transport, lambda: self.transport.start_stage(request))
        staged = StageResult.from_wire(self._follow(call, progress, check_interrupt, "staging"))
        self._staged[model] = (time.monotonic(), staged)
        return staged, False

    def run(
        self,
        run: RemoteRun,
        *,
        progress: ProgressCallback = ignore_progress,
        check_interrupt: Callable[[], None] = lambda: None,
    ) -> InferenceResult:
        """Stage, prepare, generate (one retry on a retired worker); see the module docstring.

        Raises:
            Exception: The remote error with its original class and message,
                or whatever ``progress``/``check_interrupt`` raised.
        """
        gpu_choices(run.gpu)  # a typo fails here, before anything is staged or spawned
        for deployment in range(2):
            try:
                return self._run_deployed(run, progress, check_interrupt)
            except DeploymentMismatchError as error:
                if deployment:
                    raise
                self.redeploy_over(error)  # the app runs code deployed from elsewhere
            except ModalAppMissingError:
                if deployment:
                    raise
                self._staged.clear()  # stopped outside ComfyUI: deploy again
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_deployed(
        self, run: RemoteRun, progress: ProgressCallback, check_interrupt: Callable[[], None]
    ) -> InferenceResult:
        ensure_ready(self.transport, progress, check_interrupt)
        expected = self.transport.expected_fingerprint()
        staged, reused = self._stage(run.model, progress, check_interrupt)
        if staged.code_fingerprint and expected and staged.code_fingerprint != expected:
            raise DeploymentMismatchError(expected, staged.code_fingerprint)
        profile = ModelProfile.from_dict(staged.profile)
        inputs_wire = run.prepare(profile).to_wire()
        check_interrupt()
        promotion: WireDict | None = None
        key = self.affinity_key
        for attempt in range(2):
            request = EngineRequest(
                request_id=_request_id(),
                profile=staged.profile,
                snapshot=staged.snapshot,
                inputs=inputs_wire,
                settings=run.settings.to_dict(),
                reserve_gb=run.reserve_gb,
                keep_loaded=run.keep_loaded,
                prompt_id=run.prompt_id,
                promotion_state=promotion,
                code_fingerprint=expected,
            )
            started = time.monotonic()
            try:
                answer, gpu = self._generate(request.to_wire(), run, key, progress, check_interrupt)
            except SnapshotNotVisibleError:
                self._staged.pop(run.model, None)  # the Volume changed: stage again next time
                raise
            except WorkerUnsafeError as error:
                if attempt == 1:
                    raise
                promotion = dict(error.promotion_state)
                key = f"retry-{uuid.uuid4().hex[:16]}"
                continue
            run = dataclasses.replace(run, gpu=gpu)  # the one that answered
            if attempt:
                self.affinity_key = key  # later runs go to the promoted, warm container
            result = result_from_wire(answer)
            result = self._with_telemetry(result, run, staged, key, attempt, started, inputs_wire)
            if reused:
                result = _stage_reused(result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _generate(
        self,
        wire: WireDict,
        run: RemoteRun,
        key: str,
        progress: ProgressCallback,
        check_interrupt: Callable[[], None],
    ) -> tuple[WireDict, str]:
        """Spawn on each GPU of ``run.gpu`` in turn until one's container answers (``_gpu``)."""
        choices, wait = gpu_choices(run.gpu), gpu_wait_seconds()
        for index, gpu in enumerate(choices):
            request = {**wire, "request_id": _request_id()}
            call = spawn_checked(
                self.transport,
                lambda: self.transport.start_generate(request, gpu=gpu, affinity_key=key),  # noqa: B023
            )
            progress(waiting_event(gpu))
            try:
                return self._follow(call, progress, check_interrupt, "the GPU request", wait), gpu
            except _NoContainerYet:
                if index + 1 == len(choices):
                    raise GPUUnavailableError(
                        f"No {' then '.join(choices)} container started on Modal within {wait:g} "
                        "s each: that GPU type is out of capacity or not available to this "
                        "workspace. Fix: choose another modal_gpu, give a fallback list such as "
                        "'H100,A100-80GB', or raise COMFY_MODAL_GPU_WAIT_SECONDS, then queue the "
                        "prompt again.",
                        gpus=choices,
                        waited_seconds=wait,
                    ) from None
                progress(
                    ProgressEvent(
                        stage=ProgressStage.ADMISSION,
                        message=f"No {gpu} container on Modal within {wait:g} s: "
                        f"trying {choices[index + 1]}",
                        indeterminate=True,
                    )
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _follow(
        self,
        call: RemoteCall,
        progress: ProgressCallback,
        check_interrupt: Callable[[], None],
        what: str,
        first_event_within: float | None = None,
    ) -> WireDict:
        """Relay the call's events until it answers; cancel it on whatever raises.

        With ``first_event_within``, a call whose container sent nothing by then
        raises :class:`_NoContainerYet` (its GPU is not coming).
        """
        started, heard = time.monotonic(), first_event_within is None
        try:
            while True:
                finished = call.done()
                for item in call.events(0.0 if finished else self.poll_seconds):
                    heard = True
                    progress(ProgressEvent.from_dict(item))
                check_interrupt()
                if not (heard or finished) and time.monotonic() - started > (
                    first_event_within or 0.0
                ):
                    raise _NoContainerYet
                if finished:
                    leftover = call.events(0.0)
                    for item in leftover:
                        progress(ProgressEvent.from_dict(item))
                    if not leftover:
                        break
        except BaseException:
            call.cancel()
            raise
        limit = STAGER_TIMEOUT_SECONDS if what == "staging" else ENGINE_TIMEOUT_SECONDS
        return unwrap(call_outcome(call, what, limit_seconds=limit))

    def _with_telemetry(  # noqa: PLR0917
        self,
        result: InferenceResult,
        run: RemoteRun,
        staged: StageResult,
        key: str,
        retries: int,
        started: float,
        inputs_wire: WireDict,
    ) -> InferenceResult:
        remote_seconds = time.monotonic() - started
        worker = result.metadata.modal_worker
        worker_seconds = worker.modal_worker_seconds if worker is not None else 0.0
        metadata = result.metadata.replace(
            modal=ModalFacts(
                modal_gpu=run.gpu,
                modal_app_name=self.transport.app_name,
                modal_affinity_key=key,
                modal_retry_count=retries,
                modal_staging_downloaded=staged.downloaded,
                modal_manifest_created=staged.manifest_created,
                modal_stage_seconds=staged.seconds,
                modal_stage_reused=False,
                modal_remote_seconds=round(remote_seconds, 3),
                modal_transfer_seconds=round(max(0.0, remote_seconds - worker_seconds), 3),
                modal_request_image_bytes=_image_bytes(inputs_wire),
                **reservation(),
            ),
            # what the local path reports too: a local folder never reaches Modal, and
            # the stager resolves against the Hub; the path is the worker's, relative
            # to its storage root
            staging=StagingFacts(
                snapshot_downloaded=staged.downloaded,
                manifest_created=staged.manifest_created,
                model_source=str(staged.profile.get("source", "hub")),
                snapshot_path=staged.snapshot,
                resolved_offline=False,
            ),
        )
        if run.prompt_id:
            metadata = metadata.replace(prompt_id=run.prompt_id)
        return dataclasses.replace(result, metadata=metadata)


class _NoContainerYet(Exception):
    """No event from the call's container in the wait: its GPU type is not coming."""


def reservation(*, caption: bool = False) -> Reservation:
    """What each GPU container reserves and bills beside its GPU (review r2 finding 14).

    Modal bills the reserved cores and memory per second on top of the GPU, and
    a container idles (billed) for its scaledown window after its last input.
    """
    from ..wire._settings import ENGINE_SCALEDOWN_SECONDS, ModalSettings
    from ._fanout_report import CAPTION_SCALEDOWN_SECONDS

    settings = ModalSettings.from_env()
    return {
        "modal_reserved_cpu": settings.engine_cpu,
        "modal_reserved_memory_mb": settings.engine_memory_mb,
        "modal_idle_window_seconds": (
            CAPTION_SCALEDOWN_SECONDS if caption else ENGINE_SCALEDOWN_SECONDS
        ),
    }


def waiting_event(gpu: str) -> ProgressEvent:
    """Shown from the spawn until the container's first event (cold start, GPU queue).

    An admission stage: the request waits for its GPU, as a local one waits for
    memory (the worker's own first event is its admission).
    """
    return ProgressEvent(
        stage=ProgressStage.ADMISSION,
        message=f"Waiting for a {gpu} container on Modal (a first start pulls the image; "
        "a busy GPU type queues)",
        indeterminate=True,
    )


def _stage_reused(result: InferenceResult) -> InferenceResult:
    """A stage answer reused from earlier: nothing was staged or downloaded for this run."""
    metadata = result.metadata
    modal, staging = metadata.modal, metadata.staging
    assert modal is not None and staging is not None  # _with_telemetry wrote both
    metadata = metadata.replace(
        modal=dataclasses.replace(
            modal,
            modal_stage_reused=True,
            modal_staging_downloaded=False,
            modal_manifest_created=False,
            modal_stage_seconds=0.0,
        ),
        staging=dataclasses.replace(staging, snapshot_downloaded=False, manifest_created=False),
    )
    return dataclasses.replace(result, metadata=metadata)


def _immutable(model: str) -> bool:
    """Pinned to a commit or a curated id: its staging answer never changes."""
    from comfy_llm_profiles import ProfileError, load_curated_registry, parse_reference

    try:
        parsed = parse_reference(model, curated_ids=load_curated_registry().ids)
    except ProfileError:
        return False
    return bool(parsed.is_curated or parsed.is_pinned)


def _request_id() -> str:
    return uuid.uuid4().hex


def _image_bytes(inputs_wire: WireDict) -> int:
    """The bytes of every picture the request ships (images and video frames, as PNG)."""
    parts = map(as_mapping, as_items(inputs_wire["parts"]))
    return sum(len(image) for part in parts if isinstance(image := part.get("image"), bytes))
