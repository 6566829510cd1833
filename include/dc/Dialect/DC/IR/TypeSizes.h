//===- TypeSizes.h - bytes of dc and builtin value types --------*- C++ -*-===//
//
// The one place that says how many bytes a value of a type occupies: the
// memory timeline, the cost model, the passes and the lowering all ask here.
//
//===----------------------------------------------------------------------===//
#ifndef DC_DIALECT_DC_IR_TYPESIZES_H
#define DC_DIALECT_DC_IR_TYPESIZES_H

#include "mlir/IR/Types.h"

#include <cstdint>

namespace dc {

/// Bytes of one element: an integer or float rounded up to whole bytes, 8
/// for index, both parts of a complex number; 0 for other types.
int64_t getElementBytes(mlir::Type type);

/// Bytes of a statically shaped tensor or memref, of a !dc.shard's local
/// slice, and of the value of a !dc.host or !dc.future; 0 for other types.
int64_t getTypeBytes(mlir::Type type);

} // namespace dc

#endif // DC_DIALECT_DC_IR_TYPESIZES_H
