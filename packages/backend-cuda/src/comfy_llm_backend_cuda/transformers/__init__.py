"""The Transformers engine: ``AutoModelForImageTextToText`` in this process, streamed per token.

Private modules, one idea each: ``_backend`` (load, generate, unload),
``_batch`` (which requests share one ``generate``), ``_generate`` (the
generation config and the streamed call), ``_messages`` (the prompt's
token ids), ``_constraint`` (structured output's logits processor) and
``_engine`` (importing torch/transformers and placing the model).

It shares only the package's root modules (``_processor``, ``_stream``,
``errors``) with :mod:`comfy_llm_backend_cuda.vllm`; the two never import
each other (an import-linter contract).
"""

from ._backend import ATTENTION_IMPLEMENTATION, TransformersBackend

__all__ = ["ATTENTION_IMPLEMENTATION", "TransformersBackend"]
