//===- DCToDCRT.h - dc ops in buffer form to dcrt calls ---------*- C++ -*-===//
//
// The patterns of dc-to-dcrt, for compilers that run them in their own
// conversion to LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LOWERING_DCTODCRT_H
#define DC_LOWERING_DCTODCRT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir {
class LLVMTypeConverter;
class RewritePatternSet;
} // namespace mlir

namespace dc {

/// For each dc.wait and dc.end_backward, which of its futures it passes to
/// dcrt_wait: those whose start op it is the first (in block order) to
/// wait. The futures of one start share one handle, waited once.
using FirstWaits = llvm::DenseMap<mlir::Operation *, llvm::SmallVector<bool>>;

/// The first waits of every start op in `module`; fails (with an error) on a
/// wait of a future made in another block.
mlir::FailureOr<FirstWaits> findFirstWaits(mlir::ModuleOp module);

/// Adds the conversions of dc's buffer-form types (a future becomes
/// {dcrt_future handle, address of its buffer's slot}; #dc.host_memory
/// buffers plain addresses) to `converter`, and the patterns that rewrite
/// every dc op in buffer form into dcrt calls to `patterns`. The patterns
/// keep a reference to `firstWaits`, which must outlive them.
void populateDCToDCRTPatterns(mlir::LLVMTypeConverter &converter,
                              mlir::RewritePatternSet &patterns,
                              const FirstWaits &firstWaits);

} // namespace dc

#endif // DC_LOWERING_DCTODCRT_H
