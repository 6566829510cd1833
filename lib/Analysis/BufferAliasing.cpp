//===- BufferAliasing.cpp - which values name one buffer ------------------===//
#include "dc/Analysis/BufferAliasing.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace dc;

OpOperand *dc::getViewedOperand(Operation *op) {
  // Ops with regions (loops) carry values through them, they view nothing;
  // what a call aliases is known only to a whole-module analysis.
  if (op->getNumResults() != 1 || op->getNumRegions() != 0 ||
      isa<CallOpInterface>(op))
    return nullptr;
  // These are views of dc's buffers, whose layout is the identity: the
  // model of collapse_shape must assume a strided source it may copy and
  // reports a read, and without registered models no op answers.
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
          tensor::BitcastOp, tensor::ExtractSliceOp>(op))
    return &op->getOpOperand(0);
  auto model = dyn_cast<bufferization::BufferizableOpInterface>(op);
  if (!model)
    return nullptr;
  bufferization::BufferizationOptions options;
  bufferization::AnalysisState state(options);
  OpOperand *viewed = nullptr;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<TensorType>(operand.get().getType()) ||
        model.getAliasingValues(operand, state).getNumAliases() == 0)
      continue;
    if (viewed || model.bufferizesToMemoryRead(operand, state) ||
        model.bufferizesToMemoryWrite(operand, state))
      return nullptr;
    viewed = &operand;
  }
  return viewed;
}

Value dc::getViewedBuffer(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    OpOperand *viewed = getViewedOperand(def);
    if (!viewed)
      break;
    value = viewed->get();
  }
  return value;
}

bool dc::handsOnItsBuffer(OpOperand &use) {
  Operation *user = use.getOwner();
  auto dps = dyn_cast<DestinationStyleOpInterface>(user);
  return isa<func::ReturnOp>(user) || (dps && dps.isDpsInit(&use));
}

bool dc::ownsItsBuffer(Value value) {
  return llvm::none_of(value.getUses(), [](OpOperand &use) {
    return getViewedOperand(use.getOwner()) == &use || handsOnItsBuffer(use);
  });
}

SmallVector<Value> dc::getBufferViews(Value value) {
  SmallVector<Value> views{value};
  llvm::DenseSet<Value> seen{value};
  for (size_t next = 0; next < views.size(); ++next) {
    for (OpOperand &use : views[next].getUses()) {
      Operation *user = use.getOwner();
      SmallVector<Value> aliases;
      if (getViewedOperand(user) == &use)
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

SmallVector<OpOperand *> dc::getBufferUses(Value value) {
  SmallVector<OpOperand *> uses;
  SmallVector<Value> views{value};
  while (!views.empty()) {
    Value view = views.pop_back_val();
    for (OpOperand &use : view.getUses()) {
      if (getViewedOperand(use.getOwner()) == &use)
        views.push_back(use.getOwner()->getResult(0));
      else
        uses.push_back(&use);
    }
  }
  return uses;
}

SmallVector<std::pair<Value, Value>>
dc::redirectBufferUses(Value value, Value replacement,
                       function_ref<bool(OpOperand &)> redirect,
                       OpBuilder &builder) {
  SmallVector<std::pair<Value, Value>> clones;
  llvm::DenseMap<Value, Value> replaced{{value, replacement}};
  // The view `view` of `value` on `replacement`, its chain cloned once.
  std::function<Value(Value)> replacementOf = [&](Value view) -> Value {
    if (Value known = replaced.lookup(view))
      return known;
    Operation *def = view.getDefiningOp();
    OpOperand *viewed = getViewedOperand(def);
    IRMapping mapping;
    mapping.map(viewed->get(), replacementOf(viewed->get()));
    Value clone = builder.clone(*def, mapping)->getResult(0);
    clones.push_back({clone, view});
    return replaced[view] = clone;
  };
  SmallVector<Value> views{value};
  while (!views.empty()) {
    Value view = views.pop_back_val();
    for (OpOperand &use : llvm::make_early_inc_range(view.getUses())) {
      Operation *user = use.getOwner();
      if (redirect(use))
        use.set(replacementOf(view));
      else if (getViewedOperand(user) == &use)
        views.push_back(user->getResult(0));
    }
  }
  return clones;
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

bool dc::isLastReadBeforeInPlaceWrite(Value init, Operation *writer) {
  if (!init.getDefiningOp<linalg::LinalgOp>())
    return false;
  Block *body = writer->getBlock();
  for (Value view : getBufferViews(init)) {
    for (OpOperand &use : view.getUses()) {
      Operation *user = use.getOwner();
      if (user == writer)
        continue;
      Operation *top = body->findAncestorOpInBlock(*user);
      if (!top || top == writer || !top->isBeforeInBlock(writer) ||
          isa<DCDialect>(user->getDialect()))
        return false;
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(user))
        if (dps.isDpsInit(&use))
          return false;
      if (auto loop = dyn_cast<LoopLikeOpInterface>(user))
        if (loop.getTiedLoopResult(&use))
          return false;
    }
  }
  return true;
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
      if (auto start = dyn_cast<AsyncStartOpInterface>(top))
        for (Value future : start.getFutures())
          for (Operation *waiter : future.getUsers())
            if (Operation *wait = body.findAncestorOpInBlock(*waiter))
              later(wait);
    }
  }
  return last;
}
