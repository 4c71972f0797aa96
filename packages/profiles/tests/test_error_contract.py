"""Each public error's category is part of its contract (the CLI and the Modal wire read it).

Categories are declared once on a family base and inherited; this table pins
what every public class ends up with, so a moved declaration cannot change one.
"""

from __future__ import annotations

import pytest
from comfy_llm_core import ErrorAction
from comfy_llm_profiles import errors
from comfy_llm_profiles.errors import GatedModelError, HubStatusError, ModelNotFoundError

FIX, RETRY, FATAL = ErrorAction.FIX_INPUT, ErrorAction.RETRY, ErrorAction.FATAL

ACTIONS = {
    "ProfileError": FIX,
    "InvalidModelReferenceError": FIX,
    "CuratedRegistryError": FIX,
    "ProfileValidationError": FIX,
    "ManifestError": FATAL,
    "ManifestConflictError": FATAL,
    "HubAccessError": RETRY,
    "ModelNotFoundError": FIX,
    "ModelRevisionNotFoundError": FIX,
    "GatedModelError": FIX,
    "HubUnavailableError": RETRY,
    "HubTimeoutError": RETRY,
    "OfflineResolutionError": FIX,
    "HubStatusError": FIX,
    "HubAuthenticationError": FIX,
    "HubDataError": FIX,
    "UnsafeHubPathError": FIX,
    "ModelRejectedError": FIX,
    "MissingConfigError": FIX,
    "InvalidConfigError": FIX,
    "UnsafeWeightsError": FIX,
    "DownloadTooLargeError": FIX,
    "SecurityScanError": FIX,
    "RemoteCodeError": FIX,
    "UnsupportedArchitectureError": FIX,
    "UnsupportedQuantizationError": FIX,
    "LocalFolderError": FIX,
}


def test_every_public_error_is_in_the_table() -> None:
    classes = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert classes == set(ACTIONS)


@pytest.mark.parametrize(("name", "action"), sorted(ACTIONS.items()))
def test_each_public_error_keeps_its_category(name: str, action: ErrorAction) -> None:
    assert getattr(errors, name).action is action


def test_an_unavailable_hub_status_is_retried() -> None:
    error = HubStatusError("o/m", None, status=503, kind="unavailable", url="u", endpoint="e")
    assert error.action is RETRY


@pytest.mark.parametrize("sent", [False, True])
def test_token_advice_errors_share_one_constructor(sent: bool) -> None:
    where = ("o/m", "main", "modal", "add HF_TOKEN to the Modal secret", sent)
    missing, gated = ModelNotFoundError(*where), GatedModelError(*where)
    for error in (missing, gated):
        assert vars(error) == {
            "target": "modal",
            "token_provided": sent,
            "repository": "o/m",
            "revision": "main",
        }
    if sent:
        assert str(missing).endswith("if it is private, the token that was sent cannot see it.")
        assert "has no access: accept the model's terms" in str(gated)
    else:
        assert str(missing).endswith("need a token: add HF_TOKEN to the Modal secret.")
        assert str(gated).endswith(
            "for target 'modal': accept the model's terms on its Hub page, then add HF_TOKEN "
            "to the Modal secret."
        )
