//===- DCInterfaces.td - dc op interfaces ---------------------*- tablegen -*-===//
#ifndef DC_INTERFACES_TD
#define DC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DC_AsyncStartOpInterface : OpInterface<"AsyncStartOpInterface"> {
  let cppNamespace = "::dc";
  let description = [{
    An op that starts asynchronous transfers (collectives, host copies) and
    returns a `!dc.future` for each: every future is taken by one `dc.wait`
    (or `dc.end_backward`), and the op reads its operands until then. The
    passes, the memory timeline and the schedule verifier find start ops
    through this interface.
  }];
  let methods = [
    InterfaceMethod<"The futures of the transfers this op starts.",
      "::mlir::ResultRange", "getFutures", (ins), [{}],
      [{ return $_op->getResults(); }]>,
  ];
}

def DC_ComputeOpInterface : OpInterface<"ComputeOpInterface"> {
  let cppNamespace = "::dc";
  let description = [{
    A dc op on tensors that computes, as a kernel or a library call of the
    step (fused attention, the routing of a mixture of experts), where
    every other dc op moves or accounts for data. The cost model prices it
    like the linalg ops beside it: from its FLOPs, on the matrix units when
    it has a matrix-product element type, and from the bytes of its
    operands and results; a measured profile times it under its own key.

    An op whose results are a function of its operands, bit for bit, on
    every lowering (`isReproducible`) may be computed again by
    `dc-rematerialize` instead of keeping its results.
  }];
  let methods = [
    InterfaceMethod<"The floating-point operations the op performs.",
      "double", "getFlops", (ins)>,
    InterfaceMethod<[{The element type of the op's matrix products, which
      run on the matrix units; null when the op has none.}],
      "::mlir::Type", "getMatmulElementType", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<[{True if running the op again on the same operands
      gives bit-identical results on every lowering (no sum whose order
      depends on timing, such as one made with atomics).}],
      "bool", "isReproducible", (ins), [{}],
      [{ return true; }]>,
  ];
}

#endif // DC_INTERFACES_TD
