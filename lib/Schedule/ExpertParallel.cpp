//===- ExpertParallel.cpp - experts divided over a grid axis --------------===//
//
// Expert parallelism: each rank of the expert axis holds E/W of every
// routing's experts, keeps its own tokens, and the rows of the routing's
// sorted space travel to the rank of their expert and back. Shapes stay
// static by giving every peer a slot of S rows: a dispatch sends
// [W, S, ...] (slot s: the rows for rank s's experts, a prefix of the slot,
// the rest zeros) and the receiver re-groups the real rows of all slots by
// its local experts; a combine is the same exchange back. S is the most
// rows a rank can send one peer: all its N sorted rows, or, where the
// grouping has a capacity C, C for each of the peer's E/W experts. So every
// buffer's worst case (every row of every rank to one rank's experts, or
// each of its experts full) is its static size, which the memory timeline
// and the budget see.
//
// What runs on the experts' ranks is found as the ops that read what the
// grouped products made, as long as they are row-parallel (a row of the
// result depends on the same row of the operands only): those ops work on
// any permutation of the rows, so they run on the received rows as they
// are. Their other row operands are dispatched, and their results combined
// where an op that is not row-parallel reads them. Exchanges start right
// after their input is made and are waited right before their first use.
//
//===----------------------------------------------------------------------===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <deque>

namespace dc {
#define GEN_PASS_DEF_DCEXPERTPARALLEL
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// One routing made expert-parallel: what its exchanges read.
struct Routing {
  GroupByExpertOp group;
  /// E experts, E/W on each rank, N sorted rows per rank, and S rows in
  /// each peer's slot: N, or min(N, C E/W) for a grouping of capacity C.
  int64_t experts = 0, localExperts = 0, rows = 0, slotRows = 0;
  /// The element type of the routing's indices (order, ends).
  Type indexType;
  /// [W, E/W]: the rows this rank sends to each peer for each of the
  /// peer's experts, in flight.
  Value countsFuture;
  /// [W S]: for slot s row j, the sender's sorted row (-1: padding).
  Value packIndex;
  /// The received rows' regrouping by local expert (made before the first
  /// op that needs it): `order` [W S] and `ends` [E/W].
  Value order, ends;
  /// Sorted value -> its rows on the experts' ranks, and back.
  llvm::DenseMap<Value, Value> dispatched, combined;
};

/// What a value of the original step became.
enum class Moved { Remote, ExpertBlock };

class ExpertSharder {
public:
  ExpertSharder(func::FuncOp fn, shard::GridOp grid, int64_t axis,
                int64_t parts)
      : fn(fn), grid(grid), axis(axis), parts(parts) {}

  /// Fails with a located error; `routed` counts the routings made
  /// expert-parallel.
  LogicalResult run(int64_t &routed);

private:
  LogicalResult collectRoutings();
  LogicalResult splitExpertParams();
  LogicalResult visit(Operation *op);
  void beginRouting(Routing &routing);
  void ensureRegrouped(Routing &routing, Operation *before);
  Value dispatch(Routing &routing, Value value, Operation *consumer);
  Value combine(Routing &routing, Value remote, Operation *consumer);
  bool isSorted(Routing &routing, Value value);
  bool isOrderDerived(Routing &routing, Value value);
  std::optional<unsigned> rowDimOf(linalg::GenericOp op, Routing &routing);
  bool canMove(linalg::GenericOp op, Routing &routing, unsigned rowDim);
  Routing *pulledBy(linalg::GenericOp op);
  LogicalResult moveRowParallel(linalg::GenericOp op, Routing &routing,
                                unsigned rowDim);
  LogicalResult moveGrouped(Operation *op, Routing &routing);
  LogicalResult splitElementwise(Operation *op);
  LogicalResult localizeOperands(Operation *op);
  Value freshInit(OpBuilder &builder, Value init, RankedTensorType type);
  RankedTensorType widened(Type type, Routing &routing) const;
  RankedTensorType slotted(Type type, Routing &routing) const;
  void record(Value from, Value to, Moved kind, Routing *routing);
  Routing *routingOfEnds(Value ends);

  func::FuncOp fn;
  shard::GridOp grid;
  int64_t axis, parts;
  std::deque<Routing> routings;
  /// Values of the step that moved: their new value, what kind, and (for
  /// rows on the experts' ranks) their routing.
  llvm::DenseMap<Value, std::tuple<Value, Moved, Routing *>> moved;
  /// Original ops replaced by their moved clones, erased at the end.
  SmallVector<Operation *> replaced;
};

/// A tensor of `shape` and `element` type whose element at each index is
/// `compute(indices)`: a parallel linalg.generic reading what it needs from
/// tensors of the enclosing block (tensor.extract at computed indices).
Value buildIndexed(
    OpBuilder &builder, Location loc, ArrayRef<int64_t> shape, Type element,
    llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> compute) {
  auto type = RankedTensorType::get(shape, element);
  Value init = tensor::EmptyOp::create(builder, loc, shape, element);
  SmallVector<AffineMap> maps{builder.getMultiDimIdentityMap(shape.size())};
  SmallVector<utils::IteratorType> iterators(shape.size(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{type}, ValueRange{}, ValueRange{init}, maps,
      iterators, [&](OpBuilder &body, Location at, ValueRange) {
        SmallVector<Value> indices;
        for (unsigned dim = 0; dim < shape.size(); ++dim)
          indices.push_back(linalg::IndexOp::create(body, at, dim));
        linalg::YieldOp::create(body, at, compute(body, at, indices));
      });
  return generic.getResult(0);
}

Value indexConstant(OpBuilder &builder, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(builder, loc, value);
}

Value intConstant(OpBuilder &builder, Location loc, Type type, int64_t value) {
  return arith::ConstantOp::create(builder, loc,
                                   builder.getIntegerAttr(type, value));
}

/// `ends[e - 1]`, or 0 for e == 0 (the start of expert e's rows).
Value startOf(OpBuilder &builder, Location loc, Value ends, Value expert,
              Type type) {
  Value zero = indexConstant(builder, loc, 0);
  Value one = indexConstant(builder, loc, 1);
  Value previous = arith::MaxSIOp::create(
      builder, loc, arith::SubIOp::create(builder, loc, expert, one), zero);
  Value value = tensor::ExtractOp::create(builder, loc, ends, previous);
  Value first = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                                      expert, zero);
  return arith::SelectOp::create(builder, loc, first,
                                 intConstant(builder, loc, type, 0), value);
}

/// The op of `value`'s definition in the step's block, or null.
Operation *definingTopOp(Block &body, Value value) {
  Operation *def = value.getDefiningOp();
  return def ? body.findAncestorOpInBlock(*def) : nullptr;
}

RankedTensorType ExpertSharder::widened(Type type, Routing &routing) const {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[0] = parts * routing.slotRows;
  return tensor.clone(shape);
}

RankedTensorType ExpertSharder::slotted(Type type, Routing &routing) const {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape{parts, routing.slotRows};
  llvm::append_range(shape, tensor.getShape().drop_front());
  return tensor.clone(shape);
}

/// [[0, 1], [2], ...]: the slot dims of a [W, S, ...] tensor merged.
SmallVector<ReassociationIndices> slotReassociation(int64_t rank) {
  SmallVector<ReassociationIndices> groups{{0, 1}};
  for (int64_t dim = 2; dim < rank; ++dim)
    groups.push_back({dim});
  return groups;
}

void ExpertSharder::record(Value from, Value to, Moved kind, Routing *routing) {
  moved[from] = {to, kind, routing};
}

Routing *ExpertSharder::routingOfEnds(Value ends) {
  for (Routing &routing : routings)
    if (routing.group.getEnds() == ends)
      return &routing;
  return nullptr;
}

LogicalResult ExpertSharder::collectRoutings() {
  for (auto group : fn.getBody().front().getOps<GroupByExpertOp>()) {
    bool grouped = llvm::any_of(group.getEnds().getUsers(), [](Operation *op) {
      return isa<GroupedMatmulOp, GroupedWeightGradOp>(op);
    });
    if (!grouped)
      continue;
    int64_t experts = group.getExperts();
    if (experts % parts != 0)
      return group.emitError()
             << "dc-expert-parallel: " << parts
             << " ranks on the expert axis do not divide this routing's "
             << experts << " experts";
    for (Operation *user : group.getEnds().getUsers())
      if (!isa<GroupedMatmulOp, GroupedWeightGradOp>(user))
        return user->emitError()
               << "dc-expert-parallel: reads the ends of a routing's expert "
                  "groups, which only the grouped products may read (they "
                  "are each rank's own, not the experts' ranks')";
    Routing &routing = routings.emplace_back();
    routing.group = group;
    routing.experts = experts;
    routing.localExperts = experts / parts;
    routing.rows = group.getOrder().getType().getDimSize(0);
    routing.slotRows = routing.rows;
    if (std::optional<int64_t> capacity = group.getCapacity())
      routing.slotRows =
          std::min(routing.rows, *capacity * routing.localExperts);
    routing.indexType = group.getEnds().getType().getElementType();
  }
  return success();
}

/// The stacked expert parameters: the grouped products' right-hand sides,
/// arguments or elementwise casts of them. Each becomes the rank's block.
LogicalResult ExpertSharder::splitExpertParams() {
  llvm::SetVector<BlockArgument> params;
  for (Routing &routing : routings)
    for (Operation *user : routing.group.getEnds().getUsers()) {
      auto matmul = dyn_cast<GroupedMatmulOp>(user);
      if (!matmul)
        continue;
      Value rhs = matmul.getRhs();
      // Through casts (arith on tensors, or a one-input elementwise generic).
      while (Operation *def = rhs.getDefiningOp()) {
        auto generic = dyn_cast<linalg::GenericOp>(def);
        if (isa<arith::TruncFOp, arith::ExtFOp>(def))
          rhs = def->getOperand(0);
        else if (generic && generic.getNumDpsInputs() == 1 &&
                 generic.getNumParallelLoops() == generic.getNumLoops())
          rhs = generic.getDpsInputOperand(0)->get();
        else
          break;
      }
      auto arg = dyn_cast<BlockArgument>(rhs);
      if (!arg || arg.getOwner() != &fn.getBody().front() ||
          !fn.getArgAttr(arg.getArgNumber(), kParamAttrName))
        return matmul.emitError()
               << "dc-expert-parallel: the stacked expert weights of this "
                  "grouped product are not a parameter argument (or a cast "
                  "of one); only parameters can be divided over the experts' "
                  "ranks";
      if (cast<RankedTensorType>(arg.getType()).getDimSize(0) !=
          routing.experts)
        return matmul.emitError()
               << "dc-expert-parallel: stacked weights " << arg.getType()
               << " do not have the " << routing.experts
               << " experts of the routing";
      params.insert(arg);
    }
  for (BlockArgument arg : params) {
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= parts;
    arg.setType(type.clone(shape));
    fn.setArgAttr(
        arg.getArgNumber(), kExpertAxisAttrName,
        IntegerAttr::get(IntegerType::get(fn.getContext(), 64), axis));
    record(arg, arg, Moved::ExpertBlock, nullptr);
  }
  return success();
}

/// Right after the routing's grouping: the counts each peer gets (and their
/// exchange, started), and the pack index of the dispatches.
void ExpertSharder::beginRouting(Routing &routing) {
  GroupByExpertOp group = routing.group;
  OpBuilder builder(group->getContext());
  builder.setInsertionPointAfter(group);
  Location loc = group.getLoc();
  Value ends = group.getEnds();
  Type type = routing.indexType;
  int64_t local = routing.localExperts, rows = routing.slotRows;

  Value counts = buildIndexed(
      builder, loc, {parts, local}, type,
      [&](OpBuilder &b, Location at, ValueRange index) {
        Value expert = arith::AddIOp::create(
            b, at,
            arith::MulIOp::create(b, at, index[0], indexConstant(b, at, local)),
            index[1]);
        Value end = tensor::ExtractOp::create(b, at, ends, expert);
        return arith::SubIOp::create(b, at, end,
                                     startOf(b, at, ends, expert, type));
      });
  routing.countsFuture =
      AllToAllStartOp::create(
          builder, loc,
          FutureType::get(cast<RankedTensorType>(counts.getType())), counts,
          grid.getSymName(), axis, 0, 0)
          .getFuture();

  routing.packIndex = buildIndexed(
      builder, loc, {parts * rows}, type,
      [&](OpBuilder &b, Location at, ValueRange index) {
        Value n = indexConstant(b, at, rows);
        Value peer = arith::DivUIOp::create(b, at, index[0], n);
        Value row = arith::RemUIOp::create(b, at, index[0], n);
        Value first =
            arith::MulIOp::create(b, at, peer, indexConstant(b, at, local));
        Value last = arith::SubIOp::create(
            b, at,
            arith::AddIOp::create(b, at, first, indexConstant(b, at, local)),
            indexConstant(b, at, 1));
        Value start = startOf(b, at, ends, first, type);
        Value end = tensor::ExtractOp::create(b, at, ends, last);
        Value rowValue = arith::IndexCastOp::create(b, at, type, row);
        Value inSlot =
            arith::CmpIOp::create(b, at, arith::CmpIPredicate::slt, rowValue,
                                  arith::SubIOp::create(b, at, end, start));
        return arith::SelectOp::create(
            b, at, inSlot, arith::AddIOp::create(b, at, start, rowValue),
            intConstant(b, at, type, -1));
      });
}

/// Before `before`: the counts received, each received row's local expert
/// (E/W for padding) and their grouping.
void ExpertSharder::ensureRegrouped(Routing &routing, Operation *before) {
  if (routing.order)
    return;
  OpBuilder builder(before);
  Location loc = routing.group.getLoc();
  Type type = routing.indexType;
  int64_t local = routing.localExperts, rows = routing.slotRows;
  Value received = WaitOp::create(builder, loc, routing.countsFuture);
  Value ids = buildIndexed(
      builder, loc, {parts * rows}, type,
      [&](OpBuilder &b, Location at, ValueRange index) {
        Value n = indexConstant(b, at, rows);
        Value peer = arith::DivUIOp::create(b, at, index[0], n);
        Value row = arith::IndexCastOp::create(
            b, at, type, arith::RemUIOp::create(b, at, index[0], n));
        // The row's expert is the number of the peer's experts whose rows
        // end at or before it (E/W past the last: padding).
        Value end = intConstant(b, at, type, 0);
        Value id = intConstant(b, at, type, 0);
        Value one = intConstant(b, at, type, 1);
        Value zero = intConstant(b, at, type, 0);
        for (int64_t expert = 0; expert < local; ++expert) {
          Value count = tensor::ExtractOp::create(
              b, at, received, ValueRange{peer, indexConstant(b, at, expert)});
          end = arith::AddIOp::create(b, at, end, count);
          Value past =
              arith::CmpIOp::create(b, at, arith::CmpIPredicate::sle, end, row);
          id = arith::AddIOp::create(
              b, at, id, arith::SelectOp::create(b, at, past, one, zero));
        }
        return id;
      });
  auto regroup = GroupByExpertOp::create(
      builder, loc, RankedTensorType::get({parts * rows}, type),
      RankedTensorType::get({local}, type), ids,
      builder.getI64IntegerAttr(local), /*capacity=*/IntegerAttr());
  routing.order = regroup.getOrder();
  routing.ends = regroup.getEnds();
}

Value ExpertSharder::dispatch(Routing &routing, Value value,
                              Operation *consumer) {
  if (Value done = routing.dispatched.lookup(value))
    return done;
  Block &body = fn.getBody().front();
  Operation *def = definingTopOp(body, value);
  Operation *pack = routing.packIndex.getDefiningOp();
  OpBuilder builder(consumer->getContext());
  builder.setInsertionPointAfter(def && pack->isBeforeInBlock(def) ? def
                                                                   : pack);
  Location loc = value.getLoc();
  auto type = cast<RankedTensorType>(value.getType());
  Value packed = GatherRowsOp::create(builder, loc, widened(type, routing),
                                      value, routing.packIndex);
  RankedTensorType slots = slotted(type, routing);
  auto reassociation = slotReassociation(slots.getRank());
  Value send =
      tensor::ExpandShapeOp::create(builder, loc, slots, packed, reassociation);
  Value future = AllToAllStartOp::create(builder, loc, FutureType::get(slots),
                                         send, grid.getSymName(), axis, 0, 0)
                     .getFuture();
  ensureRegrouped(routing, consumer);
  builder.setInsertionPoint(consumer);
  Value received = WaitOp::create(builder, loc, future);
  Value rows =
      tensor::CollapseShapeOp::create(builder, loc, received, reassociation);
  Value remote = GatherRowsOp::create(builder, loc, widened(type, routing),
                                      rows, routing.order);
  routing.dispatched[value] = remote;
  return remote;
}

Value ExpertSharder::combine(Routing &routing, Value remote,
                             Operation *consumer) {
  if (Value done = routing.combined.lookup(remote))
    return done;
  Block &body = fn.getBody().front();
  OpBuilder builder(consumer->getContext());
  builder.setInsertionPointAfter(definingTopOp(body, remote));
  Location loc = remote.getLoc();
  auto type = cast<RankedTensorType>(remote.getType());
  // Back to the received order (the regrouping is a permutation), then to
  // the slots each peer sent.
  Value back =
      ScatterAddRowsOp::create(builder, loc, type, remote, routing.order);
  SmallVector<int64_t> localShape(type.getShape());
  localShape[0] = routing.rows;
  RankedTensorType slots = slotted(type.clone(localShape), routing);
  auto reassociation = slotReassociation(slots.getRank());
  Value send =
      tensor::ExpandShapeOp::create(builder, loc, slots, back, reassociation);
  Value future = AllToAllStartOp::create(builder, loc, FutureType::get(slots),
                                         send, grid.getSymName(), axis, 0, 0)
                     .getFuture();
  builder.setInsertionPoint(consumer);
  Value received = WaitOp::create(builder, loc, future);
  Value rows =
      tensor::CollapseShapeOp::create(builder, loc, received, reassociation);
  Value local = ScatterAddRowsOp::create(builder, loc, type.clone(localShape),
                                         rows, routing.packIndex);
  routing.combined[remote] = local;
  return local;
}

bool ExpertSharder::isOrderDerived(Routing &routing, Value value) {
  if (value == routing.group.getOrder())
    return true;
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  return generic && generic.getNumDpsInputs() == 1 &&
         generic.getNumParallelLoops() == generic.getNumLoops() &&
         isOrderDerived(routing, generic.getDpsInputOperand(0)->get());
}

/// Whether `value` has the routing's N rows in its sorted order: a gather
/// by the order (or the token of each sorted row), or a row-parallel op of
/// such values.
bool ExpertSharder::isSorted(Routing &routing, Value value) {
  if (auto gather = value.getDefiningOp<GatherRowsOp>())
    return isOrderDerived(routing, gather.getIndex());
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic)
    return false;
  std::optional<unsigned> rowDim = rowDimOf(generic, routing);
  if (!rowDim)
    return false;
  bool any = false;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(input);
    if (map.getNumResults() == 0 ||
        map.getResult(0) != getAffineDimExpr(*rowDim, map.getContext()))
      continue;
    if (!isSorted(routing, input->get()))
      return false;
    any = true;
  }
  return any;
}

/// The loop dim along which `op` is row-parallel over the routing's rows:
/// every operand that uses it indexes its dim 0 with it (N rows) and no
/// other dim, the loop is parallel, the body does not read its index, and
/// the body captures no value but constants (a captured value may differ
/// between ranks). Operands that do not use it must be constants or
/// parameters, the same on every rank.
std::optional<unsigned> ExpertSharder::rowDimOf(linalg::GenericOp op,
                                                Routing &routing) {
  // The dim that indexes the rows of an operand the experts' ranks made,
  // else of any operand with N rows.
  std::optional<unsigned> rowDim, anyRowDim;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type || map.getNumResults() == 0)
      continue;
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(0));
    if (!dim || type.getDimSize(0) != routing.rows)
      continue;
    auto it = moved.find(operand.get());
    if (!rowDim && it != moved.end() &&
        std::get<1>(it->second) == Moved::Remote)
      rowDim = dim.getPosition();
    if (!anyRowDim)
      anyRowDim = dim.getPosition();
  }
  if (!rowDim)
    rowDim = anyRowDim;
  if (!rowDim ||
      op.getIteratorTypesArray()[*rowDim] != utils::IteratorType::parallel)
    return std::nullopt;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    bool rowOperand = false;
    for (auto [i, expr] : llvm::enumerate(map.getResults())) {
      if (!expr.isFunctionOfDim(*rowDim))
        continue;
      if (i != 0 || !isa<AffineDimExpr>(expr))
        return std::nullopt;
      rowOperand = true;
    }
    if (rowOperand || op.isDpsInit(&operand))
      continue;
    Value value = operand.get();
    auto arg = dyn_cast<BlockArgument>(value);
    bool invariant = matchPattern(value, m_Constant()) ||
                     (arg && fn.getArgAttr(arg.getArgNumber(), kParamAttrName));
    if (!invariant)
      return std::nullopt;
  }
  bool local = false;
  op.getRegion().walk([&](Operation *inner) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner))
      local |= index.getDim() == *rowDim;
    for (Value operand : inner->getOperands())
      if (!op.getRegion().isAncestor(operand.getParentRegion()) &&
          !matchPattern(operand, m_Constant()))
        local = true;
  });
  if (local)
    return std::nullopt;
  return rowDim;
}

/// A tensor like `init` (a tensor.empty, or a linalg.fill of one) of
/// `type`, made before the builder's point.
Value ExpertSharder::freshInit(OpBuilder &builder, Value init,
                               RankedTensorType type) {
  Location loc = init.getLoc();
  if (init.getDefiningOp<tensor::EmptyOp>())
    return tensor::EmptyOp::create(builder, loc, type.getShape(),
                                   type.getElementType());
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return nullptr;
  Value empty = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                        type.getElementType());
  return linalg::FillOp::create(builder, loc, fill.getInputs()[0], empty)
      .getResult(0);
}

/// Whether every row operand of `op` is on the experts' ranks already, can
/// be sent there (in the routing's sorted order), or is a fresh init.
bool ExpertSharder::canMove(linalg::GenericOp op, Routing &routing,
                            unsigned rowDim) {
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (map.getNumResults() == 0 ||
        map.getResult(0) != getAffineDimExpr(rowDim, op.getContext()))
      continue;
    Value value = operand.get();
    auto it = moved.find(value);
    if (it != moved.end()) {
      if (std::get<1>(it->second) != Moved::Remote ||
          std::get<2>(it->second) != &routing)
        return false;
      continue;
    }
    bool freshInit =
        op.isDpsInit(&operand) && (value.getDefiningOp<tensor::EmptyOp>() ||
                                   (value.getDefiningOp<linalg::FillOp>() &&
                                    value.getDefiningOp<linalg::FillOp>()
                                        .getOutputs()[0]
                                        .getDefiningOp<tensor::EmptyOp>()));
    if (!freshInit && !isSorted(routing, value))
      return false;
  }
  return true;
}

/// The routing whose grouped products read `op`'s results and nothing
/// else does: then the op runs on the experts' ranks too (its operands are
/// sent, not its result: the routing weights' scaling of the output
/// gradient, whose weights went there in the forward).
Routing *ExpertSharder::pulledBy(linalg::GenericOp op) {
  Routing *routing = nullptr;
  for (Operation *user : op->getUsers()) {
    if (!isa<GroupedMatmulOp, GroupedWeightGradOp>(user))
      return nullptr;
    Routing *of = routingOfEnds(user->getOperand(2));
    if (!of || (routing && of != routing))
      return nullptr;
    if (auto matmul = dyn_cast<GroupedMatmulOp>(user);
        matmul && matmul.getRhs() == op->getResult(0))
      return nullptr;
    routing = of;
  }
  return routing;
}

LogicalResult ExpertSharder::moveRowParallel(linalg::GenericOp op,
                                             Routing &routing,
                                             unsigned rowDim) {
  OpBuilder builder(op);
  IRMapping mapping;
  SmallVector<Type> resultTypes;
  for (OpOperand &operand : op->getOpOperands()) {
    Value value = operand.get();
    AffineMap map = op.getMatchingIndexingMap(&operand);
    bool rowOperand = map.getNumResults() > 0 &&
                      map.getResult(0) == builder.getAffineDimExpr(rowDim);
    Value moved;
    if (!rowOperand) {
      moved = value;
    } else if (auto it = this->moved.find(value); it != this->moved.end()) {
      moved = std::get<0>(it->second);
    } else if (op.isDpsInit(&operand) &&
               (moved = freshInit(builder, value,
                                  widened(value.getType(), routing)))) {
    } else if (isSorted(routing, value)) {
      moved = dispatch(routing, value, op);
    } else {
      return op.emitError()
             << "dc-expert-parallel: operand #" << operand.getOperandNumber()
             << " has the routing's " << routing.rows
             << " rows but not in its sorted order; this op reads rows the "
                "experts' ranks computed and cannot run there";
    }
    mapping.map(value, moved);
    if (op.isDpsInit(&operand))
      resultTypes.push_back(moved.getType());
  }
  builder.setInsertionPoint(op);
  Operation *clone = builder.clone(*op, mapping);
  for (auto [result, type] : llvm::zip(clone->getResults(), resultTypes))
    result.setType(type);
  for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
    record(from, to, Moved::Remote, &routing);
  replaced.push_back(op);
  return success();
}

LogicalResult ExpertSharder::moveGrouped(Operation *op, Routing &routing) {
  OpBuilder builder(op);
  auto remoteRows = [&](Value value) -> Value {
    if (auto it = moved.find(value);
        it != moved.end() && std::get<1>(it->second) == Moved::Remote)
      return std::get<0>(it->second);
    if (isSorted(routing, value))
      return dispatch(routing, value, op);
    return nullptr;
  };
  ensureRegrouped(routing, op);
  IRMapping mapping;
  Type resultType;
  if (auto matmul = dyn_cast<GroupedMatmulOp>(op)) {
    Value lhs = remoteRows(matmul.getLhs());
    auto rhs = moved.find(matmul.getRhs());
    if (!lhs)
      return op->emitError() << "dc-expert-parallel: the rows of this grouped "
                                "product are not in its routing's sorted order";
    if (rhs == moved.end() || std::get<1>(rhs->second) != Moved::ExpertBlock)
      return op->emitError() << "dc-expert-parallel: the stacked weights of "
                                "this grouped product are not an expert "
                                "parameter's block";
    mapping.map(matmul.getLhs(), lhs);
    mapping.map(matmul.getRhs(), std::get<0>(rhs->second));
    resultType = widened(matmul.getType(), routing);
  } else {
    auto grad = cast<GroupedWeightGradOp>(op);
    Value lhs = remoteRows(grad.getLhs()), rhs = remoteRows(grad.getRhs());
    if (!lhs || !rhs)
      return op->emitError() << "dc-expert-parallel: the rows of this weight "
                                "gradient are not in its routing's sorted "
                                "order";
    mapping.map(grad.getLhs(), lhs);
    mapping.map(grad.getRhs(), rhs);
    auto type = grad.getType();
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = routing.localExperts;
    resultType = type.clone(shape);
  }
  mapping.map(routing.group.getEnds(), routing.ends);
  builder.setInsertionPoint(op);
  Operation *clone = builder.clone(*op, mapping);
  clone->getResult(0).setType(resultType);
  record(op->getResult(0), clone->getResult(0),
         isa<GroupedMatmulOp>(op) ? Moved::Remote : Moved::ExpertBlock,
         &routing);
  replaced.push_back(op);
  return success();
}

/// A cast or elementwise op of expert blocks (a weight cast before the
/// products, a gradient cast or sum after them): the same op on the block.
LogicalResult ExpertSharder::splitElementwise(Operation *op) {
  auto block = [&](Value value) -> Value {
    auto it = moved.find(value);
    if (it != moved.end() && std::get<1>(it->second) == Moved::ExpertBlock)
      return std::get<0>(it->second);
    return nullptr;
  };
  auto fail =
      [&] {
        return op->emitError()
               << "dc-expert-parallel: uses stacked expert weights (or their "
                  "gradient) in an op that does not work on each expert apart; "
                  "they are divided over the experts' ranks";
      };
  OpBuilder builder(op);
  IRMapping mapping;
  SmallVector<Type> resultTypes;
  if (isa<arith::TruncFOp, arith::ExtFOp>(op)) {
    Value in = block(op->getOperand(0));
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> shape(cast<ShapedType>(in.getType()).getShape());
    mapping.map(op->getOperand(0), in);
    resultTypes.push_back(type.clone(shape));
  } else {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || generic.getNumParallelLoops() != generic.getNumLoops() ||
        !llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }))
      return fail();
    for (OpOperand &operand : op->getOpOperands()) {
      Value in = block(operand.get());
      if (!in && generic.isDpsInit(&operand)) {
        auto type = cast<RankedTensorType>(operand.get().getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[0] /= parts;
        in = freshInit(builder, operand.get(), type.clone(shape));
      }
      if (!in)
        return fail();
      mapping.map(operand.get(), in);
      if (generic.isDpsInit(&operand))
        resultTypes.push_back(in.getType());
    }
  }
  Operation *clone = builder.clone(*op, mapping);
  for (auto [result, type] : llvm::zip(clone->getResults(), resultTypes))
    result.setType(type);
  for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
    record(from, to, Moved::ExpertBlock, nullptr);
  replaced.push_back(op);
  return success();
}

/// An op that stays on the rank: rows the experts' ranks computed come back
/// first (nested uses included); expert blocks only the return may take.
LogicalResult ExpertSharder::localizeOperands(Operation *op) {
  bool isReturn = isa<func::ReturnOp>(op);
  WalkResult walk = op->walk([&](Operation *inner) {
    for (OpOperand &operand : inner->getOpOperands()) {
      auto it = moved.find(operand.get());
      if (it == moved.end())
        continue;
      auto [value, kind, routing] = it->second;
      if (kind == Moved::Remote) {
        operand.set(combine(*routing, value, op));
      } else if (isReturn) {
        operand.set(value);
      } else {
        inner->emitError()
            << "dc-expert-parallel: uses stacked expert weights (or their "
               "gradient) in an op that does not work on each expert apart; "
               "they are divided over the experts' ranks";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult ExpertSharder::visit(Operation *op) {
  if (auto group = dyn_cast<GroupByExpertOp>(op)) {
    for (Routing &routing : routings)
      if (routing.group == group)
        beginRouting(routing);
    return success();
  }
  if (isa<GroupedMatmulOp, GroupedWeightGradOp>(op)) {
    Routing *routing = routingOfEnds(op->getOperand(2));
    if (!routing)
      return op->emitError() << "dc-expert-parallel: the group ends of this "
                                "grouped product are not a routing's";
    return moveGrouped(op, *routing);
  }
  Routing *remote = nullptr;
  bool block = false;
  for (Value operand : op->getOperands()) {
    auto it = moved.find(operand);
    if (it == moved.end())
      continue;
    if (std::get<1>(it->second) == Moved::Remote)
      remote = std::get<2>(it->second);
    else
      block = true;
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (generic && !remote && !block)
    remote = pulledBy(generic);
  if (remote && generic && !block)
    if (std::optional<unsigned> rowDim = rowDimOf(generic, *remote);
        rowDim && canMove(generic, *remote, *rowDim))
      return moveRowParallel(generic, *remote, *rowDim);
  if (block && !remote && !isa<func::ReturnOp>(op))
    return splitElementwise(op);
  return localizeOperands(op);
}

LogicalResult ExpertSharder::run(int64_t &routed) {
  if (!llvm::hasSingleElement(fn.getBody()))
    return fn.emitError("dc-expert-parallel needs a step function with a "
                        "single block");
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (fn.getArgAttr(i, kSeqAxisAttrName))
      return emitError(fn.getArgument(i).getLoc())
             << "dc-expert-parallel: a sequence-parallel step (dc-ulysses) "
                "cannot be made expert-parallel yet";
  if (failed(collectRoutings()))
    return failure();
  if (routings.empty())
    return success();
  routed += routings.size();
  if (failed(splitExpertParams()))
    return failure();
  Block &body = fn.getBody().front();
  SmallVector<Operation *> ops =
      llvm::map_to_vector(body, [](Operation &op) { return &op; });
  for (Operation *op : ops)
    if (failed(visit(op)))
      return failure();
  for (Operation *op : llvm::reverse(replaced)) {
    if (!op->use_empty())
      return op->emitError() << "dc-expert-parallel: internal: a moved op "
                                "still has users";
    op->erase();
  }
  // The global-size inits the moved ops replaced.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<tensor::EmptyOp, linalg::FillOp>(op) && isOpTriviallyDead(&op))
      op.erase();
  fn.setType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                               body.getTerminator()->getOperandTypes()));
  return success();
}

struct ExpertParallelPass
    : public dc::impl::DCExpertParallelBase<ExpertParallelPass> {
  using DCExpertParallelBase::DCExpertParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptionRange(module, getArgument(), "expert-parallel",
                                expertParallel, 0, kMaxWorldSize)) ||
        failed(checkOptionRange(module, getArgument(), "world-size", worldSize,
                                0, kMaxWorldSize)) ||
        failed(
            checkOptionRange(module, getArgument(), "grid-axis", gridAxis, -1)))
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
    int64_t axis = gridAxis >= 0 ? int64_t(gridAxis)
                                 : int64_t(grid->getShape().size()) - 1;
    int64_t parts = grid->getShape()[axis];
    if (parts == 1)
      return;
    int64_t routed = 0;
    for (func::FuncOp fn : steps)
      if (failed(ExpertSharder(fn, *grid, axis, parts).run(routed)))
        return signalPassFailure();
    if (routed == 0) {
      module.emitError() << "dc-expert-parallel: no step has a "
                            "mixture-of-experts routing (dc.group_by_expert "
                            "feeding grouped products) to divide over "
                         << parts << " ranks";
      return signalPassFailure();
    }
  }

  FailureOr<shard::GridOp> getOrCreateGrid(ModuleOp module) {
    auto grid = module.lookupSymbol<shard::GridOp>(gridName);
    if (!grid) {
      if (expertParallel < 1)
        return module.emitError()
               << "dc-expert-parallel: the module has no shard.grid @"
               << gridName << "; pass expert-parallel=N to create one";
      int64_t world = worldSize > 0 ? worldSize : expertParallel;
      if (world % expertParallel != 0)
        return module.emitError() << "dc-expert-parallel: world-size=" << world
                                  << " is not a multiple of expert-parallel="
                                  << int64_t(expertParallel);
      SmallVector<int64_t> shape{expertParallel};
      if (world > expertParallel)
        shape.insert(shape.begin(), world / expertParallel);
      if (gridAxis >= 0 && gridAxis != static_cast<int64_t>(shape.size()) - 1)
        return module.emitError()
               << "dc-expert-parallel: a new grid has the experts on axis "
               << shape.size() - 1 << ", not grid-axis " << int64_t(gridAxis);
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      return shard::GridOp::create(builder, module.getLoc(), gridName, shape);
    }
    ArrayRef<int64_t> shape = grid.getShape();
    int64_t axis =
        gridAxis >= 0 ? int64_t(gridAxis) : int64_t(shape.size()) - 1;
    if (axis >= static_cast<int64_t>(shape.size()))
      return grid.emitError() << "dc-expert-parallel: grid-axis " << axis
                              << " does not exist on this grid";
    if (llvm::any_of(shape, ShapedType::isDynamic))
      return grid.emitError() << "dc-expert-parallel: the grid is dynamic";
    int64_t world = 1;
    for (int64_t size : shape)
      world *= size;
    if (worldSize > 0 && world != worldSize)
      return grid.emitError()
             << "dc-expert-parallel: world-size=" << int64_t(worldSize)
             << " but this grid has " << world << " ranks";
    if (expertParallel > 0 && shape[axis] != expertParallel)
      return grid.emitError()
             << "dc-expert-parallel: expert-parallel="
             << int64_t(expertParallel) << " but this grid's axis " << axis
             << " has " << shape[axis] << " ranks";
    return grid;
  }
};

} // namespace
