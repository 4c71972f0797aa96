"""Stand-in for ``comfy_api.latest._input_impl``."""
