"""trace._host_reads on hand-made graphs (torch 1.13 cannot make such
graphs by tracing, torch 2.x does): a value read on the host that depends
on constants alone is dropped with the ops that only fed it (a diamond of
them, each erased once); one that depends on an input is refused."""

import torch
import torch.fx as fx

from dc_torch import trace
from dc_torch.errors import ExportError

aten = torch.ops.aten


class Params:
    trainable = [("w", None)]
    frozen = []


def graph(read_input):
    g = fx.Graph()
    w = g.placeholder("w")
    g.placeholder("tokens")
    g.placeholder("targets")
    c = g.call_function(aten.arange.default, (4,))
    x = g.call_function(aten.mul.Tensor, (w if read_input else c, 2))
    y = g.call_function(aten.add.Tensor, (x, 1))
    z = g.call_function(aten.sub.Tensor, (x, 1))
    d = g.call_function(aten.mul.Tensor, (y, z))
    g.call_function(aten._local_scalar_dense.default, (d,))
    g.output(g.call_function(aten.add.Tensor, (w, 1)))
    return fx.GraphModule(torch.nn.Module(), g)


gm = graph(read_input=False)
trace._host_reads(gm, Params(), 1)
print("kept:", " ".join(n.name for n in gm.graph.nodes))
try:
    trace._host_reads(graph(read_input=True), Params(), 1)
    print("not refused")
except ExportError as e:
    print("refused:", e)
