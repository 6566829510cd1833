//===- Ulysses.cpp - shard the sequence dim, all-to-all around attention --===//
//
// Ulysses sequence parallelism: the sequence arguments become each rank's
// slice of the sequence, every type downstream is rewritten to its local
// size, and attention runs head-sharded between two all-to-alls. Reductions
// over the sequence become partial sums over the group: the loss is
// all-reduced here, the gradients here or by dc-zero3.
//
// The all-to-alls are asynchronous (dc.all_to_all_start + dc.wait), and the
// pass schedules them as it makes them: each starts right after its input
// is produced and is waited right before its first use. So the exchanges of
// q, k and v run while the later projections compute and overlap each
// other, and in backward those of dq, dk and dv overlap the consumers of
// the ones waited first. (Only the pass knows which value feeds which
// attention, so it places them; dc-prefetch moves gathers, not these.)
//
//===----------------------------------------------------------------------===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dc {
#define GEN_PASS_DEF_DCULYSSES
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Where a value carries the sharded sequence: dim `dim`, whose global size
/// is outer * S * inner (row-major), of which the rank holds outer * S/P *
/// inner (its S/P positions of each outer index).
struct SeqDim {
  int64_t dim;
  int64_t inner;
};

class Sharder {
public:
  Sharder(func::FuncOp fn, shard::GridOp grid, int64_t axis, int64_t parts,
          const DCUlyssesOptions &options)
      : fn(fn), grid(grid), axis(axis), parts(parts), options(options) {}

  LogicalResult run();

private:
  LogicalResult shardArguments();
  LogicalResult visit(Operation *op);
  LogicalResult visitLinalg(linalg::LinalgOp op);
  LogicalResult visitCollapse(tensor::CollapseShapeOp op);
  LogicalResult visitExpand(tensor::ExpandShapeOp op);
  LogicalResult visitExtractSlice(tensor::ExtractSliceOp op);
  LogicalResult visitInsertSlice(tensor::InsertSliceOp op);
  LogicalResult visitFor(scf::ForOp op);
  LogicalResult visitAttention(AttentionOp op);
  LogicalResult visitAttentionGrad(AttentionGradOp op);
  LogicalResult visitReturn(func::ReturnOp op);

  /// The local form of `init` (a tensor.empty, or a linalg.fill of one)
  /// with dim `dim` cut to its share, built before `before`.
  FailureOr<Value> localInit(Value init, int64_t dim, Operation *before,
                             Operation *user);
  /// The rank's slice of `operand` (an input of `op` computed in the step
  /// from no argument, a rotary embedding's tables) along its dim `dim`,
  /// which the sequence loop indexes: rows [i * S/P, (i + 1) * S/P) at the
  /// rank's index i on the axis.
  FailureOr<Value> rankPositions(linalg::LinalgOp op, OpOperand &operand,
                                 int64_t dim);
  /// True if `value` depends on an argument of the step (a parameter, the
  /// data): not a table the step computes from constants alone.
  bool readsArguments(Value value);
  /// Which results of `op` are partial sums, given which of its operands
  /// are: its body must be linear in them.
  FailureOr<SmallVector<bool>> partialResults(linalg::LinalgOp op);
  /// Head count of an attention operand (its batch dims over the batch).
  FailureOr<int64_t> headsOf(Operation *op, Value operand, StringRef what);
  /// [batch..., S/P, D] -> [B*H/P, S, D]: the exchange starts right after
  /// `x` is produced; its wait (and what follows) is built by `b`.
  FailureOr<Value> toHeads(OpBuilder &b, Location loc, Value x, int64_t heads);
  /// The inverse: the exchange starts at `b` (right after `y`'s attention op)
  /// and is waited right before `firstUse` (at once if null: the result is
  /// dead, and its buffer should not live on).
  Value toSequence(OpBuilder &b, Location loc, Value y, RankedTensorType type,
                   int64_t heads, Operation *firstUse);
  /// Starts the all-to-all of `x` at `b` and returns its future.
  Value startAllToAll(OpBuilder &b, Location loc, Value x, int64_t split,
                      int64_t concat);
  /// A builder right after `value` is produced (in the step's body).
  OpBuilder builderAfter(Value value);
  /// The first op of the step's body that uses `value` (or contains a use),
  /// or null if none does: where an exchange of it is waited.
  Operation *firstUser(Value value);
  RankedTensorType localType(Type type, int64_t dim) const {
    auto tensor = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(tensor.getShape());
    shape[dim] /= parts;
    return tensor.clone(shape);
  }
  bool touched(Value v) const {
    return seq.count(v) || partial.contains(v) || headForm.contains(v);
  }

  func::FuncOp fn;
  shard::GridOp grid;
  int64_t axis, parts;
  const DCUlyssesOptions &options;
  /// The global sequence length, and the batch (product of the dims before
  /// the sequence) of the sequence arguments.
  int64_t seqLen = 0, batch = 1;
  llvm::DenseMap<Value, SeqDim> seq;
  llvm::DenseSet<Value> partial;
  /// Attention log-sum-exps, kept head-sharded for dc.attention_grad.
  llvm::DenseSet<Value> headForm;
  /// A sequence-sharded attention operand or output -> its head-sharded form.
  llvm::DenseMap<Value, Value> headsFormOf;
  /// This rank's index on the sequence axis (made at the step's entry when
  /// first needed).
  Value axisIndex;
};

LogicalResult Sharder::shardArguments() {
  SmallVector<std::pair<unsigned, int64_t>> args;
  bool anyAttr = false;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    anyAttr |= fn.getArgAttr(i, kSeqDimAttrName) != nullptr;
  auto defaultDim = [&](unsigned i) -> int64_t {
    auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    return type && type.getRank() >= 2 ? 1 : 0;
  };
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    if (auto attr = fn.getArgAttr(i, kSeqDimAttrName)) {
      auto dim = dyn_cast<IntegerAttr>(attr);
      if (!dim)
        return emitError(fn.getArgument(i).getLoc())
               << "argument #" << i << ": " << kSeqDimAttrName
               << " must be an integer, got " << attr;
      args.push_back({i, dim.getInt()});
    } else if (llvm::is_contained(options.seqArgs, int64_t(i))) {
      args.push_back({i, defaultDim(i)});
    } else if (!anyAttr && options.seqArgs.empty() &&
               fn.getArgAttr(i, kVocabAttrName) &&
               !fn.getArgAttr(i, kParamAttrName)) {
      args.push_back({i, defaultDim(i)});
    }
  }
  for (int64_t index : options.seqArgs)
    if (index < 0 || index >= fn.getNumArguments())
      return fn.emitError()
             << "dc-ulysses: seq-args names argument #" << index << ", but @"
             << fn.getSymName() << " has " << fn.getNumArguments();
  if (args.empty())
    return fn.emitError() << "dc-ulysses: @" << fn.getSymName()
                          << " has no sequence argument (dc.seq_dim, "
                             "seq-args, or dc.vocab token ids)";
  for (auto [i, dim] : args) {
    BlockArgument arg = fn.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return emitError(arg.getLoc())
             << "sequence argument #" << i
             << " must be a statically shaped tensor, got " << arg.getType();
    if (fn.getArgAttr(i, kParamAttrName))
      return emitError(arg.getLoc())
             << "sequence argument #" << i << " is a parameter";
    if (dim < 0 || dim >= type.getRank())
      return emitError(arg.getLoc())
             << "sequence argument #" << i << " has no dim " << dim << " ("
             << type << ")";
    int64_t length = type.getDimSize(dim);
    if (length % parts != 0)
      return emitError(arg.getLoc())
             << "sequence argument #" << i << ": sequence length " << length
             << " is not divisible by the " << parts
             << " ranks of sequence parallelism";
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= type.getDimSize(d);
    if (seqLen == 0) {
      seqLen = length;
      batch = outer;
    } else if (seqLen != length) {
      return emitError(arg.getLoc())
             << "sequence argument #" << i << " has sequence length " << length
             << ", another has " << seqLen;
    }
    arg.setType(localType(type, dim));
    seq[arg] = {dim, 1};
    Builder b(fn.getContext());
    fn.setArgAttr(i, kSeqDimAttrName, b.getI64IntegerAttr(dim));
    fn.setArgAttr(i, kSeqAxisAttrName, b.getI64IntegerAttr(axis));
  }
  return success();
}

FailureOr<Value> Sharder::localInit(Value init, int64_t dim, Operation *before,
                                    Operation *user) {
  OpBuilder b(before);
  if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
    return tensor::EmptyOp::create(b, empty.getLoc(),
                                   localType(empty.getType(), dim).getShape(),
                                   empty.getType().getElementType())
        .getResult();
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    if (fill.getNumResults() == 1) {
      FailureOr<Value> inner =
          localInit(fill.getOutputs()[0], dim, before, user);
      if (failed(inner))
        return failure();
      return linalg::FillOp::create(b, fill.getLoc(), fill.getInputs()[0],
                                    *inner)
          .getResult(0);
    }
  }
  return user->emitError()
         << "dc-ulysses: an init spanning the full sequence must be a "
            "tensor.empty or a linalg.fill of one, to be made local";
}

/// Whether `init` is a linalg.fill of a float or integer zero.
bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && (matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
                  matchPattern(fill.getInputs()[0], m_Zero()));
}

FailureOr<SmallVector<bool>> Sharder::partialResults(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  llvm::DenseSet<Value> sums;
  for (OpOperand &operand : op->getOpOperands())
    if (partial.contains(operand.get()))
      sums.insert(op.getMatchingBlockArgument(&operand));
  for (Operation &inner : body->without_terminator()) {
    unsigned count = llvm::count_if(inner.getOperands(),
                                    [&](Value v) { return sums.contains(v); });
    if (count == 0)
      continue;
    bool linear = false;
    if (isa<arith::NegFOp, arith::TruncFOp, arith::ExtFOp>(inner))
      linear = true;
    else if (isa<arith::MulFOp>(inner))
      linear = count == 1;
    else if (isa<arith::DivFOp>(inner))
      linear = count == 1 && sums.contains(inner.getOperand(0));
    else if (isa<arith::AddFOp, arith::SubFOp>(inner))
      linear = count == 2;
    if (!linear)
      return op->emitError()
             << "dc-ulysses: '" << inner.getName()
             << "' of a partial sum over the sequence-parallel group (a "
                "reduction over the sequence) is not linear; only scaling, "
                "casts and sums of partial sums are supported";
    sums.insert(inner.getResult(0));
  }
  SmallVector<bool> result;
  for (Value yielded : body->getTerminator()->getOperands())
    result.push_back(sums.contains(yielded));
  return result;
}

bool Sharder::readsArguments(Value value) {
  SmallVector<Value> worklist{value};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == &fn.getBody().front())
        return true;
      continue;
    }
    Operation *def = v.getDefiningOp();
    def->walk([&](Operation *inner) {
      for (Value used : inner->getOperands())
        if (inner == def ||
            !def->isAncestor(used.getParentBlock()->getParentOp()))
          worklist.push_back(used);
    });
  }
  return false;
}

FailureOr<Value> Sharder::rankPositions(linalg::LinalgOp op, OpOperand &operand,
                                        int64_t dim) {
  auto type = dyn_cast<RankedTensorType>(operand.get().getType());
  bool computed = type && type.getDimSize(dim) == seqLen &&
                  !touched(operand.get()) && !readsArguments(operand.get());
  // A dim of the whole sequence's length at the loop's (global) trip: the
  // sharded operands index the sequence alone there, as the table does.
  if (!computed)
    return op->emitError() << "dc-ulysses: input #"
                           << operand.getOperandNumber()
                           << " spans the full sequence (dim " << dim
                           << ") but is not sequence-sharded";
  OpBuilder b(op);
  Location loc = op.getLoc();
  if (!axisIndex) {
    OpBuilder atEntry = OpBuilder::atBlockBegin(&fn.getBody().front());
    axisIndex = shard::ProcessMultiIndexOp::create(
                    atEntry, fn.getLoc(), grid.getSymName(),
                    ArrayRef<shard::GridAxis>{static_cast<int16_t>(axis)})
                    .getResult()[0];
  }
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes =
      getAsIndexOpFoldResult(b.getContext(), type.getShape());
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  offsets[dim] = arith::MulIOp::create(
                     b, loc, axisIndex,
                     arith::ConstantIndexOp::create(b, loc, seqLen / parts))
                     .getResult();
  sizes[dim] = b.getIndexAttr(seqLen / parts);
  return tensor::ExtractSliceOp::create(b, loc, operand.get(), offsets, sizes,
                                        strides)
      .getResult();
}

LogicalResult Sharder::visitLinalg(linalg::LinalgOp op) {
  std::optional<unsigned> loop;
  std::optional<SeqDim> from;
  for (OpOperand &operand : op->getOpOperands()) {
    auto it = seq.find(operand.get());
    if (it == seq.end())
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto expr = dyn_cast<AffineDimExpr>(map.getResult(it->second.dim));
    if (!expr)
      return op->emitError()
             << "dc-ulysses: operand #" << operand.getOperandNumber()
             << " indexes its sequence dim " << it->second.dim
             << " with an expression, not a loop dim";
    if (loop && *loop != expr.getPosition())
      return op->emitError() << "dc-ulysses: the sequence dims of the "
                                "operands map to different loops (d"
                             << *loop << ", d" << expr.getPosition() << ")";
    loop = expr.getPosition();
    if (!from)
      from = it->second;
  }
  bool anyPartial = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return partial.contains(v); });
  if (!loop) {
    WalkResult captured = op.getBlock()->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (touched(v) && !op->isAncestor(v.getParentBlock()->getParentOp())) {
          inner->emitError("dc-ulysses: reads a sequence-sharded tensor or "
                           "a partial sum inside a linalg body that has no "
                           "sequence loop");
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (captured.wasInterrupted())
      return failure();
    // Only partial sums: the body must be linear in them.
    FailureOr<SmallVector<bool>> results = partialResults(op);
    if (failed(results))
      return failure();
    for (auto [result, isPartial] : llvm::zip(op->getResults(), *results))
      if (isPartial)
        partial.insert(result);
    return success();
  }
  if (anyPartial)
    return op->emitError()
           << "dc-ulysses: combines a partial sum over the sequence-parallel "
              "group with a sequence-sharded tensor";
  // The body may read a sequence-sharded tensor captured from above at the
  // current position (tensor.extract at linalg.index of the sequence loop,
  // e.g. the logit of each token's target): local index, local tensor. Any
  // other use of the position is an error: it would be the local one.
  auto isLocalRead = [&](Operation *user, Value index) {
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract)
      return false;
    auto it = seq.find(extract.getTensor());
    return it != seq.end() && it->second.inner == from->inner &&
           extract.getIndices()[it->second.dim] == index &&
           llvm::count(extract.getIndices(), index) == 1;
  };
  WalkResult walk =
      op.getBlock()->walk([&](Operation *inner) {
        if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
          if (index.getDim() == *loop &&
              !llvm::all_of(index->getUsers(), [&](Operation *user) {
                return isLocalRead(user, index);
              })) {
            index.emitError()
                << "dc-ulysses: linalg.index of the sequence loop d" << *loop
                << " would give the local position, not the global one";
            return WalkResult::interrupt();
          }
          return WalkResult::advance();
        }
        for (Value v : inner->getOperands()) {
          if (!touched(v) || op->isAncestor(v.getParentBlock()->getParentOp()))
            continue;
          auto extract = dyn_cast<tensor::ExtractOp>(inner);
          auto it = seq.find(v);
          Value index = extract && it != seq.end() && extract.getTensor() == v
                            ? extract.getIndices()[it->second.dim]
                            : Value();
          auto position = index ? index.getDefiningOp<linalg::IndexOp>()
                                : linalg::IndexOp();
          if (!position || position.getDim() != *loop ||
              !isLocalRead(inner, index)) {
            inner->emitError()
                << "dc-ulysses: reads a sequence-sharded tensor from inside a "
                   "linalg body other than at the current position of the "
                   "sequence loop";
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
  if (walk.wasInterrupted())
    return failure();

  // Inputs must be sharded where they span the sequence loop; fresh inits
  // are made local.
  for (OpOperand &operand : op->getOpOperands()) {
    if (seq.count(operand.get()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    std::optional<unsigned> position =
        map.getResultPosition(getAffineDimExpr(*loop, op->getContext()));
    if (!position) {
      if (llvm::any_of(map.getResults(),
                       [&](AffineExpr e) { return e.isFunctionOfDim(*loop); }))
        return op->emitError()
               << "dc-ulysses: operand #" << operand.getOperandNumber()
               << " indexes the sequence loop d" << *loop
               << " in a compound expression";
      continue;
    }
    if (!op.isDpsInit(&operand)) {
      // A table the step computes, indexed by the position (a rotary
      // embedding's): this rank's positions of it.
      FailureOr<Value> positions = rankPositions(op, operand, *position);
      if (failed(positions))
        return failure();
      operand.set(*positions);
      continue;
    }
    FailureOr<Value> local = localInit(operand.get(), *position, op, op);
    if (failed(local))
      return failure();
    operand.set(*local);
  }

  bool reduction =
      op.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction;
  if (!reduction) {
    for (auto [result, init] : llvm::zip(op->getResults(), op.getDpsInits())) {
      result.setType(init.getType());
      AffineMap map = op.getMatchingIndexingMap(
          op.getDpsInitOperand(result.getResultNumber()));
      std::optional<unsigned> position =
          map.getResultPosition(getAffineDimExpr(*loop, op->getContext()));
      if (!position)
        return op->emitError()
               << "dc-ulysses: result #" << result.getResultNumber()
               << " does not keep the sequence loop d" << *loop;
      seq[result] = {static_cast<int64_t>(*position), from->inner};
    }
    return success();
  }
  // A reduction over the sequence: each rank sums its part, a partial sum
  // over the group. Only sums into zero-filled inits split that way.
  Block *body = op.getBlock();
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Value arg = op.getMatchingBlockArgument(&init);
    Value yielded = body->getTerminator()->getOperand(init.getOperandNumber() -
                                                      op.getNumDpsInputs());
    auto add = yielded.getDefiningOp<arith::AddFOp>();
    if (!add || (add.getLhs() != arg && add.getRhs() != arg) ||
        !isZeroFill(init.get()))
      return op->emitError()
             << "dc-ulysses: reduction over the sequence dim (loop d" << *loop
             << ") is not a sum into a zero-filled init; it cannot be split "
                "over the sequence-parallel group";
  }
  for (Value result : op->getResults())
    partial.insert(result);
  return success();
}

LogicalResult Sharder::visitCollapse(tensor::CollapseShapeOp op) {
  SeqDim in = seq.lookup(op.getSrc());
  auto srcType = op.getSrcType();
  for (auto [group, indices] : llvm::enumerate(op.getReassociationIndices())) {
    if (!llvm::is_contained(indices, in.dim))
      continue;
    int64_t inner = in.inner;
    for (int64_t d : indices)
      if (d > in.dim)
        inner *= srcType.getDimSize(d);
    op.getResult().setType(localType(op.getResultType(), group));
    seq[op.getResult()] = {static_cast<int64_t>(group), inner};
    return success();
  }
  return op.emitError("dc-ulysses: internal: sequence dim not collapsed");
}

LogicalResult Sharder::visitExpand(tensor::ExpandShapeOp op) {
  SeqDim in = seq.lookup(op.getSrc());
  RankedTensorType global = op.getResultType();
  ReassociationIndices group = op.getReassociationIndices()[in.dim];
  // The output dim whose inner dims (within the group) are exactly the
  // source dim's inner factor and that holds whole sequences.
  int64_t after = 1;
  for (int64_t d : llvm::reverse(group)) {
    int64_t size = global.getDimSize(d);
    if (after == in.inner && size % seqLen == 0) {
      RankedTensorType local = localType(global, d);
      op.getResult().setType(local);
      op.setStaticOutputShape(local.getShape());
      seq[op.getResult()] = {d, 1};
      return success();
    }
    after *= size;
    if (after > in.inner)
      break;
  }
  return op.emitError()
         << "dc-ulysses: this reshape splits the sequence dim (dim " << in.dim
         << " of " << op.getSrcType() << " holds sequences of " << seqLen
         << "); it cannot be sharded";
}

LogicalResult Sharder::visitExtractSlice(tensor::ExtractSliceOp op) {
  SeqDim in = seq.lookup(op.getSource());
  auto srcType = op.getSourceType();
  int64_t globalSize = srcType.getDimSize(in.dim) * parts;
  if (op.getStaticOffsets()[in.dim] != 0 ||
      op.getStaticSizes()[in.dim] != globalSize ||
      op.getStaticStrides()[in.dim] != 1)
    return op.emitError() << "dc-ulysses: slices part of the sequence dim "
                          << in.dim
                          << "; only whole-sequence slices are "
                             "supported";
  SmallVector<int64_t> sizes(op.getStaticSizes());
  sizes[in.dim] /= parts;
  llvm::SmallBitVector dropped = op.getDroppedDims();
  int64_t dim = in.dim;
  for (int64_t d = 0; d < in.dim; ++d)
    dim -= dropped.test(d);
  op.setStaticSizes(sizes);
  op.getResult().setType(localType(op.getResultType(), dim));
  seq[op.getResult()] = {dim, in.inner};
  return success();
}

LogicalResult Sharder::visitInsertSlice(tensor::InsertSliceOp op) {
  auto source = seq.find(op.getSource());
  if (source == seq.end() ||
      op.getSourceType().getRank() != op.getDestType().getRank())
    return op.emitError() << "dc-ulysses: inserts into a sequence-sharded "
                             "tensor a slice that is not sequence-sharded "
                             "the same way";
  int64_t dim = source->second.dim;
  int64_t globalSize = op.getSourceType().getDimSize(dim) * parts;
  if (op.getStaticOffsets()[dim] != 0 ||
      op.getStaticSizes()[dim] != globalSize || op.getStaticStrides()[dim] != 1)
    return op.emitError() << "dc-ulysses: inserts part of the sequence dim "
                          << dim
                          << "; only whole-sequence slices are "
                             "supported";
  auto dest = seq.find(op.getDest());
  if (dest == seq.end()) {
    FailureOr<Value> local = localInit(op.getDest(), dim, op, op);
    if (failed(local))
      return failure();
    op.getDestMutable().set(*local);
  } else if (dest->second.dim != dim) {
    return op.emitError("dc-ulysses: source and destination carry the "
                        "sequence in different dims");
  }
  SmallVector<int64_t> sizes(op.getStaticSizes());
  sizes[dim] /= parts;
  op.setStaticSizes(sizes);
  op.getResult().setType(op.getDest().getType());
  seq[op.getResult()] = {dim, source->second.inner};
  return success();
}

LogicalResult Sharder::visitFor(scf::ForOp op) {
  // The embedding gradient's scatter: a loop over the tokens that reads
  // sequence-sharded tensors only at the induction variable. It runs over
  // the local tokens; what it accumulates is a partial sum.
  Value iv = op.getInductionVar();
  std::optional<int64_t> tokens;
  WalkResult walk = op.getBody()->walk([&](Operation *inner) {
    for (OpOperand &use : inner->getOpOperands()) {
      auto it = seq.find(use.get());
      if (it == seq.end()) {
        if (touched(use.get())) {
          inner->emitError("dc-ulysses: a loop that reads a partial sum or a "
                           "head-sharded tensor is not supported");
          return WalkResult::interrupt();
        }
        continue;
      }
      int64_t dim = it->second.dim;
      Value index;
      if (auto extract = dyn_cast<tensor::ExtractOp>(inner)) {
        index = extract.getIndices()[dim];
      } else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(inner);
                 slice && slice.getStaticSizes()[dim] == 1) {
        index = dyn_cast<Value>(slice.getMixedOffsets()[dim]);
      }
      if (index != iv) {
        inner->emitError() << "dc-ulysses: a loop may read a "
                              "sequence-sharded tensor only at its "
                              "induction variable, along the sequence dim";
        return WalkResult::interrupt();
      }
      int64_t global =
          cast<RankedTensorType>(use.get().getType()).getDimSize(dim) * parts;
      if (tokens && *tokens != global) {
        inner->emitError("dc-ulysses: a loop over sequence-sharded tensors "
                         "of different lengths");
        return WalkResult::interrupt();
      }
      tokens = global;
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!tokens)
    return success();
  std::optional<int64_t> lower = getConstantIntValue(op.getLowerBound());
  std::optional<int64_t> upper = getConstantIntValue(op.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(op.getStep());
  if (lower != 0 || step != 1 || upper != *tokens)
    return op.emitError() << "dc-ulysses: a loop over the sequence must run "
                             "from 0 to its length "
                          << *tokens << " in steps of 1";
  for (Value init : op.getInitArgs())
    if (touched(init) || !isZeroFill(init))
      return op.emitError("dc-ulysses: a loop over the sequence must "
                          "accumulate into zero-filled inits");
  OpBuilder b(op);
  op.setUpperBound(
      arith::ConstantIndexOp::create(b, op.getLoc(), *tokens / parts));
  for (Value result : op.getResults())
    partial.insert(result);
  return success();
}

FailureOr<int64_t> Sharder::headsOf(Operation *op, Value operand,
                                    StringRef what) {
  auto type = cast<RankedTensorType>(operand.getType());
  auto it = seq.find(operand);
  if (it == seq.end() || it->second.dim != type.getRank() - 2 ||
      it->second.inner != 1 ||
      type.getDimSize(type.getRank() - 2) * parts != seqLen)
    return op->emitError() << "dc-ulysses: " << what
                           << " must carry the whole sequence (" << seqLen
                           << ") sharded in its sequence dim, got " << type;
  int64_t rows = 1;
  for (int64_t d = 0; d < type.getRank() - 2; ++d)
    rows *= type.getDimSize(d);
  if (rows % batch != 0)
    return op->emitError() << "dc-ulysses: the batch dims of " << what << " ("
                           << rows << ") are not a multiple of the "
                           << "batch " << batch;
  return rows / batch;
}

Value Sharder::startAllToAll(OpBuilder &b, Location loc, Value x, int64_t split,
                             int64_t concat) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[split] /= parts;
  shape[concat] *= parts;
  return AllToAllStartOp::create(b, loc, FutureType::get(type.clone(shape)), x,
                                 grid.getSymName(), axis, split, concat)
      .getFuture();
}

OpBuilder Sharder::builderAfter(Value value) {
  if (Operation *def = value.getDefiningOp()) {
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(def);
    return b;
  }
  return OpBuilder::atBlockBegin(&fn.getBody().front());
}

Operation *Sharder::firstUser(Value value) {
  Block &body = fn.getBody().front();
  Operation *first = nullptr;
  for (Operation *user : value.getUsers())
    if (Operation *top = body.findAncestorOpInBlock(*user);
        top && (!first || top->isBeforeInBlock(first)))
      first = top;
  return first;
}

FailureOr<Value> Sharder::toHeads(OpBuilder &b, Location loc, Value x,
                                  int64_t heads) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  int64_t local = type.getDimSize(rank - 2), d = type.getDimSize(rank - 1);
  Type element = type.getElementType();
  ReassociationIndices batchDims =
      llvm::to_vector(llvm::seq<int64_t>(0, rank - 2));
  OpBuilder early = builderAfter(x);
  Value rows = x;
  if (rank != 3)
    rows = tensor::CollapseShapeOp::create(
        early, loc, x,
        ArrayRef<ReassociationIndices>{batchDims, {rank - 2}, {rank - 1}});
  auto split = RankedTensorType::get({batch, heads, local, d}, element);
  Value four = tensor::ExpandShapeOp::create(
      early, loc, split, rows,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  Value future = startAllToAll(early, loc, four, /*split=*/1, /*concat=*/2);
  Value exchanged = WaitOp::create(b, loc, future);
  return tensor::CollapseShapeOp::create(
             b, loc, exchanged,
             ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}})
      .getResult();
}

Value Sharder::toSequence(OpBuilder &b, Location loc, Value y,
                          RankedTensorType type, int64_t heads,
                          Operation *firstUse) {
  auto headType = cast<RankedTensorType>(y.getType());
  int64_t rank = type.getRank();
  auto four = RankedTensorType::get(
      {batch, heads / parts, seqLen, headType.getDimSize(2)},
      headType.getElementType());
  Value split = tensor::ExpandShapeOp::create(
      b, loc, four, y, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  Value future = startAllToAll(b, loc, split, /*split=*/2, /*concat=*/1);
  OpBuilder late = firstUse ? OpBuilder(firstUse) : b;
  Value exchanged = WaitOp::create(late, loc, future);
  Value rows = tensor::CollapseShapeOp::create(
      late, loc, exchanged, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  if (rank == 3)
    return rows;
  ReassociationIndices batchDims =
      llvm::to_vector(llvm::seq<int64_t>(0, rank - 2));
  return tensor::ExpandShapeOp::create(
      late, loc, type, rows,
      ArrayRef<ReassociationIndices>{batchDims, {rank - 2}, {rank - 1}});
}

LogicalResult Sharder::visitAttention(AttentionOp op) {
  if (op.getBshd())
    return op.emitError("dc-ulysses: the bshd form is not supported (it is "
                        "made after dc-ulysses, by dc-fold-head-transposes)");
  FailureOr<int64_t> qHeads = headsOf(op, op.getQ(), "q");
  if (failed(qHeads))
    return failure();
  FailureOr<int64_t> kHeads = headsOf(op, op.getK(), "k");
  if (failed(kHeads))
    return failure();
  FailureOr<int64_t> vHeads = headsOf(op, op.getV(), "v");
  if (failed(vHeads))
    return failure();
  if (*qHeads % parts != 0)
    return op.emitError() << "dc-ulysses: sequence parallelism " << parts
                          << " does not divide the " << *qHeads
                          << " query heads (q is " << op.getQ().getType()
                          << " for a batch of " << batch << ")";
  if (*kHeads % parts != 0 || *vHeads % parts != 0)
    return op.emitError() << "dc-ulysses: sequence parallelism " << parts
                          << " does not divide the "
                          << (*kHeads % parts ? *kHeads : *vHeads)
                          << " key/value heads ("
                          << (*kHeads % parts ? "k" : "v") << " is "
                          << (*kHeads % parts ? op.getK() : op.getV()).getType()
                          << " for a batch of " << batch << ")";
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto heads = [&](Value x, int64_t count) -> FailureOr<Value> {
    if (Value known = headsFormOf.lookup(x))
      return known;
    FailureOr<Value> converted = toHeads(b, loc, x, count);
    if (succeeded(converted))
      headsFormOf[x] = *converted;
    return converted;
  };
  FailureOr<Value> q = heads(op.getQ(), *qHeads);
  FailureOr<Value> k = heads(op.getK(), *kHeads);
  FailureOr<Value> v = heads(op.getV(), *vHeads);
  if (failed(q) || failed(k) || failed(v))
    return failure();
  auto fused = AttentionOp::create(
      b, loc, *q, *k, *v, op.getScale().convertToFloat(), op.getCausal());
  fused->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  auto localType = cast<RankedTensorType>(op.getQ().getType());
  Value o = toSequence(b, loc, fused.getO(), localType, *qHeads,
                       firstUser(op.getO()));
  headsFormOf[o] = fused.getO();
  seq[o] = {localType.getRank() - 2, 1};
  headForm.insert(fused.getLse());
  for (OpOperand &use : op.getLse().getUses())
    if (!isa<AttentionGradOp>(use.getOwner()))
      return use.getOwner()->emitError()
             << "dc-ulysses: uses the log-sum-exp of a dc.attention, which "
                "stays head-sharded; only dc.attention_grad may";
  op.getO().replaceAllUsesWith(o);
  op.getLse().replaceAllUsesWith(fused.getLse());
  op.erase();
  return success();
}

LogicalResult Sharder::visitAttentionGrad(AttentionGradOp op) {
  if (op.getBshd())
    return op.emitError("dc-ulysses: the bshd form is not supported (it is "
                        "made after dc-ulysses, by dc-fold-head-transposes)");
  if (!headForm.contains(op.getLse()))
    return op.emitError("dc-ulysses: the log-sum-exp must come from a "
                        "dc.attention the pass sharded");
  FailureOr<int64_t> qHeads = headsOf(op, op.getQ(), "q");
  if (failed(qHeads))
    return failure();
  FailureOr<int64_t> kHeads = headsOf(op, op.getK(), "k");
  if (failed(kHeads))
    return failure();
  FailureOr<int64_t> vHeads = headsOf(op, op.getV(), "v");
  if (failed(vHeads) || failed(headsOf(op, op.getO(), "o")) ||
      failed(headsOf(op, op.getDO(), "do")))
    return failure();
  if (*qHeads % parts || *kHeads % parts || *vHeads % parts)
    return op.emitError() << "dc-ulysses: sequence parallelism " << parts
                          << " does not divide the heads of q (" << *qHeads
                          << "), k (" << *kHeads << ") or v (" << *vHeads
                          << ")";
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto heads = [&](Value x, int64_t count) -> FailureOr<Value> {
    if (Value known = headsFormOf.lookup(x))
      return known;
    return toHeads(b, loc, x, count);
  };
  FailureOr<Value> q = heads(op.getQ(), *qHeads);
  FailureOr<Value> k = heads(op.getK(), *kHeads);
  FailureOr<Value> v = heads(op.getV(), *vHeads);
  FailureOr<Value> o = heads(op.getO(), *qHeads);
  FailureOr<Value> dO = heads(op.getDO(), *qHeads);
  if (failed(q) || failed(k) || failed(v) || failed(o) || failed(dO))
    return failure();
  auto grad =
      AttentionGradOp::create(b, loc, *q, *k, *v, *o, op.getLse(), *dO,
                              op.getScale().convertToFloat(), op.getCausal());
  grad->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  int64_t counts[] = {*qHeads, *kHeads, *vHeads};
  for (auto [old, fresh, count] :
       llvm::zip(op->getResults(), grad->getResults(), counts)) {
    auto type = cast<RankedTensorType>(old.getType());
    Value back = toSequence(b, loc, fresh, localType(type, type.getRank() - 2),
                            count, firstUser(old));
    seq[back] = {type.getRank() - 2, 1};
    old.replaceAllUsesWith(back);
  }
  op.erase();
  return success();
}

LogicalResult Sharder::visitReturn(func::ReturnOp op) {
  OpBuilder b(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value value = operand.get();
    unsigned i = operand.getOperandNumber();
    if (seq.count(value) || headForm.contains(value))
      return op.emitError() << "dc-ulysses: result #" << i
                            << " is sharded over the sequence; a step "
                               "returns only the loss and gradients";
    bool isLoss = fn.getResultAttr(i, kLossAttrName) != nullptr;
    bool isGrad = fn.getResultAttr(i, kGradAttrName) != nullptr;
    if (!partial.contains(value))
      continue;
    if (!isLoss && !isGrad)
      return op.emitError() << "dc-ulysses: result #" << i
                            << " is a partial sum over the sequence-parallel "
                               "group but neither the loss nor a gradient";
    if (isGrad && !options.reduceGrads)
      continue;
    Operation *def = value.getDefiningOp();
    OpBuilder after(op);
    if (def && def->getBlock() == op->getBlock())
      after.setInsertionPointAfter(def);
    auto start =
        AllReduceStartOp::create(after, op.getLoc(), shard::ReductionKind::Sum,
                                 value, grid.getSymName(), axis);
    operand.set(WaitOp::create(b, op.getLoc(), start.getFuture()));
  }
  return success();
}

LogicalResult Sharder::visit(Operation *op) {
  bool operands =
      llvm::any_of(op->getOperands(), [&](Value v) { return touched(v); });
  bool captured = false;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    for (Value v : inner->getOperands())
      if (touched(v) && !op->isAncestor(v.getParentBlock()->getParentOp()))
        captured = true;
  });
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return visitReturn(ret);
  if (auto forOp = dyn_cast<scf::ForOp>(op)) {
    if (llvm::any_of(forOp.getInitArgs(), [&](Value v) { return touched(v); }))
      return op->emitError("dc-ulysses: a loop carrying a sequence-sharded "
                           "value is not supported");
    return captured ? visitFor(forOp) : success();
  }
  if (!operands && !captured)
    return success();
  if (captured && !isa<linalg::LinalgOp>(op))
    return op->emitError() << "dc-ulysses: '" << op->getName()
                           << "' uses a sequence-sharded value inside its "
                              "region; not supported";
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      linalgOp && linalgOp.hasPureTensorSemantics())
    return visitLinalg(linalgOp);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op);
      collapse && seq.count(collapse.getSrc()))
    return visitCollapse(collapse);
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op);
      expand && seq.count(expand.getSrc()))
    return visitExpand(expand);
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
      slice && seq.count(slice.getSource()))
    return visitExtractSlice(slice);
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
    return visitInsertSlice(insert);
  if (auto attention = dyn_cast<AttentionOp>(op))
    return visitAttention(attention);
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return visitAttentionGrad(grad);
  return op->emitError() << "dc-ulysses: cannot carry the sharded sequence "
                            "(or a partial sum over it) through '"
                         << op->getName() << "'";
}

LogicalResult Sharder::run() {
  if (!llvm::hasSingleElement(fn.getBody()))
    return fn.emitError("dc-ulysses needs a step function with one block");
  if (failed(shardArguments()))
    return failure();
  Block &body = fn.getBody().front();
  SmallVector<Operation *> ops =
      llvm::map_to_vector(body, [](Operation &op) { return &op; });
  for (Operation *op : ops)
    if (failed(visit(op)))
      return failure();
  // The global-size inits the local ones replaced.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<tensor::EmptyOp, linalg::FillOp>(op) && isOpTriviallyDead(&op))
      op.erase();
  fn.setType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                               body.getTerminator()->getOperandTypes()));
  return success();
}

struct UlyssesPass : public dc::impl::DCUlyssesBase<UlyssesPass> {
  using DCUlyssesBase::DCUlyssesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptionRange(module, getArgument(), "sequence-parallel",
                                sequenceParallel, 0, kMaxWorldSize)) ||
        failed(checkOptionRange(module, getArgument(), "world-size", worldSize,
                                0, kMaxWorldSize)) ||
        failed(
            checkOptionRange(module, getArgument(), "grid-axis", gridAxis, 0)))
      return signalPassFailure();
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() &&
          llvm::any_of(llvm::seq(fn.getNumResults()), [&](unsigned i) {
            return fn.getResultAttr(i, kLossAttrName) != nullptr;
          }))
        steps.push_back(fn);
    if (steps.empty())
      return;
    FailureOr<shard::GridOp> grid = getOrCreateGrid(module);
    if (failed(grid))
      return signalPassFailure();
    int64_t parts = grid->getShape()[gridAxis];
    if (parts == 1)
      return;
    DCUlyssesOptions options;
    options.seqArgs.assign(seqArgs.begin(), seqArgs.end());
    options.reduceGrads = reduceGrads;
    for (func::FuncOp fn : steps)
      if (failed(Sharder(fn, *grid, gridAxis, parts, options).run()))
        return signalPassFailure();
  }

  FailureOr<shard::GridOp> getOrCreateGrid(ModuleOp module) {
    auto grid = module.lookupSymbol<shard::GridOp>(gridName);
    if (!grid) {
      if (sequenceParallel < 1)
        return module.emitError()
               << "dc-ulysses: the module has no shard.grid @" << gridName
               << "; pass sequence-parallel=N to create one";
      int64_t world = worldSize > 0 ? worldSize : sequenceParallel;
      if (world % sequenceParallel != 0)
        return module.emitError() << "dc-ulysses: world-size=" << world
                                  << " is not a multiple of sequence-parallel="
                                  << int64_t(sequenceParallel);
      SmallVector<int64_t> shape{sequenceParallel};
      if (world > sequenceParallel)
        shape.insert(shape.begin(), world / sequenceParallel);
      if (gridAxis != static_cast<int64_t>(shape.size()) - 1)
        return module.emitError()
               << "dc-ulysses: a new grid has the sequence on axis "
               << shape.size() - 1 << ", not grid-axis " << int64_t(gridAxis);
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      return shard::GridOp::create(builder, module.getLoc(), gridName, shape);
    }
    ArrayRef<int64_t> shape = grid.getShape();
    if (gridAxis >= static_cast<int64_t>(shape.size()))
      return grid.emitError() << "dc-ulysses: grid-axis " << int64_t(gridAxis)
                              << " does not exist on this grid";
    if (ShapedType::isDynamic(shape[gridAxis]))
      return grid.emitError()
             << "dc-ulysses: grid axis " << int64_t(gridAxis) << " is dynamic";
    int64_t world = 1;
    for (int64_t size : shape)
      world *= size;
    if (worldSize > 0 && world != worldSize)
      return grid.emitError() << "dc-ulysses: world-size=" << int64_t(worldSize)
                              << " but this grid has " << world << " ranks";
    if (sequenceParallel > 0 && shape[gridAxis] != sequenceParallel)
      return grid.emitError()
             << "dc-ulysses: sequence-parallel=" << int64_t(sequenceParallel)
             << " but this grid's axis " << int64_t(gridAxis) << " has "
             << shape[gridAxis] << " ranks";
    return grid;
  }
};

} // namespace
