"""Dev-only offline test world for comfy-llm: a fake Hugging Face Hub and friends.

Kept free of heavy imports (no torch) so importing it, e.g. from the root
conftest's pytest plugin, costs nothing.
"""

from ._fake_hub import FakeHub, RecordedRequest

__version__ = "0.1.0"

__all__ = ["FakeHub", "RecordedRequest"]
