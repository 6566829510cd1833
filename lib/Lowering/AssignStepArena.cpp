//===- AssignStepArena.cpp - temporaries at planned arena offsets ---------===//
//
// Static buffer assignment: each temporary of a step gets an offset in one
// arena from its lifetime, so a step allocates no memory and the arena's
// size is known at compile time.
//
//===----------------------------------------------------------------------===//
#include "dc/Lowering/Manifest.h"
#include "dc/Lowering/Passes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

namespace dc {
#define GEN_PASS_DEF_DCASSIGNSTEPARENA
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// One temporary: its alloc (none for a step's result, which the caller
/// passes), its bytes (aligned) and the range of top-level op positions
/// during which it is live (inclusive).
struct Temporary {
  memref::AllocOp alloc;
  int64_t bytes = 0;
  size_t first = 0, last = 0;
  int64_t offset = -1;
};

/// The op of `body` that contains `op`, or null.
Operation *topLevelAncestor(Block &body, Operation *op) {
  return body.findAncestorOpInBlock(*op);
}

/// The lifetime end of `alloc`'s buffer in `body`, or nullopt if a view of
/// it escapes (is returned or stored where the analysis cannot follow).
std::optional<size_t>
findLastUse(Block &body, memref::AllocOp alloc,
            const llvm::DenseMap<Operation *, size_t> &position) {
  size_t last = position.lookup(alloc);
  SmallVector<Value> worklist{alloc.getResult()};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isa<memref::DeallocOp>(user))
        continue;
      if (isa<func::ReturnOp>(user))
        return std::nullopt;
      // Views name the same bytes, and so may any other buffer an op that
      // takes this one returns (a loop carrying it as an init): follow them.
      for (Value result : user->getResults())
        if (isa<BaseMemRefType>(result.getType()))
          worklist.push_back(result);
      Operation *top = topLevelAncestor(body, user);
      if (!top)
        return std::nullopt;
      last = std::max(last, position.lookup(top));
      // An async transfer reads (or writes) the buffer until its futures'
      // waits.
      for (Value result : top->getResults())
        if (isa<FutureType>(result.getType()))
          for (Operation *waiter : result.getUsers())
            if (Operation *waitTop = topLevelAncestor(body, waiter))
              last = std::max(last, position.lookup(waitTop));
      // A reload's (an all-to-all's) destination is what its wait yields:
      // follow that too.
      Value future;
      if (auto reload = dyn_cast<ReloadStartOp>(user);
          reload && reload.getDestination() == value)
        future = reload.getFuture();
      if (auto exchange = dyn_cast<AllToAllStartOp>(user);
          exchange && exchange.getOutput() == value)
        future = exchange.getFuture();
      if (future)
        for (Operation *waiter : future.getUsers())
          llvm::append_range(worklist, waiter->getResults());
    }
  }
  return last;
}

/// The arena bytes (aligned) of a buffer of `type`, or nullopt if the arena
/// cannot hold one: a dynamic shape, a strided layout or another memory
/// space.
std::optional<int64_t> getArenaBytes(Type type, int64_t alignment) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape() || !memref.getLayout().isIdentity() ||
      memref.getMemorySpace())
    return std::nullopt;
  int64_t bytes = memref.getNumElements() *
                  llvm::divideCeil(memref.getElementTypeBitWidth(), 8);
  return llvm::alignTo(std::max<int64_t>(bytes, 1), alignment);
}

/// The first top-level position at which `result` (an out-parameter) or a
/// view of it is used, or `end` if it is never used.
size_t findFirstUse(Block &body, Value result,
                    const llvm::DenseMap<Operation *, size_t> &position,
                    size_t end) {
  size_t first = end;
  SmallVector<Value> worklist{result};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (Operation *top = topLevelAncestor(body, user))
        first = std::min(first, position.lookup(top));
      for (Value view : user->getResults())
        if (isa<BaseMemRefType>(view.getType()))
          worklist.push_back(view);
    }
  }
  return first;
}

/// Places `temps` (largest first, each at the lowest aligned offset free
/// for its whole lifetime); returns the arena size.
int64_t place(MutableArrayRef<Temporary> temps, int64_t alignment) {
  SmallVector<Temporary *> order;
  for (Temporary &temp : temps)
    order.push_back(&temp);
  llvm::stable_sort(order, [](const Temporary *a, const Temporary *b) {
    if (a->bytes != b->bytes)
      return a->bytes > b->bytes;
    return a->first < b->first;
  });
  int64_t size = 0;
  SmallVector<Temporary *> placed;
  SmallVector<std::pair<int64_t, int64_t>> busy;
  for (Temporary *temp : order) {
    busy.clear();
    for (Temporary *other : placed)
      if (other->first <= temp->last && temp->first <= other->last)
        busy.push_back({other->offset, other->offset + other->bytes});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + temp->bytes <= begin)
        break;
      offset = std::max<int64_t>(offset, llvm::alignTo(end, alignment));
    }
    temp->offset = offset;
    size = std::max(size, offset + temp->bytes);
    placed.push_back(temp);
  }
  return size;
}

class AssignStepArenaPass
    : public dc::impl::DCAssignStepArenaBase<AssignStepArenaPass> {
public:
  using DCAssignStepArenaBase::DCAssignStepArenaBase;

  void runOnOperation() override {
    if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
      getOperation().emitError()
          << "dc-assign-step-arena: alignment must be a power of two, got "
          << int64_t(alignment);
      return signalPassFailure();
    }
    int64_t arenaBytes = 0;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal())
        arenaBytes = std::max(arenaBytes, assign(fn));
    if (failedManifest)
      return signalPassFailure();
    if (failed(setManifestPlanBytes(getOperation(), "step_arena_bytes",
                                    arenaBytes)))
      signalPassFailure();
  }

private:
  /// What buffer-results-to-out-params marks a result's out-parameter with.
  static constexpr llvm::StringLiteral kResultAttr = "bufferize.result";
  bool failedManifest = false;

  /// Assigns `fn`'s temporaries; returns its arena size.
  int64_t assign(func::FuncOp fn) {
    Block &body = fn.getBody().front();
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = i;

    SmallVector<Temporary> temps;
    for (auto alloc : body.getOps<memref::AllocOp>()) {
      std::optional<int64_t> bytes = getArenaBytes(alloc.getType(), alignment);
      if (!bytes)
        continue;
      std::optional<size_t> last = findLastUse(body, alloc, position);
      if (!last)
        continue;
      Temporary temp;
      temp.alloc = alloc;
      temp.bytes = *bytes;
      temp.first = position.lookup(alloc);
      temp.last = *last;
      temps.push_back(temp);
    }
    // A public step's results (the out-parameters buffer-results-to-out-
    // params marks): each gets bytes of its own from its first write to the
    // end, which the manifest names (arena_offset) and a caller may pass as
    // the result's buffer: a gradient then takes no memory before backward
    // makes it, as dc's memory timeline plans. A caller passing buffers of
    // its own leaves those bytes unused.
    size_t end = body.empty() ? 0 : body.getOperations().size() - 1;
    size_t numAllocs = temps.size();
    SmallVector<int64_t> resultOffsets;
    SmallVector<std::pair<size_t, size_t>> resultTemps; // (result, temp)
    // Results written into an argument's buffer keep no arena bytes: the
    // caller passes that argument's buffer.
    llvm::SmallDenseSet<int64_t> inArguments;
    if (auto indices =
            fn->getAttrOfType<DenseI64ArrayAttr>(kResultsInArgumentsAttrName))
      inArguments.insert(indices.asArrayRef().begin(),
                         indices.asArrayRef().end());
    fn->removeAttr(kResultsInArgumentsAttrName);
    for (BlockArgument arg : body.getArguments()) {
      if (!fn.getArgAttr(arg.getArgNumber(), kResultAttr))
        continue;
      fn.removeArgAttr(arg.getArgNumber(), kResultAttr);
      if (!fn.isPublic())
        continue;
      resultOffsets.push_back(-1);
      if (inArguments.contains(static_cast<int64_t>(resultOffsets.size() - 1)))
        continue;
      std::optional<int64_t> bytes = getArenaBytes(arg.getType(), alignment);
      if (!bytes)
        continue;
      Temporary temp;
      temp.bytes = *bytes;
      temp.first = findFirstUse(body, arg, position, end);
      temp.last = end;
      resultTemps.push_back({resultOffsets.size() - 1, temps.size()});
      temps.push_back(temp);
    }
    if (temps.empty())
      return 0;
    int64_t size = place(temps, alignment);
    for (auto [result, temp] : resultTemps)
      resultOffsets[result] = temps[temp].offset;
    if (failed(setManifestResultArenaOffsets(fn->getParentOfType<ModuleOp>(),
                                             fn.getSymName(), resultOffsets)))
      failedManifest = true;
    temps.truncate(numAllocs);
    if (temps.empty())
      return size;

    OpBuilder builder = OpBuilder::atBlockBegin(&body);
    Location loc = fn.getLoc();
    auto arenaType = MemRefType::get({size}, builder.getI8Type());
    Value arena = StepArenaOp::create(builder, loc, arenaType);
    for (Temporary &temp : temps) {
      builder.setInsertionPoint(temp.alloc);
      Value offset = arith::ConstantIndexOp::create(
          builder, temp.alloc.getLoc(), temp.offset);
      Value view = memref::ViewOp::create(builder, temp.alloc.getLoc(),
                                          temp.alloc.getType(), arena, offset,
                                          ValueRange());
      for (Operation *user : llvm::make_early_inc_range(temp.alloc->getUsers()))
        if (isa<memref::DeallocOp>(user))
          user->erase();
      temp.alloc.replaceAllUsesWith(view);
      temp.alloc.erase();
    }
    return size;
  }
};

} // namespace
