//===- ChunkRows.cpp - a wide product and its row-wise readers in chunks --===//
//
// The logits of a language model's head and their gradient are the step's
// largest transient, and every row of them is needed only by row-wise work.
// This pass computes such a product, and the ops that read it row by row,
// over consecutive row ranges, so that only a chunk of it is live at once.
// See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

namespace dc {
#define GEN_PASS_DEF_DCCHUNKROWS
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

int64_t tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return -1;
  return tensor.getNumElements() *
         ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// The top-level op of `block` that holds `op` (itself, or an op whose
/// region does).
Operation *topLevelOf(Operation *op, Block *block) {
  while (op && op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

/// An op of the closure: its row loop, and whether that loop reduces
/// (each chunk's copy then accumulates into the previous copy's result).
struct Member {
  Operation *op = nullptr;
  unsigned rowLoop = 0;
  bool accumulates = false;
  /// A linalg op; else a reshape that keeps the rows in dim 0.
  linalg::LinalgOp linalg() const { return dyn_cast<linalg::LinalgOp>(op); }
};

/// Whether `op` is a tensor.expand_shape or collapse_shape that keeps the
/// rows as dim 0: a frontend's [T] <-> [T, 1] views of per-row values.
/// Its source's and result's dim 0 are the rows, in one group with dims of
/// size 1 only.
bool keepsRows(Operation *op, int64_t rows) {
  auto rowsAlone = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> group) {
    if (group.empty() || group.front() != 0 || shape[0] != rows)
      return false;
    return llvm::all_of(group.drop_front(),
                        [&](int64_t dim) { return shape[dim] == 1; });
  };
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return expand.getSrcType().getDimSize(0) == rows &&
           expand.getResultType().hasStaticShape() &&
           rowsAlone(expand.getResultType().getShape(),
                     expand.getReassociationIndices().front());
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return collapse.getResultType().getDimSize(0) == rows &&
           collapse.getSrcType().hasStaticShape() &&
           rowsAlone(collapse.getSrcType().getShape(),
                     collapse.getReassociationIndices().front());
  return false;
}

/// The row loop of `op` with respect to the chunked values: the loop that
/// indexes dim 0 of every chunked operand, and of every chunked value its
/// body reads by tensor.extract (through linalg.index); every operand it
/// indexes has it as the plain dim 0 and nowhere else, its range is `rows`,
/// and, parallel, it indexes every init. nullopt: not chunkable.
std::optional<unsigned> findRowLoop(linalg::LinalgOp op,
                                    const llvm::DenseSet<Value> &chunked,
                                    int64_t rows) {
  if (!op.hasPureTensorSemantics())
    return std::nullopt;
  std::optional<unsigned> loop;
  bool consistent = true;
  auto note = [&](unsigned dim) {
    if (loop && *loop != dim)
      consistent = false;
    loop = dim;
  };
  for (OpOperand &operand : op->getOpOperands()) {
    if (!chunked.contains(operand.get()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (map.getNumResults() == 0)
      return std::nullopt;
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(0));
    if (!dim)
      return std::nullopt;
    note(dim.getPosition());
  }
  // A chunked value read from outside the operands: only an element of it,
  // at a row the row loop names.
  WalkResult captured = op->walk([&](Operation *inner) {
    if (inner == op.getOperation())
      return WalkResult::advance();
    for (OpOperand &use : inner->getOpOperands()) {
      if (!chunked.contains(use.get()))
        continue;
      auto extract = dyn_cast<tensor::ExtractOp>(inner);
      auto row = extract && use.getOperandNumber() == 0
                     ? extract.getIndices()[0].getDefiningOp<linalg::IndexOp>()
                     : linalg::IndexOp();
      if (!row || row->getParentOp() != op.getOperation())
        return WalkResult::interrupt();
      note(row.getDim());
    }
    return WalkResult::advance();
  });
  // No chunked value read (an op pulled into the chunks): the loop of its
  // first result's rows.
  if (!loop && op.getNumDpsInits() > 0) {
    AffineMap map = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    if (map.getNumResults() > 0)
      if (auto dim = dyn_cast<AffineDimExpr>(map.getResult(0)))
        loop = dim.getPosition();
  }
  if (captured.wasInterrupted() || !loop || !consistent)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (*loop >= ranges.size() || ranges[*loop] != rows)
    return std::nullopt;
  bool parallel =
      op.getIteratorTypesArray()[*loop] == utils::IteratorType::parallel;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    bool indexed = false;
    for (auto [position, expr] : llvm::enumerate(map.getResults())) {
      if (!expr.isFunctionOfDim(*loop))
        continue;
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (position != 0 || !dim || dim.getPosition() != *loop)
        return std::nullopt;
      indexed = true;
    }
    if (parallel && op.isDpsInit(&operand) && !indexed)
      return std::nullopt;
  }
  return loop;
}

/// Moves the op defining `value`, and what it needs (its operands, and
/// what its body reads from outside it), before `point` where it is made
/// after it: only ops without side effects and without regions (an init's
/// tensor.empty, constants) or linalg ops on tensors (a fill, a loss's
/// token count). False if that cannot be done, as where it is made from
/// one of the ops in `stay` (the chunked ops: a value made whole from a
/// chunked one cannot be read inside the chunks).
bool hoistBefore(Value value, Operation *point, DominanceInfo &dominance,
                 const llvm::DenseSet<Operation *> &stay) {
  Operation *def = value.getDefiningOp();
  if (!def || dominance.properlyDominates(def, point))
    return true;
  if (stay.contains(def))
    return false;
  bool movable = def->getNumRegions() == 0 && isMemoryEffectFree(def);
  auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
  if (linalgOp)
    movable = linalgOp.hasPureTensorSemantics();
  if (!movable)
    return false;
  // Its operands, and what its body reads from outside it.
  SmallVector<Value> needed(def->getOperands());
  def->walk([&](Operation *inner) {
    if (inner == def)
      return;
    for (Value operand : inner->getOperands())
      if (!def->isAncestor(operand.getParentRegion()->getParentOp()))
        needed.push_back(operand);
  });
  for (Value operand : needed)
    if (!hoistBefore(operand, point, dominance, stay))
      return false;
  def->moveBefore(point);
  return true;
}

/// The values `generic`'s yield operand `result` is computed from: the
/// body's block arguments and values from outside the body it reads.
llvm::SetVector<Value> yieldSources(linalg::GenericOp generic,
                                    unsigned result) {
  Block &body = generic.getRegion().front();
  llvm::SetVector<Value> sources;
  SmallVector<Value> work{body.getTerminator()->getOperand(result)};
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def || def->getBlock() != &body) {
      sources.insert(value);
      continue;
    }
    if (!seen.insert(def).second)
      continue;
    def->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (!def->isAncestor(operand.getParentRegion()->getParentOp()) ||
            operand.getParentRegion() == &generic.getRegion())
          work.push_back(operand);
    });
  }
  return sources;
}

/// Splits off, into a generic of its own placed before `generic`, each
/// result whose computation reads nothing `derived` (a PyTorch loss's
/// count of counted tokens, made by the loss's reduction over the logits
/// but read from the targets alone): the chunks then need only the
/// logits' part, and the count is made before them. Returns the generic
/// that keeps the other results (maybe `generic` itself).
linalg::GenericOp
splitIndependentResults(linalg::GenericOp generic,
                        const llvm::DenseSet<Value> &derived) {
  if (generic.getNumResults() < 2 || !generic.hasPureTensorSemantics())
    return generic;
  Block &body = generic.getRegion().front();
  unsigned numInputs = generic.getNumDpsInputs();
  auto readsDerived = [&](const llvm::SetVector<Value> &sources) {
    return llvm::any_of(sources, [&](Value source) {
      auto arg = dyn_cast<BlockArgument>(source);
      if (arg && arg.getOwner() == &body)
        return arg.getArgNumber() < numInputs &&
               derived.contains(generic.getDpsInputs()[arg.getArgNumber()]);
      return derived.contains(source);
    });
  };
  SmallVector<unsigned> independent;
  SmallVector<llvm::SetVector<Value>> sources;
  for (unsigned result = 0; result < generic.getNumResults(); ++result)
    sources.push_back(yieldSources(generic, result));
  for (unsigned result = 0; result < generic.getNumResults(); ++result) {
    if (readsDerived(sources[result]))
      continue;
    // Its accumulator is its own: no other result reads it, and it reads
    // no other's.
    bool own = true;
    for (unsigned other = 0; other < generic.getNumResults(); ++other) {
      if (other == result)
        continue;
      own &= !sources[other].contains(body.getArgument(numInputs + result));
      own &= !sources[result].contains(body.getArgument(numInputs + other));
    }
    if (own)
      independent.push_back(result);
  }
  if (independent.empty() || independent.size() == generic.getNumResults())
    return generic;

  OpBuilder builder(generic);
  Location loc = generic.getLoc();
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  auto makeGeneric = [&](ArrayRef<unsigned> results, bool onlyUsedInputs) {
    SmallVector<Value> inputs, inits;
    SmallVector<AffineMap> newMaps;
    SmallVector<BlockArgument> kept;
    llvm::SetVector<Value> used;
    for (unsigned result : results)
      used.insert(sources[result].begin(), sources[result].end());
    for (unsigned input = 0; input < numInputs; ++input)
      if (!onlyUsedInputs || used.contains(body.getArgument(input))) {
        inputs.push_back(generic.getDpsInputs()[input]);
        newMaps.push_back(maps[input]);
        kept.push_back(body.getArgument(input));
      }
    SmallVector<Type> types;
    for (unsigned result : results) {
      inits.push_back(generic.getDpsInits()[result]);
      newMaps.push_back(maps[numInputs + result]);
      kept.push_back(body.getArgument(numInputs + result));
      types.push_back(generic.getResult(result).getType());
    }
    auto made = linalg::GenericOp::create(
        builder, loc, types, inputs, inits, newMaps,
        generic.getIteratorTypesArray(),
        [&](OpBuilder &nested, Location, ValueRange args) {
          IRMapping mapping;
          for (auto [old, now] : llvm::zip_equal(kept, args))
            mapping.map(old, now);
          for (Operation &op : body.without_terminator())
            nested.clone(op, mapping);
          SmallVector<Value> yields;
          for (unsigned result : results)
            yields.push_back(mapping.lookupOrDefault(
                body.getTerminator()->getOperand(result)));
          linalg::YieldOp::create(nested, loc, yields);
        });
    // What the cloned body computes for the results left out.
    SmallVector<Operation *> bodyOps;
    for (Operation &op : made.getRegion().front().without_terminator())
      bodyOps.push_back(&op);
    for (Operation *op : llvm::reverse(bodyOps))
      if (op->use_empty() && isMemoryEffectFree(op))
        op->erase();
    for (auto [index, result] : llvm::enumerate(results))
      generic.getResult(result).replaceAllUsesWith(made.getResult(index));
    return made;
  };
  SmallVector<unsigned> rest;
  for (unsigned result = 0; result < generic.getNumResults(); ++result)
    if (!llvm::is_contained(independent, result))
      rest.push_back(result);
  makeGeneric(independent, /*onlyUsedInputs=*/true);
  linalg::GenericOp remaining = makeGeneric(rest, /*onlyUsedInputs=*/false);
  generic.erase();
  return remaining;
}

struct ChunkRowsPass : public dc::impl::DCChunkRowsBase<ChunkRowsPass> {
  using DCChunkRowsBase::DCChunkRowsBase;

  void runOnOperation() override {
    if (chunks < 2) {
      getOperation().emitError()
          << "dc-chunk-rows: chunks must be 2 or more, not "
          << chunks.getValue();
      return signalPassFailure();
    }
    // A frontend's reshapes that come back to the shape they left (the
    // logits viewed as [batch, sequence, words] and back) fold away first:
    // the row-wise readers then read the product itself.
    RewritePatternSet reshapes(&getContext());
    tensor::CollapseShapeOp::getCanonicalizationPatterns(reshapes,
                                                         &getContext());
    tensor::ExpandShapeOp::getCanonicalizationPatterns(reshapes, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(reshapes))))
      return signalPassFailure();
    // The products first: chunking one rewrites the ops after it.
    SmallVector<linalg::MatmulOp> products;
    getOperation().walk([&](linalg::MatmulOp product) {
      if (product->getBlock() == &getOperation().getBody().front() &&
          product.hasPureTensorSemantics() &&
          tensorBytes(product.getResult(0).getType()) >= minBytes)
        products.push_back(product);
    });
    // A product chunked with an earlier one's readers is gone (compared,
    // never dereferenced); the chunks' own products are not candidates.
    for (linalg::MatmulOp product : products)
      if (!erased.contains(product.getOperation()))
        chunk(product);
  }

  /// The ops the rewrites erased.
  llvm::DenseSet<Operation *> erased;

  /// Rewrites `product` and its row-wise readers into chunks, or leaves
  /// them (with a remark saying why).
  void chunk(linalg::MatmulOp product) {
    Block *block = product->getBlock();
    auto resultType = cast<RankedTensorType>(product.getResult(0).getType());
    int64_t rows = resultType.getDimSize(0);
    if (rows % chunks != 0) {
      product.emitRemark() << "dc-chunk-rows: " << rows
                           << " rows do not divide into " << chunks.getValue()
                           << " chunks; not chunked";
      return;
    }
    int64_t chunkRows = rows / chunks;

    // Results of a reduction that reads the product but whose own values do
    // not (a loss's count of counted tokens) are made apart, before.
    {
      llvm::DenseSet<Value> derived{product.getResult(0)};
      for (Operation &op : llvm::make_early_inc_range(llvm::make_range(
               std::next(product->getIterator()), block->end()))) {
        bool reads = false;
        op.walk([&](Operation *inner) {
          for (Value operand : inner->getOperands())
            reads |= derived.contains(operand);
        });
        if (!reads)
          continue;
        Operation *now = &op;
        if (auto generic = dyn_cast<linalg::GenericOp>(&op))
          now = splitIndependentResults(generic, derived);
        for (Value result : now->getResults())
          derived.insert(result);
      }
    }

    // The closure, in program order (defs before uses): the product, then
    // each op that reads a chunked value and is chunkable on its rows.
    llvm::DenseSet<Value> chunked{product.getResult(0)};
    llvm::MapVector<Operation *, Member> members;
    {
      std::optional<unsigned> loop =
          findRowLoop(product, {product.getDpsInputs()[0]}, rows);
      if (!loop) {
        product.emitRemark() << "dc-chunk-rows: the product's rows are not "
                                "its first operand's; not chunked";
        return;
      }
      members[product] = {product, *loop, false};
    }
    auto readsChunked = [&](Operation *op) {
      WalkResult found = op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (chunked.contains(operand))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      return found.wasInterrupted();
    };
    auto isWide = [&](Value value) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      return type && type.getShape() == resultType.getShape();
    };
    llvm::DenseSet<Operation *> kept;
    for (bool grew = true; grew;) {
      grew = false;
      for (Operation &op :
           llvm::make_range(std::next(product->getIterator()), block->end())) {
        if (members.count(&op) || !readsChunked(&op))
          continue;
        if (keepsRows(&op, rows)) {
          members[&op] = {&op, 0, false};
          chunked.insert(op.getResult(0));
          continue;
        }
        auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
        if (!linalgOp)
          continue;
        std::optional<unsigned> loop = findRowLoop(linalgOp, chunked, rows);
        if (!loop)
          continue;
        bool accumulates = linalgOp.getIteratorTypesArray()[*loop] ==
                           utils::IteratorType::reduction;
        members[&op] = {&op, *loop, accumulates};
        if (!accumulates)
          for (Value result : op.getResults())
            chunked.insert(result);
      }

      // Keep the members that read a wide value (of the product's shape)
      // or feed one that does: users first.
      SmallVector<Operation *> order;
      for (auto &entry : members)
        order.push_back(entry.first);
      llvm::sort(order, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      kept.clear();
      for (Operation *op : llvm::reverse(order)) {
        bool keep = false;
        op->walk([&](Operation *inner) {
          for (Value operand : inner->getOperands())
            if (chunked.contains(operand) && isWide(operand))
              keep = true;
        });
        for (Value result : op->getResults())
          for (Operation *user : result.getUsers())
            keep |= kept.contains(topLevelOf(user, block));
        if (keep || op == product.getOperation())
          kept.insert(op);
      }

      // A value of the product's shape a kept op reads from outside, made
      // row by row from values that are not chunked (PyTorch's one-hot
      // gradient of the loss, from the targets): made in the chunks too,
      // or it would be whole; then its readers are looked at again.
      // Only an operand the kept op reads row by row on its row loop: a
      // value of that shape read otherwise (a weight gradient's init of
      // [dim, vocab] when dim equals the rows) is not made of rows.
      for (Operation *op : order) {
        auto keptOp = dyn_cast<linalg::LinalgOp>(op);
        if (!kept.contains(op) || !keptOp)
          continue;
        for (OpOperand &use : op->getOpOperands()) {
          Value operand = use.get();
          AffineMap map = keptOp.getMatchingIndexingMap(&use);
          if (map.getNumResults() == 0 ||
              map.getResult(0) !=
                  getAffineDimExpr(members[op].rowLoop, op->getContext()))
            continue;
          auto producer = operand.getDefiningOp<linalg::LinalgOp>();
          if (!producer || chunked.contains(operand) || !isWide(operand) ||
              producer->getBlock() != block ||
              !product->isBeforeInBlock(producer) ||
              producer.getNumDpsInits() != 1 || members.count(producer))
            continue;
          std::optional<unsigned> loop = findRowLoop(producer, chunked, rows);
          if (!loop || producer.getIteratorTypesArray()[*loop] !=
                           utils::IteratorType::parallel)
            continue;
          members[producer] = {producer, *loop, false};
          chunked.insert(producer->getResult(0));
          grew = true;
        }
      }
    }
    SmallVector<Member> chunkedOps;
    for (auto &[op, member] : members)
      if (kept.contains(op))
        chunkedOps.push_back(member);
    llvm::sort(chunkedOps, [](const Member &a, const Member &b) {
      return a.op->isBeforeInBlock(b.op);
    });
    // A kept op reads chunked values of kept ops only (what feeds a kept
    // op is kept); checked, not assumed.
    for (Member &member : chunkedOps) {
      bool fromKept = true;
      member.op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (chunked.contains(operand))
            fromKept &= kept.contains(operand.getDefiningOp());
      });
      if (!fromKept) {
        member.op->emitRemark() << "dc-chunk-rows: reads a chunked value of "
                                   "an op left whole; not chunked";
        return;
      }
    }
    chunked.clear();
    for (Member &member : chunkedOps)
      if (!member.accumulates)
        for (Value result : member.op->getResults())
          chunked.insert(result);

    // Chunked values read outside the chunks are assembled; a wide one
    // would be all there again.
    llvm::SetVector<Value> exits;
    for (Value result : chunked)
      for (Operation *user : result.getUsers())
        if (!kept.contains(topLevelOf(user, block)))
          exits.insert(result);
    for (Value exit : exits)
      if (isWide(exit)) {
        Operation *user = nullptr;
        for (Operation *candidate : exit.getUsers())
          if (!kept.contains(topLevelOf(candidate, block)))
            user = candidate;
        InFlightDiagnostic remark =
            product.emitRemark()
            << "dc-chunk-rows: a wide value would be assembled whole again "
               "for an op that is not chunkable on its rows; not chunked";
        if (user)
          remark.attachNote(user->getLoc()) << "that op";
        return;
      }

    // Everything the chunks read from outside is made before them.
    Operation *first = chunkedOps.front().op;
    DominanceInfo dominance(first->getParentOp());
    for (Member &member : chunkedOps) {
      bool hoisted = true;
      member.op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands()) {
          if (chunked.contains(operand))
            continue;
          // Values made inside the op itself need no move.
          Operation *def = operand.getDefiningOp();
          if (def && member.op->isAncestor(def))
            continue;
          if (auto arg = dyn_cast<BlockArgument>(operand))
            continue;
          hoisted &= hoistBefore(operand, first, dominance, kept);
        }
      });
      if (!hoisted) {
        member.op->emitRemark()
            << "dc-chunk-rows: an operand is made after the first chunked "
               "op by an op that cannot move before it (or that reads the "
               "chunked ops whole); not chunked";
        return;
      }
    }

    rewrite(chunkedOps, chunked, exits, chunkRows);
  }

  void rewrite(ArrayRef<Member> chunkedOps,
               const llvm::DenseSet<Value> &chunked,
               const llvm::SetVector<Value> &exits, int64_t chunkRows) {
    Operation *first = chunkedOps.front().op;
    Location loc = first->getLoc();
    OpBuilder builder(first);
    // Rows [row, row + chunkRows) of `full`; or, given `into`, the chunk
    // `full` inserted there into `into`.
    auto rowSlice = [&](Value full, int64_t row, Value into = Value()) {
      auto type = cast<RankedTensorType>((into ? into : full).getType());
      SmallVector<OpFoldResult> offsets(type.getRank(),
                                        builder.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), builder.getIndexAttr(1));
      offsets[0] = builder.getIndexAttr(row);
      for (int64_t size : type.getShape())
        sizes.push_back(builder.getIndexAttr(size));
      sizes[0] = builder.getIndexAttr(chunkRows);
      if (into)
        return Value(tensor::InsertSliceOp::create(builder, loc, full, into,
                                                   offsets, sizes, strides));
      return Value(tensor::ExtractSliceOp::create(builder, loc, full, offsets,
                                                  sizes, strides));
    };
    auto chunkType = [&](Type type) {
      auto tensor = cast<RankedTensorType>(type);
      SmallVector<int64_t> shape(tensor.getShape());
      shape[0] = chunkRows;
      return RankedTensorType::get(shape, tensor.getElementType());
    };

    // The full tensors the exits are assembled in, each chunk writing its
    // rows in place (One-Shot Bufferize keeps a slice's producer writing
    // into the slice of the destination it was extracted from).
    llvm::DenseMap<Value, Value> assembled;
    for (Value exit : exits) {
      auto type = cast<RankedTensorType>(exit.getType());
      assembled[exit] = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                                type.getElementType());
    }
    // Each accumulating op's running results.
    llvm::DenseMap<Operation *, SmallVector<Value>> running;

    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      int64_t row = chunk * chunkRows;
      IRMapping mapping;
      for (const Member &member : chunkedOps) {
        linalg::LinalgOp op = member.linalg();
        if (!op) {
          // A reshape keeping the rows: the same on the chunk.
          Value made = reshapeChunk(
              builder, member.op, mapping.lookup(member.op->getOperand(0)),
              chunkType(member.op->getResult(0).getType()));
          mapping.map(member.op->getResult(0), made);
          if (exits.contains(member.op->getResult(0)))
            assembled[member.op->getResult(0)] =
                rowSlice(made, row, assembled[member.op->getResult(0)]);
          continue;
        }
        SmallVector<Value> operands;
        SmallVector<Type> resultTypes;
        for (OpOperand &operand : op->getOpOperands()) {
          Value value = operand.get();
          bool init = op.isDpsInit(&operand);
          AffineMap map = op.getMatchingIndexingMap(&operand);
          bool rowIndexed = map.getNumResults() &&
                            map.getResult(0).isFunctionOfDim(member.rowLoop);
          if (mapping.contains(value)) {
            operands.push_back(mapping.lookup(value));
          } else if (init && member.accumulates) {
            operands.push_back(
                chunk == 0
                    ? value
                    : running[op]
                             [op.getTiedOpResult(&operand).getResultNumber()]);
          } else if (init && rowIndexed) {
            // An init that only names a shape (maybe filled): a chunk-sized
            // one, or the exit's slice to write into; else its rows.
            Value result = op.getTiedOpResult(&operand);
            auto fill = value.getDefiningOp<linalg::FillOp>();
            Value base = fill ? fill.getDpsInits()[0] : value;
            if (!base.getDefiningOp<tensor::EmptyOp>()) {
              operands.push_back(rowSlice(value, row));
            } else {
              Value dest =
                  exits.contains(result)
                      ? rowSlice(assembled[result], row)
                      : tensor::EmptyOp::create(
                            builder, loc, chunkType(value.getType()).getShape(),
                            getElementTypeOrSelf(value.getType()))
                            .getResult();
              if (fill)
                dest = linalg::FillOp::create(builder, loc, fill.value(), dest)
                           .getResult(0);
              operands.push_back(dest);
            }
          } else if (rowIndexed) {
            operands.push_back(rowSlice(value, row));
          } else {
            operands.push_back(value);
          }
          if (init)
            resultTypes.push_back(operands.back().getType());
        }
        Operation *copy =
            mlir::clone(builder, op.getOperation(), resultTypes, operands);
        fixBody(copy, member.rowLoop, row, chunked, mapping);
        for (auto [original, made] :
             llvm::zip_equal(op->getResults(), copy->getResults())) {
          if (member.accumulates) {
            running[op].resize(op->getNumResults());
            running[op][original.getResultNumber()] = made;
            continue;
          }
          mapping.map(original, made);
          if (exits.contains(original))
            assembled[original] = rowSlice(made, row, assembled[original]);
        }
      }
    }

    // The uses outside the chunks read the assembled and accumulated
    // values; the originals go, last first.
    for (Value exit : exits)
      exit.replaceAllUsesWith(assembled[exit]);
    for (const Member &member : chunkedOps)
      if (member.accumulates)
        for (auto [original, made] :
             llvm::zip_equal(member.op->getResults(), running[member.op]))
          original.replaceAllUsesWith(made);
    // The whole-size inits the chunks replaced go too, where nothing else
    // reads them (a fill of 32 MiB would still run, and count).
    llvm::SetVector<Operation *> inits;
    for (const Member &member : chunkedOps) {
      linalg::LinalgOp op = member.linalg();
      if (!op)
        continue;
      for (Value init : op.getDpsInits()) {
        if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
          inits.insert(fill);
          if (Operation *empty =
                  fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>())
            inits.insert(empty);
        } else if (Operation *empty = init.getDefiningOp<tensor::EmptyOp>()) {
          inits.insert(empty);
        }
      }
    }
    for (const Member &member : llvm::reverse(chunkedOps)) {
      assert(member.op->use_empty() && "a chunked op is still read");
      erased.insert(member.op);
      member.op->erase();
    }
    // Fills before the empties they fill: the set's order.
    for (Operation *def : inits)
      if (def->use_empty()) {
        erased.insert(def);
        def->erase();
      }
  }

  /// `reshape` (keepsRows) applied to `chunk`, of type `type`.
  static Value reshapeChunk(OpBuilder &builder, Operation *reshape, Value chunk,
                            RankedTensorType type) {
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(reshape))
      return tensor::ExpandShapeOp::create(builder, expand.getLoc(), type,
                                           chunk,
                                           expand.getReassociationIndices());
    auto collapse = cast<tensor::CollapseShapeOp>(reshape);
    return tensor::CollapseShapeOp::create(builder, collapse.getLoc(), type,
                                           chunk,
                                           collapse.getReassociationIndices());
  }

  /// In a chunk's copy of an op: its row loop's index is the row within the
  /// chunk; where it names a row of something else than a chunked value
  /// read by tensor.extract, the chunk's first row is added; and the
  /// chunked values its body reads are the chunk's.
  static void fixBody(Operation *copy, unsigned rowLoop, int64_t row,
                      const llvm::DenseSet<Value> &chunked,
                      IRMapping &mapping) {
    copy->walk([&](linalg::IndexOp index) {
      if (index.getDim() != rowLoop || index->getParentOp() != copy || row == 0)
        return;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : index->getUses()) {
        auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
        if (extract && use.getOperandNumber() == 1 &&
            chunked.contains(extract.getTensor()))
          continue;
        uses.push_back(&use);
      }
      if (uses.empty())
        return;
      OpBuilder builder(index->getContext());
      builder.setInsertionPointAfter(index);
      Value offset =
          arith::ConstantIndexOp::create(builder, index.getLoc(), row);
      Value shifted =
          arith::AddIOp::create(builder, index.getLoc(), index, offset);
      for (OpOperand *use : uses)
        use->set(shifted);
    });
    copy->walk([&](Operation *inner) {
      if (inner == copy)
        return;
      for (OpOperand &use : inner->getOpOperands())
        if (chunked.contains(use.get()) && mapping.contains(use.get()))
          use.set(mapping.lookup(use.get()));
    });
  }
};

} // namespace
