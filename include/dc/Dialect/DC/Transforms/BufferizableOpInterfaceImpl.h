//===- BufferizableOpInterfaceImpl.h - dc bufferization models -*- C++ -*-===//
//
// The dc types and ops take part in upstream One-Shot Bufferize through
// external models, registered like upstream's own
// (`linalg::registerBufferizableOpInterfaceExternalModels`).
//
//===----------------------------------------------------------------------===//
#ifndef DC_DIALECT_DC_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define DC_DIALECT_DC_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

#include "mlir/IR/Types.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace dc {

/// The buffer form of a dc value type: a static tensor is a memref with the
/// identity layout, a !dc.shard its local buffer memref<local x T>, a
/// !dc.host value that buffer in #dc.host_memory and a future a future of
/// the buffer form. Buffers are their own buffer form.
mlir::Type getBufferFormType(mlir::Type type);

/// Makes !dc.shard and !dc.host tensor-like (TensorLikeType) and the dc ops
/// bufferizable (BufferizableOpInterface).
void registerBufferizableOpInterfaceExternalModels(
    mlir::DialectRegistry &registry);

} // namespace dc

#endif // DC_DIALECT_DC_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
