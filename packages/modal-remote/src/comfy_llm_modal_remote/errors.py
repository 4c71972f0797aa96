"""Errors raised by the Modal side (app, stager, engine, dispatcher).

Errors from the lower packages (profiles, staging, inputs, residency,
backends) cross the wire with their own class, message and attributes; this
module holds only what the Modal side adds. On the wire an error is its
class name (allow-listed, see ``_wire``) plus its message and attributes,
the fields the core error contract rebuilds it from; nothing is pickled.
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command

from .wire._plain import WireDict

__all__ = [
    "DeploymentConflictError",
    "DeploymentMismatchError",
    "GPUUnavailableError",
    "ModalDeployError",
    "ModalRemoteError",
    "ModalAppMissingError",
    "ModalUnavailableError",
    "RemoteCallCancelledError",
    "RemoteExecutionError",
    "RemoteTimeoutError",
    "SnapshotNotVisibleError",
    "WorkerUnsafeError",
]

AUTH_HINT = "modal token new"


class ModalRemoteError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_modal_remote``.

    The action is core's FATAL: unclassified trouble on the Modal side.
    """


class ModalUnavailableError(ModalRemoteError, RuntimeError):
    """The ``modal`` package or Modal credentials are missing on this machine.

    Attributes:
        missing: ``"package"``, ``"credentials"`` (none configured), ``"token"``
            (Modal refused it), ``"network"`` (Modal could not be reached),
            ``"secret"`` or ``"sources"`` (a workspace package the image mounts
            is not installed here).
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, missing: str, detail: str = "") -> None:
        self.missing = missing
        if missing == "package":
            command = install_command("modal")
            fix = f"install it into ComfyUI's Python: `{command}`, then `{AUTH_HINT}`"
            what = "the `modal` package is not installed"
        elif missing == "sources":
            fix = f"install the Modal extra into ComfyUI's Python: `{install_command('modal')}`"
            what = "the Modal app cannot be deployed"
        elif missing == "secret":
            fix = "create the secret as said"
            what = "the app cannot be deployed"
        elif missing == "network":
            fix = "check this machine's network connection (and a proxy, if any) to modal.com"
            what = "Modal could not be reached"
        elif missing == "token":
            fix = (
                f"run `{AUTH_HINT}` (or `modal profile activate <profile>` for another "
                "workspace; set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET where ComfyUI runs)"
            )
            what = "Modal refused this machine's token (wrong, expired or revoked)"
        else:
            fix = f"run `{AUTH_HINT}` once (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)"
            what = "no Modal credentials were found"
        suffix = f" ({detail})" if detail else ""
        super().__init__(
            f"run_on_modal is on but {what}{suffix}. Fix: {fix}, then queue the prompt again; "
            "or switch run_on_modal off to run in this ComfyUI process."
        )


class ModalDeployError(ModalRemoteError, RuntimeError):
    """Deploying the Modal app (building its image) failed.

    Attributes:
        app_name: The app that was being deployed.
        reason: The client's error, one line.
        log_tail: The build log's last lines (may be empty).
    """

    def __init__(self, message: str, *, app_name: str, reason: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.app_name = app_name
        self.reason = reason
        self.log_tail = log_tail


class DeploymentMismatchError(ModalRemoteError, RuntimeError):
    """The deployed app runs other code than this machine would deploy.

    Two machines share an app name (``COMFY_MODAL_APP_NAME``) and the other
    deployed last. The dispatcher redeploys once and runs the request again.

    Attributes:
        expected: This machine's code fingerprint.
        deployed: The fingerprint baked into the running image.
    """

    action = ErrorAction.RETRY

    def __init__(self, expected: str, deployed: str) -> None:
        self.expected = expected
        self.deployed = deployed
        super().__init__(
            f"The Modal app runs code {deployed[:12]} but this machine has {expected[:12]}: "
            "another installation deployed under the same COMFY_MODAL_APP_NAME. It is redeployed "
            "once; if this repeats, give each installation its own COMFY_MODAL_APP_NAME."
        )


class ModalAppMissingError(ModalRemoteError, RuntimeError):
    """The app this node deployed is gone: stopped or deleted outside ComfyUI.

    ``Function.from_name(...).spawn`` raises ``NotFoundError`` once the app is
    stopped (the Modal dashboard, ``modal app stop``). The transport forgets
    its deployment, so the dispatcher's one retry deploys it again.

    Attributes:
        app_name: The missing app.
    """

    action = ErrorAction.RETRY

    def __init__(self, message: str, *, app_name: str) -> None:
        super().__init__(message)
        self.app_name = app_name


class GPUUnavailableError(ModalRemoteError, RuntimeError):
    """No container of the requested GPU type(s) started on Modal in time.

    Attributes:
        gpus: The types tried, in order.
        waited_seconds: How long each was given (``COMFY_MODAL_GPU_WAIT_SECONDS``).
    """

    action = ErrorAction.RETRY

    def __init__(self, message: str, *, gpus: tuple[str, ...], waited_seconds: float) -> None:
        super().__init__(message)
        self.gpus = tuple(gpus)
        self.waited_seconds = waited_seconds


class DeploymentConflictError(ModalRemoteError, RuntimeError):
    """Two machines with different code keep redeploying one app name over each other.

    This machine redeployed over ``deployed`` once already, and that code is
    back: the other machine redeployed too. Every deploy (``recreate``) stops
    the other's containers, so both would cold-start forever; refused instead.

    Attributes:
        app_name: The shared app name.
        expected: This machine's code fingerprint.
        deployed: The other machine's.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, message: str, *, app_name: str, expected: str, deployed: str) -> None:
        super().__init__(message)
        self.app_name = app_name
        self.expected = expected
        self.deployed = deployed


class RemoteCallCancelledError(ModalRemoteError, RuntimeError):
    """A Modal call ended cancelled, but not by this node.

    ``FunctionCall.get()`` raises ``RemoteError('')`` for a call whose input
    was terminated (modal/_runtime/container_io_manager.py:995-999,
    _utils/function_utils.py:527-574): the Modal dashboard, ``modal app stop``
    or another deploy of the app stopped it.

    Attributes:
        what: The call (``"the GPU request"``, ``"chunk 3"``, ...).
    """

    action = ErrorAction.RETRY

    def __init__(self, message: str, *, what: str) -> None:
        super().__init__(message)
        self.what = what


class RemoteTimeoutError(ModalRemoteError, RuntimeError):
    """A Modal input ran past its function's ``timeout`` and Modal ended it.

    ``FunctionCall.get()`` raises ``FunctionTimeoutError`` (a ``TimeoutError``)
    for a TIMEOUT result (modal/_utils/function_utils.py:533-534). It is not a
    network failure and not worth a retry: the same input would run as long
    again, billed. The fan-out names the chunk failed instead of retrying it.

    Attributes:
        what: The call (``"the GPU request"``, ``"chunk 3"``, ...).
        limit_seconds: The function's timeout.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, message: str, *, what: str, limit_seconds: float) -> None:
        super().__init__(message)
        self.what = what
        self.limit_seconds = limit_seconds


class WorkerUnsafeError(ModalRemoteError, RuntimeError):
    """The GPU worker could not get its memory back and retired itself.

    The dispatcher recognises this class and retries once on a fresh worker.

    Attributes:
        reason: What the worker saw (the admission refusal, with numbers).
        promotion_state: The worker's exported vLLM execution state, carried
            into the fresh worker so it does not fall back to eager.
    """

    action = ErrorAction.RETRY

    def __init__(self, reason: str, promotion_state: WireDict | None = None) -> None:
        self.reason = reason
        self.promotion_state = dict(promotion_state or {})
        super().__init__(
            "The Modal GPU worker did not recover its memory and was retired for reuse: "
            f"{reason} The request is retried once on a fresh worker; if it fails again, "
            "choose a larger modal_gpu or a smaller model."
        )


class SnapshotNotVisibleError(ModalRemoteError, RuntimeError):
    """The staged snapshot is not on the worker's Volume even after a reload.

    Attributes:
        repository: ``owner/name``.
        revision: The pinned commit.
    """

    action = ErrorAction.RETRY

    def __init__(self, repository: str, revision: str, storage_root: str) -> None:
        self.repository = repository
        self.revision = revision
        super().__init__(
            f"The snapshot {repository}@{revision[:12]} staged by the ModelStager is not visible "
            f"under {storage_root} on the GPU worker even after reloading the Volume. Fix: check "
            "that COMFY_MODAL_VOLUME_NAME and COMFY_MODAL_REMOTE_STORAGE_ROOT are the same for "
            "the stager and the engine (redeploy the app), then queue the prompt again."
        )


class RemoteExecutionError(ModalRemoteError, RuntimeError):
    """A remote error whose class does not exist on this machine.

    Attributes:
        remote_class: The remote error's ``module.QualName``.
        remote_message: Its message.

    The action stays FATAL: for an unknown class nothing says a retry would help.
    """

    def __init__(self, remote_class: str, remote_message: str) -> None:
        self.remote_class = remote_class
        self.remote_message = remote_message
        super().__init__(f"{remote_class}: {remote_message}")
