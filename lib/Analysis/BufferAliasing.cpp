//===- BufferAliasing.cpp - which values name one buffer ------------------===//
#include "dc/Analysis/BufferAliasing.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace dc;

SmallVector<Value> dc::getBufferViews(Value value) {
  SmallVector<Value> views{value};
  llvm::DenseSet<Value> seen{value};
  for (size_t next = 0; next < views.size(); ++next) {
    for (OpOperand &use : views[next].getUses()) {
      Operation *user = use.getOwner();
      SmallVector<Value> aliases;
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
              tensor::BitcastOp, tensor::ExtractSliceOp>(user) &&
          use.getOperandNumber() == 0)
        aliases.push_back(user->getResult(0));
      else if (auto loop = dyn_cast<LoopLikeOpInterface>(user))
        if (OpResult result = loop.getTiedLoopResult(&use))
          aliases.push_back(result);
      for (Value alias : aliases)
        if (seen.insert(alias).second)
          views.push_back(alias);
    }
  }
  return views;
}

SmallVector<ReleaseOp>
dc::getReleasesInOrder(Value value,
                       const llvm::DenseMap<Operation *, size_t> &index) {
  SmallVector<ReleaseOp> releases;
  for (Operation *user : value.getUsers())
    if (auto release = dyn_cast<ReleaseOp>(user))
      releases.push_back(release);
  llvm::sort(releases, [&](ReleaseOp a, ReleaseOp b) {
    return index.lookup(a) < index.lookup(b);
  });
  return releases;
}

bool dc::isReloadedValue(Value value) {
  auto wait = value.getDefiningOp<WaitOp>();
  return wait && wait.getFuture().getDefiningOp<ReloadStartOp>();
}

/// The top-level op after which `value`'s buffer is no longer read or
/// written (see insertReloadReleases), or null if it escapes the step.
Operation *
dc::getLastBufferUse(Block &body, Value value,
                     const llvm::DenseMap<Operation *, size_t> &index) {
  // The def comes before every use, indexed or not.
  Operation *last = value.getDefiningOp();
  int64_t lastIndex = -1;
  auto later = [&](Operation *op) {
    auto it = index.find(op);
    int64_t at = it == index.end() ? -1 : static_cast<int64_t>(it->second);
    if (at > lastIndex) {
      last = op;
      lastIndex = at;
    }
  };
  for (Value view : getBufferViews(value)) {
    for (OpOperand &use : view.getUses()) {
      Operation *user = use.getOwner();
      if (isa<ReleaseOp>(user) && view == value)
        continue;
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top)
        continue;
      if (top->hasTrait<OpTrait::IsTerminator>())
        return nullptr; // returned: the caller's from here
      later(top);
      // A start op reads its operands until its futures are waited.
      for (Value result : top->getResults())
        if (isa<FutureType>(result.getType()))
          for (Operation *waiter : result.getUsers())
            if (Operation *wait = body.findAncestorOpInBlock(*waiter))
              later(wait);
    }
  }
  return last;
}
