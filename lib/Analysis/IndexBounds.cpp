//===- IndexBounds.cpp - how far a step's integer data may index ----------===//
#include "dc/Analysis/IndexBounds.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace {

/// Walks the values an argument's ids reach and keeps the smallest extent
/// one of them indexes.
class IndexBoundFinder {
public:
  std::optional<dc::IndexBound> run(Value argument) {
    reach(argument);
    for (size_t i = 0; i < reached.size(); ++i) {
      Value value = reached[i];
      for (OpOperand &use : value.getUses())
        follow(use);
    }
    return found;
  }

private:
  void reach(Value value) { reached.insert(value); }

  /// An id used as the index of dimension `dim` of a tensor of `type`,
  /// with `extent` consecutive elements taken from there (a slice's size).
  void indexes(Operation *op, Type type, int64_t dim, int64_t extent = 1) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || dim >= tensor.getRank() || tensor.isDynamicDim(dim) ||
        ShapedType::isDynamic(extent))
      return;
    int64_t bound = tensor.getDimSize(dim) - extent + 1;
    if (!found || bound < found->bound)
      found = dc::IndexBound{bound, op->getLoc()};
  }

  /// The dimension of `offsets` (a slice's) that `value` is, if any.
  static std::optional<int64_t> offsetDim(ArrayRef<OpFoldResult> offsets,
                                          Value value) {
    for (auto [dim, offset] : llvm::enumerate(offsets))
      if (auto asValue = dyn_cast<Value>(offset); asValue == value)
        return dim;
    return std::nullopt;
  }

  static bool isNonNegativeConstant(Value value) {
    APInt constant;
    return matchPattern(value, m_ConstantInt(&constant)) &&
           !constant.isNegative();
  }

  void follow(OpOperand &use) {
    Operation *op = use.getOwner();
    Value value = use.get();
    // Views of the ids, and the ids read out of them.
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp>(op))
      return reach(op->getResult(0));
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      if (value == slice.getSource())
        return reach(slice.getResult());
      if (std::optional<int64_t> dim =
              offsetDim(slice.getMixedOffsets(), value))
        indexes(op, slice.getSourceType(), *dim, slice.getStaticSizes()[*dim]);
      return;
    }
    if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
      if (std::optional<int64_t> dim =
              offsetDim(insert.getMixedOffsets(), value))
        indexes(op, insert.getDestType(), *dim, insert.getStaticSizes()[*dim]);
      return;
    }
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      if (value == extract.getTensor())
        return reach(extract.getResult());
      for (auto [dim, index] : llvm::enumerate(extract.getIndices()))
        if (index == value)
          indexes(op, extract.getTensor().getType(), dim);
      return;
    }
    if (auto insert = dyn_cast<tensor::InsertOp>(op)) {
      for (auto [dim, index] : llvm::enumerate(insert.getIndices()))
        if (index == value)
          indexes(op, insert.getDest().getType(), dim);
      return;
    }
    // An input of a linalg op: its body reads the ids as a block argument.
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (linalgOp.isDpsInput(&use))
        reach(linalgOp.getMatchingBlockArgument(&use));
      return;
    }
    // Integer casts keep the ids; other arithmetic makes something else.
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(op))
      return reach(op->getResult(0));
    // An ignored id replaced by a constant (a loss's ignore_index).
    if (auto select = dyn_cast<arith::SelectOp>(op)) {
      Value other = value == select.getTrueValue() ? select.getFalseValue()
                                                   : select.getTrueValue();
      if (value != select.getCondition() &&
          (reached.contains(other) || isNonNegativeConstant(other)))
        reach(select.getResult());
    }
  }

  llvm::SetVector<Value> reached;
  std::optional<dc::IndexBound> found;
};

} // namespace

std::optional<dc::IndexBound> dc::findIndexBound(BlockArgument argument) {
  return IndexBoundFinder().run(argument);
}
