"""What an import that cannot be done says: one line, exit 2 (a BadInput), no partial DIR."""

from __future__ import annotations

from ..errors import BadInput

EXTRA = "pip install -e '.[import]'  (torch==2.13.0, transformers, safetensors)"


class ImportFailed(BadInput):
    """The model cannot be imported: no config.json, no plan, heads that do not split, an
    ATen op without a registry class, a corrupt weight file, ..."""

    kind = "import"


class MissingExtra(BadInput):
    kind = "import"

    def __init__(self, module: str):
        super().__init__(f"tprules import needs {module}, which is not installed: {EXTRA}")

