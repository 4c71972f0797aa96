"""``comfy-llm modal-bench``: the billable Modal benchmarks (``python -m`` runs :func:`main`).

Built on the client's public entry points; nothing of the worker.
"""

from ._cli import (
    EXECUTION_MODES,
    StoppableTransport,
    TransportBenchTarget,
    add_arguments,
    main,
    run_from_args,
)

__all__ = [
    "EXECUTION_MODES",
    "StoppableTransport",
    "TransportBenchTarget",
    "add_arguments",
    "main",
    "run_from_args",
]
