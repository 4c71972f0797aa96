"""Workspace-wide pytest setup: the offline test world's fixtures."""

pytest_plugins = ["comfy_llm_testworld.pytest_plugin"]
