//===- ReloadReleases.cpp - free each reloaded buffer after its last use --===//
#include "dc/Schedule/ReloadReleases.h"

#include "dc/Analysis/BufferAliasing.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace dc;

void dc::insertReloadReleases(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return;
  Block &body = fn.getBody().front();
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  // Where each release goes, decided before any moves (moving releases
  // changes no other op's place).
  SmallVector<std::pair<Value, Operation *>> placements;
  for (auto wait : body.getOps<WaitOp>())
    if (isReloadedValue(wait.getResult()))
      placements.push_back(
          {wait.getResult(), getLastBufferUse(body, wait.getResult(), index)});
  // Releases after one op keep the order of their values' waits.
  llvm::DenseMap<Operation *, Operation *> lastPlacedAfter;
  for (auto [value, last] : placements) {
    SmallVector<ReleaseOp> releases = getReleasesInOrder(value, index);
    if (!last) {
      for (ReleaseOp release : releases)
        release.erase();
      continue;
    }
    Operation *after = lastPlacedAfter.lookup(last);
    if (!after)
      after = last;
    ReleaseOp release;
    if (releases.empty()) {
      OpBuilder builder(fn.getContext());
      builder.setInsertionPointAfter(after);
      release = ReleaseOp::create(builder, last->getLoc(), value);
    } else {
      release = releases.front();
      if (release != after)
        release->moveAfter(after);
      for (ReleaseOp extra : llvm::drop_begin(releases))
        extra.erase();
    }
    lastPlacedAfter[last] = release;
  }
}
