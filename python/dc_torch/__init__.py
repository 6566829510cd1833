"""dc_torch: a PyTorch model's training step as MLIR in dc's input
contract (docs/frontend.md)."""

from .errors import ExportError
from .export import Exported, export
from .safetensors import write_safetensors

__all__ = ["ExportError", "Exported", "export", "write_safetensors"]
