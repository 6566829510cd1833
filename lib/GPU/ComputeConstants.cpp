//===- ComputeConstants.cpp - small constant tensors made in the step -----===//
//
// A constant tensor bufferizes to a global in the artifact, which lives in
// host memory: the GPU target's kernels cannot read it. Small ones (a
// mask's 0.0, a handful of scales) are made by the step instead, a fill
// for a splat and a pick by index otherwise; larger ones are an error that
// names the constant.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace dc {
#define GEN_PASS_DEF_DCCOMPUTECONSTANTS
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

/// The tensor `values` holds, made by a linalg.generic: element i (row-major
/// flat index) is picked from the values by a chain of selects.
Value pickByIndex(OpBuilder &builder, Location loc, DenseElementsAttr values) {
  auto type = cast<RankedTensorType>(values.getType());
  int64_t rank = type.getRank();
  Value init = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                       type.getElementType());
  SmallVector<AffineMap> maps = {builder.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  SmallVector<Attribute> elements(values.getValues<Attribute>());
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{type}, ValueRange{}, ValueRange{init}, maps,
      iterators, [&](OpBuilder &b, Location l, ValueRange) {
        Value flat = arith::ConstantIndexOp::create(b, l, 0);
        for (int64_t d = 0; d < rank; ++d) {
          Value size = arith::ConstantIndexOp::create(b, l, type.getDimSize(d));
          Value index = linalg::IndexOp::create(b, l, d);
          flat = arith::AddIOp::create(
              b, l, arith::MulIOp::create(b, l, flat, size), index);
        }
        auto scalar = [&](Attribute attr) -> Value {
          return arith::ConstantOp::create(b, l, cast<TypedAttr>(attr));
        };
        Value picked = scalar(elements.back());
        for (int64_t i = static_cast<int64_t>(elements.size()) - 2; i >= 0;
             --i) {
          Value hit =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, flat,
                                    arith::ConstantIndexOp::create(b, l, i));
          picked =
              arith::SelectOp::create(b, l, hit, scalar(elements[i]), picked);
        }
        linalg::YieldOp::create(b, l, picked);
      });
  return generic.getResult(0);
}

struct ComputeConstantsPass
    : public dc::impl::DCComputeConstantsBase<ComputeConstantsPass> {
  using DCComputeConstantsBase::DCComputeConstantsBase;

  void runOnOperation() override {
    SmallVector<arith::ConstantOp> constants;
    getOperation()->walk([&](arith::ConstantOp op) {
      if (isa<RankedTensorType>(op.getType()))
        constants.push_back(op);
    });
    OpBuilder builder(&getContext());
    for (arith::ConstantOp op : constants) {
      auto values = dyn_cast<DenseElementsAttr>(op.getValue());
      auto type = cast<RankedTensorType>(op.getType());
      if (!values || !type.hasStaticShape()) {
        op.emitError() << "dc-compute-constants: a constant tensor of type "
                       << type << " that is not dense and statically shaped";
        return signalPassFailure();
      }
      builder.setInsertionPoint(op);
      Value made;
      if (values.isSplat()) {
        Value init = tensor::EmptyOp::create(
            builder, op.getLoc(), type.getShape(), type.getElementType());
        Value scalar = arith::ConstantOp::create(
            builder, op.getLoc(), values.getSplatValue<TypedAttr>());
        made = linalg::FillOp::create(builder, op.getLoc(), scalar, init)
                   .getResult(0);
      } else if (type.getNumElements() <= maxElements) {
        made = pickByIndex(builder, op.getLoc(), values);
      } else {
        op.emitError() << "a constant tensor of " << type.getNumElements()
                       << " elements in the step (" << type
                       << "): the GPU target makes constants of up to "
                       << maxElements.getValue()
                       << " elements in the step; pass larger ones as a "
                          "parameter or compute them from indices";
        return signalPassFailure();
      }
      op.replaceAllUsesWith(made);
      op.erase();
    }
  }
};

} // namespace
