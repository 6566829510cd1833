//===- TypeSizes.cpp - bytes of dc and builtin value types ----------------===//
#include "dc/Dialect/DC/IR/TypeSizes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

using namespace mlir;

int64_t dc::getElementBytes(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * getElementBytes(complex.getElementType());
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  return 0;
}

int64_t dc::getTypeBytes(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    return getTypeBytes(future.getValue());
  if (auto host = dyn_cast<HostType>(type))
    return getTypeBytes(host.getValue());
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getLocal() * getElementBytes(shard.getElementType());
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !isa<TensorType, MemRefType>(shaped) ||
      !shaped.hasStaticShape())
    return 0;
  return shaped.getNumElements() * getElementBytes(shaped.getElementType());
}
