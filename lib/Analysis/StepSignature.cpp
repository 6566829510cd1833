//===- StepSignature.cpp - a training step's parameters and results -------===//
#include "dc/Analysis/StepSignature.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace dc;

namespace {

/// A tensor or shard type with its element type replaced (a gradient may
/// differ from its parameter only there).
Type withElementType(Type type, Type element) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(element);
  if (auto shard = dyn_cast<ShardType>(type))
    return ShardType::get(shard.getContext(), shard.getLogical().clone(element),
                          shard.getGrid(), shard.getAxes(), shard.getLocal());
  return type;
}

/// `type` without its dc.host wrapper.
Type inDeviceMemory(Type type) {
  if (auto host = dyn_cast<HostType>(type))
    return host.getValue();
  return type;
}

Type elementTypeOf(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getElementType();
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getElementType();
  return type;
}

} // namespace

LogicalResult dc::verifyStepSignature(func::FuncOp fn) {
  llvm::DenseMap<int64_t, unsigned> paramArgument;
  for (BlockArgument arg : fn.getArguments())
    if (auto param =
            fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName))
      paramArgument.try_emplace(param.getId(), arg.getArgNumber());
  llvm::DenseMap<int64_t, unsigned> gradResult;
  for (auto [i, resultType] : llvm::enumerate(fn.getResultTypes())) {
    Type type = resultType;
    auto grad = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName);
    if (!grad)
      continue;
    int64_t id = grad.getParam();
    auto argument = paramArgument.find(id);
    if (argument == paramArgument.end())
      return fn.emitError()
             << "result #" << i << " is the gradient of parameter id " << id
             << ", which no argument declares";
    if (auto [first, inserted] = gradResult.try_emplace(id, i); !inserted)
      return fn.emitError() << "results #" << first->second << " and #" << i
                            << " are both the gradient of parameter id " << id;
    // Where they live is not the signature's concern: a parameter kept in
    // host memory (dc-offload-params) has its gradient on the device, and
    // the manifest refuses results in host memory itself.
    Type paramType = inDeviceMemory(fn.getArgument(argument->second).getType());
    type = inDeviceMemory(type);
    Type paramElement = elementTypeOf(paramType);
    Type gradElement = elementTypeOf(type);
    if (!isa<FloatType>(paramElement) || !isa<FloatType>(gradElement))
      return fn.emitError()
             << "result #" << i << " (" << type
             << ") is the gradient of argument #" << argument->second << " ("
             << paramType << "): both must be floating point";
    if (withElementType(type, paramElement) != paramType)
      return fn.emitError()
             << "result #" << i << " has type " << type
             << ", but it is the gradient of parameter id " << id
             << ", argument #" << argument->second << " of type " << paramType
             << " (a gradient has its parameter's shape and "
                "sharding)";
  }
  return success();
}
