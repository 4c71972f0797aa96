"""``python -m comfy_llm_modal_remote.bench``."""

import sys

from ._cli import main

sys.exit(main())
