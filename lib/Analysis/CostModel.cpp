//===- CostModel.cpp - time of each op on a target ------------------------===//
#include "dc/Analysis/CostModel.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Support/Assert.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace dc;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Fused attention: its own rate on targets that measured one.
static bool isAttentionOp(Operation *op) {
  return isa<AttentionOp, AttentionGradOp>(op);
}

/// The ops a dc schedule adds and moves: transfers and their bookkeeping.
/// dc's compute ops belong to the step like the linalg ops beside them.
static bool isScheduleOp(Operation *op) {
  return op->getName().getDialectNamespace() ==
             DCDialect::getDialectNamespace() &&
         !isa<ComputeOpInterface>(op);
}

/// Ops that only view, name or allocate a tensor: no kernel runs for them.
/// A view's users read what it views (getViewedOperand).
static bool isFreeOp(Operation *op) {
  return getViewedOperand(op) || isa<tensor::EmptyOp, arith::ConstantOp>(op);
}

//===----------------------------------------------------------------------===//
// Profile
//===----------------------------------------------------------------------===//

static std::string makeProfileKey(func::FuncOp fn, size_t ordinal) {
  return (fn.getSymName() + ":" + llvm::Twine(ordinal)).str();
}

std::string dc::getProfileKey(Operation *op) {
  auto fn = dyn_cast_or_null<func::FuncOp>(op->getParentOp());
  if (!fn || isScheduleOp(op))
    return {};
  size_t ordinal = 0;
  for (Block &block : fn.getBody()) {
    for (Operation &other : block) {
      if (&other == op)
        return makeProfileKey(fn, ordinal);
      if (!isScheduleOp(&other))
        ++ordinal;
    }
  }
  DC_UNREACHABLE("an op is in a block of its parent function");
}

llvm::Expected<Profile> Profile::fromJSON(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return makeError("invalid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return makeError("a profile must be a JSON object {\"ops\": {...}}");
  for (const auto &[key, unused] : *object)
    if (key != "ops")
      return makeError("unknown field \"" + llvm::StringRef(key) +
                       "\" in profile (expected only \"ops\")");
  const llvm::json::Object *ops = object->getObject("ops");
  if (!ops)
    return makeError("profile field \"ops\" must be an object of "
                     "\"<function>:<ordinal>\": seconds");
  Profile profile;
  for (const auto &[key, value] : *ops) {
    auto [function, ordinal] = llvm::StringRef(key).rsplit(':');
    if (function.empty() || ordinal.empty() ||
        !llvm::all_of(ordinal, llvm::isDigit))
      return makeError("profile key \"" + llvm::StringRef(key) +
                       "\" is not \"<function>:<ordinal>\"");
    std::optional<double> seconds = value.getAsNumber();
    if (!seconds || !(*seconds >= 0))
      return makeError("profile time of \"" + llvm::StringRef(key) +
                       "\" must be a non-negative number (seconds)");
    profile.secondsByOpId[key] = *seconds;
  }
  return profile;
}

llvm::Expected<Profile> Profile::load(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return makeError("cannot read profile '" + path +
                     "': " + file.getError().message());
  llvm::Expected<Profile> profile = fromJSON((*file)->getBuffer());
  if (!profile)
    return makeError(path + ": " + llvm::toString(profile.takeError()));
  return profile;
}

//===----------------------------------------------------------------------===//
// Counting FLOPs and bytes
//===----------------------------------------------------------------------===//

/// linalg ops whose payload multiply-adds into a reduction: they run on the
/// matrix units.
static bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

/// The trip count of a loop whose bounds and step are constants. A loop
/// of unknown trip count is counted as one iteration.
static double getTripCount(scf::ForOp loop) {
  std::optional<llvm::APInt> trips = loop.getStaticTripCount();
  return trips ? static_cast<double>(trips->getZExtValue()) : 1;
}

/// The ops of a loop body that do work: not the terminator, not the free
/// ops.
static auto getBodyWork(scf::ForOp loop) {
  return llvm::make_filter_range(loop.getBody()->without_terminator(),
                                 [](Operation &op) { return !isFreeOp(&op); });
}

double CostModel::countFlops(Operation *op) {
  if (auto compute = dyn_cast<ComputeOpInterface>(op))
    return compute.getFlops();
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    double perIteration = 0;
    for (Operation &bodyOp : getBodyWork(loop))
      perIteration += countFlops(&bodyOp);
    return getTripCount(loop) * perIteration;
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return 0;
  double iterations = 1;
  for (int64_t range : linalgOp.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return 0;
    iterations *= static_cast<double>(range);
  }
  if (isContraction(op))
    return 2 * iterations;
  int64_t perIteration = 0;
  for (Operation &bodyOp : *linalgOp.getBlock()) {
    llvm::StringRef dialect = bodyOp.getName().getDialectNamespace();
    if (dialect == arith::ArithDialect::getDialectNamespace() ||
        dialect == math::MathDialect::getDialectNamespace())
      ++perIteration;
  }
  return iterations * static_cast<double>(perIteration);
}

int64_t CostModel::countBytes(Operation *op) {
  // One element read or written (a tensor.insert updates its destination
  // in place).
  if (auto extract = dyn_cast<tensor::ExtractOp>(op))
    return getElementBytes(extract.getType());
  if (auto insert = dyn_cast<tensor::InsertOp>(op))
    return getElementBytes(insert.getScalar().getType());
  // The source is read and written into its place in the destination,
  // which is updated in place: the rest of the destination is not touched.
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
    return 2 * getTypeBytes(insert.getSourceType());
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    double perIteration = 0;
    for (Operation &bodyOp : getBodyWork(loop))
      perIteration += static_cast<double>(countBytes(&bodyOp));
    return static_cast<int64_t>(getTripCount(loop) * perIteration);
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  int64_t bytes = 0;
  for (OpOperand &operand : op->getOpOperands()) {
    if (linalgOp && linalgOp.isDpsInit(&operand) &&
        !linalgOp.payloadUsesValueFromOperand(&operand))
      continue;
    bytes += getTypeBytes(operand.get().getType());
  }
  for (Value result : op->getResults())
    bytes += getTypeBytes(result.getType());
  return bytes;
}

/// The element type of the matrix products of an op that runs on the matrix
/// units (a contraction's output, a dc compute op's products); null for
/// others.
static Type getMatmulElementType(Operation *op) {
  if (isContraction(op))
    return getElementTypeOrSelf(
        cast<linalg::LinalgOp>(op).getDpsInits()[0].getType());
  if (auto compute = dyn_cast<ComputeOpInterface>(op))
    return compute.getMatmulElementType();
  return {};
}

double CostModel::flopSeconds(Operation *op) const {
  // A loop is one kernel: each iteration's ops at their own rates.
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    double perIteration = 0;
    for (Operation &bodyOp : getBodyWork(loop))
      perIteration += flopSeconds(&bodyOp);
    return getTripCount(loop) * perIteration;
  }
  double rate = target.vectorFlops;
  if (Type element = getMatmulElementType(op)) {
    bool narrow =
        element.isIntOrFloat() && element.getIntOrFloatBitWidth() <= 16;
    rate = narrow ? target.matmulFlops16 : target.matmulFlops32;
    if (narrow && isAttentionOp(op) && target.attentionFlops16 > 0)
      rate = target.attentionFlops16;
  }
  return countFlops(op) / rate;
}

//===----------------------------------------------------------------------===//
// Collectives and copies
//===----------------------------------------------------------------------===//

/// Bus bandwidth at `bytes`, linear in log2(bytes) between the points and
/// clamped at both ends.
static double interpolateBandwidth(llvm::ArrayRef<BandwidthPoint> curve,
                                   int64_t bytes) {
  if (bytes <= curve.front().bytes)
    return curve.front().busBandwidth;
  if (bytes >= curve.back().bytes)
    return curve.back().busBandwidth;
  const BandwidthPoint *upper = llvm::upper_bound(
      curve, bytes,
      [](int64_t b, const BandwidthPoint &point) { return b < point.bytes; });
  const BandwidthPoint *lower = upper - 1;
  double fraction =
      (std::log2(double(bytes)) - std::log2(double(lower->bytes))) /
      (std::log2(double(upper->bytes)) - std::log2(double(lower->bytes)));
  return lower->busBandwidth +
         fraction * (upper->busBandwidth - lower->busBandwidth);
}

/// The fraction of the full tensor each rank sends: (n-1)/n, twice for an
/// all-reduce (a reduce-scatter followed by an all-gather).
static double sendFraction(CollectiveKind kind, double n) {
  return kind == CollectiveKind::AllReduce ? 2 * (n - 1) / n : (n - 1) / n;
}

/// The network level of a collective over `nodes` nodes with `perNode`
/// members each (alpha-beta, NCCL's algorithms):
/// - ring (all-gather, reduce-scatter, all-reduce): a ring crosses each
///   node boundary once per channel, one channel per member's NIC, so
///   the bus bandwidth is perNode NICs; its latency is one network step
///   per node crossed, (nodes - 1), twice for an all-reduce;
/// - tree (all-reduce only): the same bandwidth, 2 ceil(log2 nodes)
///   network steps; NCCL takes the faster, as here;
/// - all-to-all: each rank's NIC sends the part bound for other nodes,
///   (n - perNode) / n of the tensor, in one step.
static double networkSeconds(const TargetDescription &target,
                             CollectiveKind kind, double bytes, int64_t n,
                             int64_t perNode) {
  int64_t nodes = (n + perNode - 1) / perNode;
  double latency = target.networkLatency;
  if (kind == CollectiveKind::AllToAll)
    return latency + static_cast<double>(n - perNode) / static_cast<double>(n) *
                         bytes / target.networkBandwidth;
  double transfer = sendFraction(kind, static_cast<double>(n)) * bytes /
                    (static_cast<double>(perNode) * target.networkBandwidth);
  double ringSteps = static_cast<double>(nodes - 1);
  if (kind != CollectiveKind::AllReduce)
    return ringSteps * latency + transfer;
  double treeSteps = 2 * std::ceil(std::log2(static_cast<double>(nodes)));
  return std::min(2 * ringSteps, treeSteps) * latency + transfer;
}

double CostModel::collectiveSeconds(CollectiveKind kind, int64_t bytes,
                                    int64_t groupSize,
                                    int64_t rankStride) const {
  if (groupSize <= 1)
    return 0;
  double inNode = nodeLinkSeconds(kind, bytes, groupSize);
  int64_t perNode = target.membersPerNode(groupSize, rankStride);
  if (perNode >= groupSize || target.networkBandwidth <= 0)
    return inNode;
  // Both levels run at once (NCCL pipelines chunks through the NVLink hops
  // and the NIC): the slower one sets the time.
  return std::max(inNode,
                  networkSeconds(target, kind, static_cast<double>(bytes),
                                 groupSize, perNode));
}

double CostModel::nodeLinkSeconds(CollectiveKind kind, int64_t bytes,
                                  int64_t groupSize) const {
  double n = static_cast<double>(groupSize);
  double fraction = sendFraction(kind, n);
  const std::vector<BandwidthPoint> *curve = nullptr;
  if (kind == CollectiveKind::AllGather)
    curve = &target.allGatherCurve;
  else if (kind == CollectiveKind::ReduceScatter)
    curve = &target.reduceScatterCurve;
  if (curve && !curve->empty()) {
    // A measured busbw already includes the latency of that size: the
    // latency is only a floor for sizes below the curve.
    return std::max(target.collectiveLatency,
                    fraction * static_cast<double>(bytes) /
                        interpolateBandwidth(*curve, bytes));
  }
  return target.collectiveLatency +
         fraction * static_cast<double>(bytes) / target.collectiveBusBandwidth;
}

double CostModel::copySeconds(int64_t bytes, bool duplex) const {
  double bandwidth = duplex && target.hostLinkDuplexBandwidth > 0
                         ? target.hostLinkDuplexBandwidth
                         : target.hostLinkBandwidth;
  return target.hostLinkLatency + static_cast<double>(bytes) / bandwidth;
}

//===----------------------------------------------------------------------===//
// Estimates
//===----------------------------------------------------------------------===//

/// The size of a grid axis and the distance in world ranks between
/// consecutive members of its groups (the product of the later axes: the
/// runtime numbers ranks row-major).
struct AxisGroup {
  int64_t size = 1;
  int64_t stride = 1;
};

/// Axis groups of the grids seen from one function, looked up once each:
/// every collective of a step names the same one or two axes.
class CostModel::GridSizes {
public:
  AxisGroup get(Operation *from, FlatSymbolRefAttr grid, int64_t axis) {
    auto [it, inserted] = groups.try_emplace({grid.getAttr(), axis});
    if (inserted) {
      // Verified IR always finds a static axis (verifySymbolUses); a
      // missing one leaves a group of 1, which costs nothing.
      auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
          from, grid.getAttr());
      // Every axis at once: the whole world, consecutive ranks.
      if (gridOp && axis == kAllGridAxes) {
        for (int64_t size : gridOp.getShape())
          if (!ShapedType::isDynamic(size))
            it->second.size *= size;
        return it->second;
      }
      if (!gridOp || axis < 0 ||
          axis >= static_cast<int64_t>(gridOp.getShape().size()) ||
          ShapedType::isDynamic(gridOp.getShape()[axis]))
        return it->second;
      ArrayRef<int64_t> shape = gridOp.getShape();
      it->second.size = shape[axis];
      for (int64_t later : shape.drop_front(axis + 1))
        if (!ShapedType::isDynamic(later))
          it->second.stride *= later;
    }
    return it->second;
  }

private:
  llvm::DenseMap<std::pair<Attribute, int64_t>, AxisGroup> groups;
};

namespace {
/// The bytes one start op moves over one grid axis (or kAllGridAxes).
struct AxisTransfer {
  FlatSymbolRefAttr grid;
  int64_t axis;
  int64_t bytes;
};
} // namespace

/// Adds `bytes` to the transfer over (grid, axis): the tensors of one start
/// op on one axis travel in one group call.
static void addTransfer(llvm::SmallVectorImpl<AxisTransfer> &transfers,
                        ShardType shard, int64_t bytes) {
  for (AxisTransfer &transfer : transfers) {
    if (transfer.grid == shard.getGrid() &&
        transfer.axis == shard.getGroupAxis()) {
      transfer.bytes += bytes;
      return;
    }
  }
  transfers.push_back({shard.getGrid(), shard.getGroupAxis(), bytes});
}

/// A constant fill that the GPU lowering folds into the one op after it
/// that uses it: the output of a matrix product filled with zero (the
/// product overwrites instead of accumulating), or of a reduction filled
/// with its combiner's identity (its kernel stores the total instead of
/// folding it into what the output held).
static bool isFoldedFill(Operation *op) {
  auto fill = dyn_cast<linalg::FillOp>(op);
  if (!fill || fill->getNumResults() != 1 || !fill->getResult(0).hasOneUse())
    return false;
  OpOperand &use = *fill->getResult(0).getUses().begin();
  auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
  auto value = fill.getInputs()[0].getDefiningOp<arith::ConstantFloatOp>();
  if (!user || !value || !user.isDpsInit(&use) ||
      user.getNumReductionLoops() == 0)
    return false;
  APFloat constant = value.value();
  if (isContraction(user))
    return constant.isZero();
  // The combiner that folds each element into this output.
  auto generic = dyn_cast<linalg::GenericOp>(user.getOperation());
  if (!generic)
    return false;
  BlockArgument accumulator = generic.getMatchingBlockArgument(&use);
  Value yielded = generic.getBody()->getTerminator()->getOperand(
      use.getOperandNumber() - generic.getNumDpsInputs());
  Operation *combiner = yielded.getDefiningOp();
  if (!combiner || combiner->getNumOperands() != 2 ||
      !llvm::is_contained(combiner->getOperands(), accumulator))
    return false;
  if (isa<arith::AddFOp>(combiner))
    return constant.isZero();
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combiner))
    return constant.isInfinity() && constant.isNegative();
  if (isa<arith::MinimumFOp, arith::MinNumFOp>(combiner))
    return constant.isInfinity() && !constant.isNegative();
  return false;
}

/// The copy of an op's output (maybe collapsed) into a slice of another
/// tensor, its only use, where the GPU lowering has the op write that
/// slice directly (dc-write-outputs-in-place), so no copy runs: a fused
/// 16-bit attention output in [B, S, H, D] (dq, dk and dv into the fused
/// q/k/v gradient), or an all-parallel generic's result whose init it
/// only writes (a rotary embedding's backward).
static bool isInPlaceOutputCopy(Operation *op) {
  auto insert = dyn_cast<tensor::InsertSliceOp>(op);
  if (!insert)
    return false;
  Value source = insert.getSource();
  while (auto collapse = source.getDefiningOp<tensor::CollapseShapeOp>()) {
    if (!source.hasOneUse())
      return false;
    source = collapse.getSrc();
  }
  Operation *producer = source.getDefiningOp();
  if (!source.hasOneUse() || !producer)
    return false;
  if (auto generic = dyn_cast<linalg::GenericOp>(producer)) {
    OpOperand *init =
        generic.getDpsInitOperand(cast<OpResult>(source).getResultNumber());
    return generic.getNumLoops() == generic.getNumParallelLoops() &&
           !generic.payloadUsesValueFromOperand(init) &&
           init->get().getDefiningOp<tensor::EmptyOp>();
  }
  if (!isAttentionOp(producer) || !isLibraryAttention(producer))
    return false;
  if (auto attention = dyn_cast<AttentionOp>(producer))
    return attention.getBshd();
  return cast<AttentionGradOp>(producer).getBshd();
}

OpCost CostModel::estimate(Operation *op, GridSizes &grids,
                           llvm::StringRef profileKey) const {
  OpCost cost;
  auto groupCost = [&](CollectiveKind kind,
                       llvm::ArrayRef<AxisTransfer> transfers) {
    cost.stream = StreamKind::Collective;
    for (const AxisTransfer &transfer : transfers) {
      cost.bytes += transfer.bytes;
      AxisGroup group = grids.get(op, transfer.grid, transfer.axis);
      cost.seconds +=
          collectiveSeconds(kind, transfer.bytes, group.size, group.stride);
    }
    return cost;
  };

  if (auto gather = dyn_cast<GatherStartOp>(op)) {
    // Fused gathers are one call over the sum of their (full) results.
    llvm::SmallVector<AxisTransfer, 1> transfers;
    // Buffer-form ops (after bufferization) name no grid in their types:
    // they are priced as no transfer. The planners never see them
    // (checkPlanningPreconditions rejects them first).
    for (auto [shard, future] :
         llvm::zip(gather.getShards(), gather.getFutures()))
      if (auto type = dyn_cast<ShardType>(shard.getType()))
        addTransfer(transfers, type, getTypeBytes(future.getType()));
    return groupCost(CollectiveKind::AllGather, transfers);
  }
  if (auto reduce = dyn_cast<ReduceScatterStartOp>(op)) {
    llvm::SmallVector<AxisTransfer, 1> transfers;
    for (auto [gradient, future] :
         llvm::zip(reduce.getGradients(), reduce.getFutures()))
      if (auto type = dyn_cast<ShardType>(
              cast<FutureType>(future.getType()).getValue()))
        addTransfer(transfers, type, getTypeBytes(gradient.getType()));
    return groupCost(CollectiveKind::ReduceScatter, transfers);
  }
  // Both forms move the same bytes; the simulator decides whether compute
  // waits for it at once (dc.all_to_all) or at the start's dc.wait.
  if (isa<AllToAllOp, AllToAllStartOp>(op)) {
    auto [grid, axis, input] =
        isa<AllToAllOp>(op)
            ? std::tuple(cast<AllToAllOp>(op).getGridAttr(),
                         cast<AllToAllOp>(op).getAxis(),
                         cast<AllToAllOp>(op).getInput())
            : std::tuple(cast<AllToAllStartOp>(op).getGridAttr(),
                         cast<AllToAllStartOp>(op).getAxis(),
                         cast<AllToAllStartOp>(op).getInput());
    AxisTransfer transfer{grid, static_cast<int64_t>(axis),
                          getTypeBytes(input.getType())};
    return groupCost(CollectiveKind::AllToAll, transfer);
  }
  if (auto allReduce = dyn_cast<AllReduceStartOp>(op)) {
    AxisTransfer transfer{allReduce.getGridAttr(),
                          static_cast<int64_t>(allReduce.getAxis()),
                          getTypeBytes(allReduce.getInput().getType())};
    return groupCost(CollectiveKind::AllReduce, transfer);
  }
  if (auto offload = dyn_cast<OffloadStartOp>(op)) {
    cost.stream = StreamKind::DeviceToHost;
    cost.bytes = getTypeBytes(offload.getValue().getType());
    cost.seconds = copySeconds(cost.bytes);
    return cost;
  }
  if (auto reload = dyn_cast<ReloadStartOp>(op)) {
    cost.stream = StreamKind::HostToDevice;
    cost.bytes = getTypeBytes(reload.getHost().getType());
    cost.seconds = copySeconds(cost.bytes);
    return cost;
  }
  if (isScheduleOp(op) || op->hasTrait<OpTrait::IsTerminator>())
    return cost;

  cost.stream = StreamKind::Compute;
  if (target.foldsFills && isFoldedFill(op))
    return cost;
  if (target.foldsHeadTransposes && isInPlaceOutputCopy(op))
    return cost;
  if (!isFreeOp(op)) {
    cost.flops = countFlops(op);
    cost.bytes = countBytes(op);
    // Scalar work on no tensor launches no kernel.
    if (cost.flops > 0 || cost.bytes > 0)
      cost.seconds = target.opLaunchLatency +
                     std::max(flopSeconds(op), static_cast<double>(cost.bytes) /
                                                   target.memoryBandwidth);
  }
  if (profile && !profileKey.empty()) {
    auto measured = profile->secondsByOpId.find(profileKey);
    if (measured != profile->secondsByOpId.end())
      cost.seconds = measured->second;
  }
  return cost;
}

OpCost CostModel::estimate(Operation *op) const {
  GridSizes grids;
  return estimate(op, grids, profile ? getProfileKey(op) : std::string());
}

std::vector<OpCost> CostModel::estimateFunction(func::FuncOp fn) const {
  std::vector<OpCost> costs;
  GridSizes grids;
  size_t ordinal = 0;
  for (Block &block : fn.getBody()) {
    for (Operation &op : block) {
      std::string key;
      if (!isScheduleOp(&op)) {
        if (profile)
          key = makeProfileKey(fn, ordinal);
        ++ordinal;
      }
      costs.push_back(estimate(&op, grids, key));
    }
  }
  return costs;
}
