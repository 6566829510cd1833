"""The one torch.library namespace `dc` of dc_torch's opaque ops: torch
allows a single DEF library per namespace in a process, so attention.py and
moe.py both define their ops on this one."""

import torch

_library = None


def dc_library():
    global _library
    if _library is None:
        _library = torch.library.Library("dc", "DEF")
    return _library
