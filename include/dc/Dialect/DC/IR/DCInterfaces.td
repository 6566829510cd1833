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

#endif // DC_INTERFACES_TD
