"""dc_torch: a PyTorch model's training step as MLIR in dc's input
contract (docs/frontend.md)."""

try:
    import torch  # noqa: F401
except ImportError as e:  # a pyenv/venv python3 ahead of Debian's on PATH
    raise ImportError(
        "dc_torch needs PyTorch; on Debian 12 install python3-torch and run "
        "/usr/bin/python3 (./build.sh setup installs it)") from e

from .errors import ExportError
from .export import Exported, export
from .safetensors import write_safetensors

__all__ = ["ExportError", "Exported", "export", "write_safetensors"]
