"""The one exception export raises for bad input, with a location."""


class ExportError(Exception):
    """What cannot be exported, naming the ATen op, the FX node and the
    model's source line where torch recorded one."""


def where(node):
    """'node %name (aten op) at file:line: source' for an FX node."""
    text = f"FX node '{node.name}' ({node_target(node)})"
    frame = node.meta.get("dc_frame")
    if frame:
        file, line, func, source = frame
        text += f", model source {file}:{line} in {func}"
        if source:
            text += f": {source}"
    elif node.meta.get("dc_backward"):
        text += ", in the backward pass"
    return text


def node_target(node):
    target = node.target
    return str(target) if not callable(target) or hasattr(
        target, "_schema") else getattr(target, "__name__", str(target))
