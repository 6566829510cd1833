//===- DCOptimizerOps.cpp - the optimizer ops inside the step -------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;
using namespace dc;

/// Elements this rank holds of a shard or tensor (the local slice of a
/// shard).
static int64_t localElements(Type type) {
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getLocal();
  return cast<ShapedType>(type).getNumElements();
}

static Type elementOf(Type type) {
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getElementType();
  return cast<ShapedType>(type).getElementType();
}

/// `other` has `reference`'s shape and sharding (its element type may
/// differ): the same logical tensor split over the same axes, or the same
/// whole tensor.
static LogicalResult verifySameSlots(Operation *op, Type reference, Type other,
                                     StringRef what) {
  auto refShard = dyn_cast<ShardType>(reference);
  auto otherShard = dyn_cast<ShardType>(other);
  bool same = false;
  if (refShard && otherShard)
    same = refShard.getLogical().getShape() ==
               otherShard.getLogical().getShape() &&
           refShard.getGrid() == otherShard.getGrid() &&
           refShard.getAxes() == otherShard.getAxes() &&
           refShard.getLocal() == otherShard.getLocal();
  else if (!refShard && !otherShard)
    same = cast<ShapedType>(reference).getShape() ==
           cast<ShapedType>(other).getShape();
  if (!same)
    return op->emitOpError()
           << what << " must have the parameter's shape "
           << "and sharding " << reference << ", got " << other;
  return success();
}

static bool isF32OrBF16(Type type) { return type.isF32() || type.isBF16(); }

static LogicalResult verifyMicroBatches(Operation *op, int64_t count) {
  if (count < 1)
    return op->emitOpError()
           << "micro_batches must be at least 1, got " << count;
  return success();
}

/// An expert axis is one the gradient is not split over: ranks along it
/// hold different experts, not parts of one.
static LogicalResult
verifyExpertAxis(Operation *op, std::optional<int64_t> expertAxis, Type grad) {
  if (!expertAxis)
    return success();
  if (*expertAxis < 0)
    return op->emitOpError()
           << "expert_axis must be a grid axis (>= 0), got " << *expertAxis;
  if (auto shard = dyn_cast<ShardType>(grad))
    if (shard.isSplitOver(*expertAxis))
      return op->emitOpError()
             << "expert_axis " << *expertAxis
             << " is an axis the gradient is split over; the ranks along "
                "the expert axis hold different experts, not parts of one";
  return success();
}

static bool isTensorFloat(Type type) {
  return type.isF32() || type.isBF16() || type.isF16();
}

LogicalResult GradSquaresOp::verify() {
  if (!isTensorFloat(elementOf(getGrad().getType())))
    return emitOpError() << "grad must have element type f32, bf16 or f16, "
                         << "got " << elementOf(getGrad().getType());
  if (failed(verifyMicroBatches(*this, getMicroBatches())))
    return failure();
  return verifyExpertAxis(*this, getExpertAxis(), getGrad().getType());
}

LogicalResult GradAccumulateOp::verify() {
  Type grad = getGrad().getType();
  if (!isTensorFloat(elementOf(grad)))
    return emitOpError() << "grad must have element type f32, bf16 or f16, "
                         << "got " << elementOf(grad);
  if (!elementOf(getSum().getType()).isF32())
    return emitOpError() << "the sum must be f32, got "
                         << elementOf(getSum().getType());
  return verifySameSlots(*this, grad, getSum().getType(), "the sum");
}

/// One add an element.
double GradAccumulateOp::getFlops() {
  return static_cast<double>(localElements(getGrad().getType()));
}

double GradSquaresOp::getFlops() {
  return 2.0 * static_cast<double>(localElements(getGrad().getType()));
}

/// The hyperparameters' ranges, as torch.optim.AdamW checks them.
static LogicalResult verifyHyperparameters(Operation *op, double beta1,
                                           double beta2, double eps,
                                           double weightDecay,
                                           double maxGradNorm) {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return op->emitOpError() << "betas must lie in [0, 1), got (" << beta1
                             << ", " << beta2 << ")";
  if (!(eps >= 0) || !std::isfinite(eps))
    return op->emitOpError() << "eps must be finite and >= 0, got " << eps;
  if (!std::isfinite(weightDecay))
    return op->emitOpError()
           << "weight_decay must be finite, got " << weightDecay;
  if (!(maxGradNorm >= 0) || !std::isfinite(maxGradNorm))
    return op->emitOpError() << "max_grad_norm must be finite and >= 0 (0: no "
                                "clipping), got "
                             << maxGradNorm;
  return success();
}

/// The element types dcrt_adamw takes: the parameter and gradient f32,
/// bf16 or f16; moments f32 or bf16; a master f32, and none only where the
/// parameter is f32 or bf16 (its own master).
static LogicalResult verifyElementTypes(Operation *op, Type param, Type grad,
                                        Type moment, Type momentSq,
                                        Type master) {
  if (!isTensorFloat(param) || !isTensorFloat(grad))
    return op->emitOpError() << "the parameter and its gradient must be f32, "
                                "bf16 or f16, got "
                             << param << " and " << grad;
  if (moment != momentSq || !isF32OrBF16(moment))
    return op->emitOpError() << "both moments must be f32 or both bf16, got "
                             << moment << " and " << momentSq;
  if (master && !master.isF32())
    return op->emitOpError() << "a master copy must be f32, got " << master;
  if (!master && !isF32OrBF16(param))
    return op->emitOpError()
           << "a " << param << " parameter needs an f32 master copy";
  return success();
}

void AdamWOp::build(OpBuilder &builder, OperationState &state, Value param,
                    Value grad, Value expAvg, Value expAvgSq, Value master,
                    Value lr, Value step, Value squares, double beta1,
                    double beta2, double eps, double weightDecay,
                    double maxGradNorm, int64_t microBatches) {
  build(builder, state, param.getType(), expAvg.getType(), expAvgSq.getType(),
        master ? master.getType() : Type(), param, grad, expAvg, expAvgSq,
        master, lr, step, squares, builder.getF64FloatAttr(beta1),
        builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
        builder.getF64FloatAttr(weightDecay),
        builder.getF64FloatAttr(maxGradNorm),
        builder.getI64IntegerAttr(microBatches));
}

LogicalResult AdamWOp::verify() {
  Type param = getParam().getType();
  for (auto [value, what] : {std::pair<Value, StringRef>{getGrad(), "grad"},
                             {getExpAvg(), "exp_avg"},
                             {getExpAvgSq(), "exp_avg_sq"},
                             {getMaster(), "master"}})
    if (value && failed(verifySameSlots(*this, param, value.getType(), what)))
      return failure();
  if (failed(verifyElementTypes(
          *this, elementOf(param), elementOf(getGrad().getType()),
          elementOf(getExpAvg().getType()), elementOf(getExpAvgSq().getType()),
          getMaster() ? elementOf(getMaster().getType()) : Type())))
    return failure();
  if (getNewParam().getType() != param ||
      getNewExpAvg().getType() != getExpAvg().getType() ||
      getNewExpAvgSq().getType() != getExpAvgSq().getType() ||
      bool(getNewMaster()) != bool(getMaster()) ||
      (getMaster() && getNewMaster().getType() != getMaster().getType()))
    return emitOpError("results must be the parameter, the moments and the "
                       "master (where there is one), of their operands' "
                       "types");
  if (failed(verifyMicroBatches(*this, getMicroBatches())))
    return failure();
  return verifyHyperparameters(
      *this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
      getEps().convertToDouble(), getWeightDecay().convertToDouble(),
      getMaxGradNorm().convertToDouble());
}

/// About a dozen operations an element (two moments, a square root, a
/// division, the decay).
double AdamWOp::getFlops() {
  return 12.0 * static_cast<double>(localElements(getParam().getType()));
}

//===----------------------------------------------------------------------===//
// Buffer forms
//===----------------------------------------------------------------------===//

/// The slot's attributes: a shard split over one axis (>= 0), every axis
/// (kAllGridAxes), or not sharded (-2, then `local` is the whole tensor).
static LogicalResult verifySlot(Operation *op, int64_t fullNumel,
                                int64_t shardAxis, int64_t local) {
  if (shardAxis < -2)
    return op->emitOpError()
           << "shard_axis must be an axis, " << kAllGridAxes
           << " (every axis) or -2 (not sharded), got " << shardAxis;
  if (fullNumel < 0 || local > fullNumel ||
      (shardAxis == -2 && local != fullNumel))
    return op->emitOpError()
           << "buffers of " << local << " elements cannot be this rank's "
           << "part of " << fullNumel << " elements (shard_axis " << shardAxis
           << ")";
  return success();
}

static LogicalResult verifyScalar(Operation *op, Value value, Type element,
                                  StringRef what) {
  auto type = cast<MemRefType>(value.getType());
  if (type.getRank() != 0 || type.getElementType() != element)
    return op->emitOpError()
           << what << " must be " << MemRefType::get({}, element) << ", got "
           << type;
  return success();
}

LogicalResult GradSquaresIntoOp::verify() {
  Builder b(getContext());
  if (failed(verifyScalar(*this, getSquares(), b.getF64Type(), "squares")) ||
      failed(verifyScalar(*this, getResult(), b.getF64Type(), "result")))
    return failure();
  Type grad = cast<MemRefType>(getGrad().getType()).getElementType();
  if (!isTensorFloat(grad))
    return emitOpError() << "grad must have element type f32, bf16 or f16, "
                         << "got " << grad;
  if (failed(verifyMicroBatches(*this, getMicroBatches())))
    return failure();
  if (std::optional<uint64_t> expertAxis = getExpertAxis()) {
    auto axis = static_cast<int64_t>(*expertAxis);
    auto shardAxis = static_cast<int64_t>(getShardAxis());
    if (axis < 0 || axis == shardAxis || shardAxis == kAllGridAxes)
      return emitOpError()
             << "expert_axis " << axis
             << " must be a grid axis other than the one the gradient is "
                "split over (shard_axis "
             << shardAxis << ")";
  }
  return verifySlot(*this, getFullNumel(), getShardAxis(),
                    localElements(getGrad().getType()));
}

LogicalResult GradAccumulateIntoOp::verify() {
  Type grad = cast<MemRefType>(getGrad().getType()).getElementType();
  if (!isTensorFloat(grad))
    return emitOpError() << "grad must have element type f32, bf16 or f16, "
                         << "got " << grad;
  int64_t local = localElements(getGrad().getType());
  for (Value value : {getSum(), getResult()}) {
    auto type = cast<MemRefType>(value.getType());
    if (!type.getElementType().isF32() || type.getNumElements() != local)
      return emitOpError() << "the sums must be f32 buffers of the gradient's "
                           << local << " elements, got " << type;
  }
  return verifySlot(*this, getFullNumel(), getShardAxis(), local);
}

LogicalResult AdamWIntoOp::verify() {
  Builder b(getContext());
  if (failed(verifyScalar(*this, getLr(), b.getF64Type(), "lr")) ||
      failed(verifyScalar(*this, getStep(), b.getI64Type(), "step")) ||
      failed(verifyScalar(*this, getSquares(), b.getF64Type(), "squares")))
    return failure();
  int64_t local = localElements(getParam().getType());
  for (Value value :
       {getGrad(), getExpAvg(), getExpAvgSq(), getMaster(), getNewParam(),
        getNewExpAvg(), getNewExpAvgSq(), getNewMaster()})
    if (value && localElements(value.getType()) != local)
      return emitOpError() << "every buffer must have the parameter's " << local
                           << " elements, got " << value.getType();
  if (bool(getMaster()) != bool(getNewMaster()))
    return emitOpError("a master buffer needs an output buffer, and only "
                       "then");
  auto element = [](Value value) {
    return value ? cast<MemRefType>(value.getType()).getElementType() : Type();
  };
  if (element(getNewParam()) != element(getParam()) ||
      element(getNewExpAvg()) != element(getExpAvg()) ||
      element(getNewExpAvgSq()) != element(getExpAvgSq()) ||
      element(getNewMaster()) != element(getMaster()))
    return emitOpError("each output buffer must have its input's element "
                       "type");
  if (failed(verifyElementTypes(*this, element(getParam()), element(getGrad()),
                                element(getExpAvg()), element(getExpAvgSq()),
                                element(getMaster()))))
    return failure();
  if (failed(verifySlot(*this, getFullNumel(), getShardAxis(), local)) ||
      failed(verifyMicroBatches(*this, getMicroBatches())))
    return failure();
  return verifyHyperparameters(
      *this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
      getEps().convertToDouble(), getWeightDecay().convertToDouble(),
      getMaxGradNorm().convertToDouble());
}
