"""ComfyUI's face of comfy-llm: the ``ModalLLM`` and ``ComfyLLMCaption`` nodes.

* ``_extension``: what ``comfy_entrypoint`` hands ComfyUI (the node list).
* ``_modal_llm``, ``_caption_node``: the two nodes; ``_node_inputs``,
  ``_caption_inputs``: each node's inputs as one typed record (schema and run);
  ``_inputs``: the widgets they share, defined once.
* ``_run``: a ModalLLM execution → one pipeline request → three strings.
* ``_glue``: progress bar, live text, Cancel and memory hooks of one run.
* ``_host_memory``: ComfyUI's model manager seeing and unloading our models.

Only this subpackage imports ComfyUI; the shared pipeline below it and the
CLI beside it never do.
"""
