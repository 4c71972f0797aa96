"""The deployment's code fingerprint: one digest of everything a deploy bakes in.

Both ends read it: the client compares it with what the deployed app echoes
(and redeploys over other code), and the app bakes it into the image's
environment, so a worker refuses a request from other code. It lives on the
wire, below both, so neither end imports the other for it.
"""

from __future__ import annotations

import hashlib
import json

from . import _image
from ._settings import ModalSettings

__all__ = ["code_fingerprint"]


def code_fingerprint() -> str:
    """A digest of what a deployment bakes in.

    The image lock, the settings the image's environment carries, and every
    file the image's source mounts upload (:func:`local_source_files`, the
    mounts' own ignore rule: modules and data files such as
    ``curated_profiles.json``): a change of any of them redeploys. A package
    that is not installed fails here, before any deploy, with the install to run.
    """
    lock = _image._lock()  # looked up when called: a test swaps the lock
    digest = hashlib.sha256(json.dumps(lock, sort_keys=True).encode())
    digest.update(json.dumps(ModalSettings.from_env().container_env(), sort_keys=True).encode())
    for local, remote in _image.local_source_files(lock["local_packages"]):
        digest.update(remote.encode() + b"\0")
        digest.update(hashlib.sha256(local.read_bytes()).digest())
    return digest.hexdigest()
