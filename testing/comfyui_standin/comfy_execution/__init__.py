"""Stand-in for ComfyUI's comfy_execution package (tests only)."""
