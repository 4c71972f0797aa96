"""Model references, Hub inspection, compatibility registries and schema-v2 profiles.

The first step of every request: turn what the user typed (``owner/model``,
``owner/model@revision``, a curated id or a local folder) into an immutable, commit-pinned
:class:`ModelProfile` for one ``comfy_llm_core.ExecutionTarget``, from Hub metadata
only, and record it as ``<storage_root>/profiles/<profile_id>.json``.
"""

from comfy_llm_profiles._curated import (
    CuratedEntry,
    CuratedRegistry,
    load_curated_registry,
    parse_curated_registry,
    parse_reference,
)
from comfy_llm_profiles._decide import (
    CompatibilityDecision,
    available_backends,
    decide,
    estimate_memory_bytes,
)
from comfy_llm_profiles._decide_gguf import GGUF_DTYPE, decide_gguf
from comfy_llm_profiles._engines import ENGINES, EngineSpec, engine_spec
from comfy_llm_profiles._families import FAMILIES, Family
from comfy_llm_profiles._gguf_format import GGML_TYPES, GGUF_LIMITS, GgufFile, GgufLimits, read_gguf
from comfy_llm_profiles._gguf_rules import (
    FILE_TYPES,
    TEXT_ARCHITECTURES,
    VISION_PROJECTORS,
    GgufModel,
    GgufProjector,
    check_model_file,
    check_projector_file,
)
from comfy_llm_profiles._hf_cache import (
    OFFLINE_ENV,
    hf_cache_dir,
    hf_cache_repository_dir,
    hf_cache_snapshot,
    hub_offline,
    list_hf_cache_snapshots,
    snapshot_problem,
)
from comfy_llm_profiles._hub import (
    HUB_TIMEOUT_ENV,
    HubFile,
    HubModelInfo,
    fetch_model_info,
    hub_timeout_seconds,
    install_hub_timeouts,
)
from comfy_llm_profiles._hub_errors import hub_error, hub_request
from comfy_llm_profiles._hub_gguf import (
    DEFAULT_GGUF_QUANTIZATION,
    HubGgufChoice,
    choose_hub_gguf,
    hub_gguf_quantizations,
)
from comfy_llm_profiles._inspect import (
    PICKLE_SUFFIXES,
    RepositoryFile,
    RepositoryInspection,
    inspect_repository,
)
from comfy_llm_profiles._local import (
    FolderScan,
    LocalFile,
    content_pin,
    find_local_folder,
    hash_file,
    hash_files,
    list_model_folders,
    scan_folder,
    scan_hf_cache_snapshot,
)
from comfy_llm_profiles._local_gguf import (
    GGUF_SUFFIX,
    check_gguf_pair,
    find_local_gguf,
    gguf_file_names,
    is_projector_name,
    list_gguf_files,
    scan_gguf_files,
    split_gguf_names,
)
from comfy_llm_profiles._manifest import (
    MANIFEST_DIR,
    load_manifest,
    manifest_path,
    write_manifest,
)
from comfy_llm_profiles._pins import PinnedFacts, load_pinned_facts
from comfy_llm_profiles._profile import (
    COMPATIBILITY_POLICY_VERSION,
    MODALITIES,
    REASONING_PARSERS,
    SCHEMA_VERSION,
    SOURCES,
    BackendOptionValue,
    ModelProfile,
    ProfileLimits,
    compute_profile_id,
    estimated_vram_gb,
)
from comfy_llm_profiles._quantization import QuantizationInfo, detect_quantization
from comfy_llm_profiles._reference import ModelReference, is_commit
from comfy_llm_profiles._registry import (
    REGISTRY_VERSIONS,
    ArchitectureRule,
    CompatibilityRegistry,
    TargetPolicy,
    known_architectures,
    registry_for,
)
from comfy_llm_profiles._resolve import ResolvedProfile, resolve_profile
from comfy_llm_profiles._settings import ProfileSettings, read_settings
from comfy_llm_profiles.errors import (
    EngineUnavailableError,
    GgufRepositoryError,
    HubAccessError,
    HubDataError,
    HubError,
    HubTimeoutError,
    HubUnavailableError,
    LocalFolderError,
    ManifestError,
    ModelNotFoundError,
    OfflineResolutionError,
    ProfileError,
    ProfileValidationError,
    UnreviewedArchitectureError,
    UnsafeGgufError,
    UnsupportedArchitectureError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_GGUF_QUANTIZATION",
    "HubGgufChoice",
    "choose_hub_gguf",
    "hub_gguf_quantizations",
    "GgufRepositoryError",
    "FILE_TYPES",
    "GGML_TYPES",  # backend-llamacpp's tests: the table against the built libggml
    "TEXT_ARCHITECTURES",  # backend-llamacpp's tests: each name in the built libllama
    "VISION_PROJECTORS",  # ... and in the built libmtmd
    "GGUF_DTYPE",
    "GGUF_LIMITS",
    "GGUF_SUFFIX",
    "GgufFile",
    "GgufLimits",
    "GgufModel",
    "GgufProjector",
    "check_gguf_pair",
    "check_model_file",
    "check_projector_file",
    "decide_gguf",
    "find_local_gguf",
    "gguf_file_names",
    "is_projector_name",
    "list_gguf_files",
    "read_gguf",
    "scan_gguf_files",
    "split_gguf_names",
    # targets, references, settings
    "ModelReference",
    "parse_reference",
    "is_commit",
    "ProfileSettings",
    "read_settings",
    # profiles
    "SCHEMA_VERSION",
    "SOURCES",
    "COMPATIBILITY_POLICY_VERSION",
    "MODALITIES",
    "REASONING_PARSERS",
    "BackendOptionValue",
    "ModelProfile",
    "ProfileLimits",
    "compute_profile_id",
    "estimated_vram_gb",
    # resolution
    "ResolvedProfile",
    "resolve_profile",
    "PICKLE_SUFFIXES",
    "RepositoryFile",
    "RepositoryInspection",
    "inspect_repository",
    # models already on disk: local folders and the Hugging Face cache
    "FolderScan",
    "LocalFile",
    "content_pin",
    "find_local_folder",
    "hash_file",
    "hash_files",
    "list_model_folders",
    "scan_folder",
    "scan_hf_cache_snapshot",
    "OFFLINE_ENV",
    "hf_cache_dir",
    "hf_cache_repository_dir",
    "hf_cache_snapshot",
    "hub_offline",
    "list_hf_cache_snapshots",
    "snapshot_problem",
    # Hub metadata (bounded, timed out, checked field by field)
    "HUB_TIMEOUT_ENV",
    "HubFile",
    "HubModelInfo",
    "fetch_model_info",
    "hub_error",
    "hub_request",
    "hub_timeout_seconds",
    "install_hub_timeouts",
    # engines, as data
    "ENGINES",
    "EngineSpec",
    "engine_spec",
    # compatibility
    "REGISTRY_VERSIONS",
    "FAMILIES",
    "Family",
    "ArchitectureRule",
    "CompatibilityRegistry",
    "TargetPolicy",
    "known_architectures",
    "registry_for",
    "CompatibilityDecision",
    "available_backends",
    "decide",
    "estimate_memory_bytes",
    "QuantizationInfo",
    "detect_quantization",
    # curated list
    "CuratedEntry",
    "CuratedRegistry",
    "load_curated_registry",
    "parse_curated_registry",
    # manifests
    "MANIFEST_DIR",
    "PinnedFacts",
    "load_pinned_facts",
    "load_manifest",
    "manifest_path",
    "write_manifest",
    # progress contract
    # errors
    "ProfileError",
    "ProfileValidationError",
    "ManifestError",
    "HubError",
    "HubAccessError",
    "ModelNotFoundError",
    "HubUnavailableError",
    "HubTimeoutError",
    "OfflineResolutionError",
    "LocalFolderError",
    "HubDataError",
    "UnsafeGgufError",
    "UnreviewedArchitectureError",
    "EngineUnavailableError",
    "UnsupportedArchitectureError",
    "__version__",
]
