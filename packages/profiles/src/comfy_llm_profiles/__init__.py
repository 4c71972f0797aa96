"""Model references, Hub inspection, compatibility registries and schema-v2 profiles.

The first step of every request: turn what the user typed (``owner/model``,
``owner/model@revision``, a curated id or a local folder) into an immutable, commit-pinned
:class:`ModelProfile` for one ``comfy_llm_core.ExecutionTarget``, from Hub metadata
only, and record it as ``<storage_root>/profiles/<profile_id>.json``.
"""

from comfy_llm_profiles._batching import engine_batch_size
from comfy_llm_profiles._curated import CuratedEntry, load_curated_registry, parse_reference
from comfy_llm_profiles._decide import available_backends, decide, estimate_memory_bytes
from comfy_llm_profiles._decide_gguf import decide_gguf
from comfy_llm_profiles._engines import ENGINES, EngineSpec, engine_spec
from comfy_llm_profiles._families import Family
from comfy_llm_profiles._gguf_rules import (
    GgufModel,
    GgufProjector,
    check_model_file,
    check_projector_file,
)
from comfy_llm_profiles._hf_cache import (
    hf_cache_repository_dir,
    hub_offline,
    list_hf_cache_snapshots,
)
from comfy_llm_profiles._hub import (
    HubFile,
    fetch_model_info,
    hub_timeout_seconds,
    install_hub_timeouts,
)
from comfy_llm_profiles._hub_errors import hub_error, hub_request
from comfy_llm_profiles._hub_gguf import hub_gguf_quantizations
from comfy_llm_profiles._inspect import RepositoryFile
from comfy_llm_profiles._local import (
    FolderScan,
    content_pin,
    find_local_folder,
    hash_file,
    hash_files,
    list_model_folders,
    scan_folder,
    scan_hf_cache_snapshot,
)
from comfy_llm_profiles._local_gguf import (
    check_gguf_pair,
    find_local_gguf,
    gguf_file_names,
    list_gguf_files,
    scan_gguf_files,
)
from comfy_llm_profiles._pins import load_pinned_facts
from comfy_llm_profiles._profile import ModelProfile
from comfy_llm_profiles._registry import registry_for
from comfy_llm_profiles._resolve import ResolvedProfile, resolve_profile
from comfy_llm_profiles._settings import read_settings
from comfy_llm_profiles.errors import (
    LocalFolderError,
    OfflineResolutionError,
    ProfileError,
    UnsafeGgufError,
)

__version__ = "0.1.0"

__all__ = [
    "CuratedEntry",
    "ENGINES",
    "EngineSpec",
    "Family",
    "FolderScan",
    "GgufModel",
    "GgufProjector",
    "HubFile",
    "LocalFolderError",
    "ModelProfile",
    "OfflineResolutionError",
    "ProfileError",
    "RepositoryFile",
    "ResolvedProfile",
    "UnsafeGgufError",
    "available_backends",
    "check_gguf_pair",
    "check_model_file",
    "check_projector_file",
    "content_pin",
    "decide",
    "decide_gguf",
    "engine_batch_size",
    "engine_spec",
    "estimate_memory_bytes",
    "fetch_model_info",
    "find_local_folder",
    "find_local_gguf",
    "gguf_file_names",
    "hash_file",
    "hash_files",
    "hf_cache_repository_dir",
    "hub_error",
    "hub_gguf_quantizations",
    "hub_offline",
    "hub_request",
    "hub_timeout_seconds",
    "install_hub_timeouts",
    "list_gguf_files",
    "list_hf_cache_snapshots",
    "list_model_folders",
    "load_curated_registry",
    "load_pinned_facts",
    "parse_reference",
    "read_settings",
    "registry_for",
    "resolve_profile",
    "scan_folder",
    "scan_gguf_files",
    "scan_hf_cache_snapshot",
]
