//===- Rematerialize.cpp - recompute cheap activations instead of keeping
//--===//
//
// The Rematerializer drops, while the memory timeline peaks over the budget,
// the activations idle across the peak that save the most bytes per second
// of added compute, and computes them again right before their next use by
// cloning the deterministic ops that made them (recursively through inputs
// no longer live there, to a limit of ops).
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/OffloadFloor.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include <functional>
#include <numeric>

namespace dc {
#define GEN_PASS_DEF_DCREMATERIALIZE
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// True if cloning `op` computes bit-identical results from the same
/// inputs: upstream tensor compute without memory effects (so no random
/// number generator, no call, no transfer), or one of dc's compute ops
/// that says it is reproducible (fused attention's forward, the routing of
/// a mixture of experts). Ops nested in its regions must be such ops too.
bool isExactlyRecomputable(Operation *op) {
  auto allowed = [](Operation *inner) {
    if (auto compute = dyn_cast<ComputeOpInterface>(inner))
      return compute.isReproducible();
    Dialect *dialect = inner->getDialect();
    return dialect && isa<linalg::LinalgDialect, tensor::TensorDialect,
                          arith::ArithDialect, math::MathDialect>(dialect);
  };
  if (op->getNumResults() == 0 || !isMemoryEffectFree(op))
    return false;
  return !op->walk([&](Operation *inner) {
              return allowed(inner) ? WalkResult::advance()
                                    : WalkResult::interrupt();
            }).wasInterrupted();
}

/// The values `op` reads: its operands and those its regions use from
/// outside, each once.
llvm::SetVector<Value> readValues(Operation *op) {
  llvm::SetVector<Value> values;
  values.insert(op->operand_begin(), op->operand_end());
  getUsedValuesDefinedAbove(op->getRegions(), values);
  return values;
}

/// Ops that cost nothing to clone (a constant, an uninitialised tensor).
bool isFree(Operation *op) {
  return isa<arith::ConstantOp, tensor::EmptyOp>(op);
}

/// Top-level ops after a recomputation's first use searched for an op it
/// can be merged into (Recomputation::sibling): config A's SwiGLU backward
/// is 3 ops after the down projection's weight gradient.
constexpr int kSiblingWindow = 16;

/// The input of `earlier` that reads `input`'s value (an input of another
/// generic over the same loops) through the same indexing map, if any.
OpOperand *findSameInput(linalg::GenericOp earlier, linalg::GenericOp later,
                         OpOperand *input) {
  AffineMap map = later.getMatchingIndexingMap(input);
  for (OpOperand *mine : earlier.getDpsInputOperands())
    if (mine->get() == input->get() &&
        earlier.getMatchingIndexingMap(mine) == map)
      return mine;
  return nullptr;
}

/// True if the all-parallel generic `later` reads only inputs of the
/// all-parallel generic `earlier`, each through the same indexing map over
/// the same loops, and only writes its inits: `later`'s results can be more
/// results of `earlier`, which reads those inputs anyway (a SwiGLU's
/// product beside its backward, both reading the gate and up projections).
bool readsOnlyInputsOf(linalg::GenericOp later, linalg::GenericOp earlier) {
  auto allParallel = [](linalg::GenericOp op) {
    return op.hasPureTensorSemantics() &&
           op.getNumLoops() == op.getNumParallelLoops();
  };
  if (!allParallel(later) || !allParallel(earlier) || later == earlier)
    return false;
  SmallVector<int64_t> ranges = later.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(ranges) ||
      ranges != earlier.getStaticLoopRanges())
    return false;
  for (OpOperand &init : later.getDpsInitsMutable())
    if (later.payloadUsesValueFromOperand(&init))
      return false;
  for (OpOperand *input : later.getDpsInputOperands())
    if (later.payloadUsesValueFromOperand(input) &&
        !findSameInput(earlier, later, input))
      return false;
  return true;
}

/// `earlier` with `later`'s results after its own (readsOnlyInputsOf),
/// built at `builder`'s point: `later`'s inits are `laterInits`, its inputs
/// the matching inputs of `earlier`. The body computes `earlier`'s values,
/// then `later`'s, each with the same ops as before (the same bits).
linalg::GenericOp buildMerged(OpBuilder &builder, linalg::GenericOp earlier,
                              linalg::GenericOp later, ValueRange laterInits) {
  SmallVector<Value> inits(earlier.getDpsInits());
  llvm::append_range(inits, laterInits);
  SmallVector<AffineMap> maps = earlier.getIndexingMapsArray();
  for (OpOperand &init : later.getDpsInitsMutable())
    maps.push_back(later.getMatchingIndexingMap(&init));
  SmallVector<Type> types(earlier->getResultTypes());
  llvm::append_range(types, later->getResultTypes());
  unsigned numInputs = earlier.getNumDpsInputs();
  unsigned numInits = earlier.getNumDpsInits();
  auto merged = linalg::GenericOp::create(
      builder, earlier.getLoc(), types, earlier.getDpsInputs(), inits, maps,
      earlier.getIteratorTypesArray(),
      [&](OpBuilder &body, Location loc, ValueRange args) {
        IRMapping mapping;
        SmallVector<Value> yields;
        auto cloneBody = [&](linalg::GenericOp op) {
          for (Operation &inner : op.getRegion().front().without_terminator())
            body.clone(inner, mapping);
          for (Value value :
               op.getRegion().front().getTerminator()->getOperands())
            yields.push_back(mapping.lookupOrDefault(value));
        };
        Block &mine = earlier.getRegion().front();
        mapping.map(mine.getArguments(), args.take_front(numInputs + numInits));
        cloneBody(earlier);
        Block &theirs = later.getRegion().front();
        for (OpOperand *input : later.getDpsInputOperands())
          if (OpOperand *same = findSameInput(earlier, later, input))
            mapping.map(theirs.getArgument(input->getOperandNumber()),
                        args[same->getOperandNumber()]);
        for (OpOperand &init : later.getDpsInitsMutable())
          mapping.map(
              theirs.getArgument(init.getOperandNumber()),
              args[numInputs + numInits +
                   (init.getOperandNumber() - later.getNumDpsInputs())]);
        cloneBody(later);
        linalg::YieldOp::create(body, loc, yields);
      });
  merged->setDiscardableAttrs(earlier->getDiscardableAttrDictionary());
  return merged;
}

/// One way to recompute an activation right before `firstAfter`.
struct Recomputation {
  Value value;
  Operation *firstAfter = nullptr;
  int64_t bytes = 0;
  /// Ops to clone, producers first (block order).
  SmallVector<Operation *> chain;
  /// Ops of `chain` that compute (the limit counts these).
  int64_t computeOps = 0;
  /// Gathered parameters the chain reads that are released by then: the
  /// dc.wait results of their gathers.
  SmallVector<Value> regathers;
  /// Gathered parameters the chain reads that are released by then, each
  /// with another gathered copy of the same parameter live there (the
  /// backward's own): the clone reads that copy, no gather.
  SmallVector<std::pair<Value, Value>> copies;
  /// Once applied: the recomputed value and the views of it made for its
  /// later uses (redirectBufferUses), each with the value it replaces.
  SmallVector<std::pair<Value, Value>> views;
  /// Where the chain's one compute op reads only inputs of an op a few ops
  /// after `firstAfter` (readsOnlyInputsOf) that nothing in between needs
  /// `firstAfter` before: the recomputed tensor is made as more results of
  /// that op (its inputs read once) and `firstAfter` moves right after it.
  linalg::GenericOp sibling;
  /// Once applied so: the sibling's operands (it is out of the block, its
  /// operands dropped, until undo puts it back) and the op `firstAfter` was
  /// right before.
  SmallVector<Value> siblingOperands;
  Operation *movedFrom = nullptr;
  /// And the ops that made `firstAfter`'s own inits (an empty tensor, its
  /// fill), moved with it, producers first.
  SmallVector<Operation *> movedInits;
  /// Added time: the cloned ops on the compute stream plus the new gathers
  /// (merged: what the merged op takes over the sibling alone).
  double seconds = 0;
  double bytesPerSecond() const {
    return seconds > 0 ? bytes / seconds
                       : std::numeric_limits<double>::infinity();
  }
};

/// A recomputation made, with the ops it added.
struct Applied {
  Recomputation r;
  SmallVector<Operation *> added;
};

/// The recomputations one round made for one peak, best first.
struct Batch {
  std::vector<Applied> applied;
  Operation *peakOp = nullptr;
  /// Bytes live at the peak before them.
  int64_t before = 0;
};

/// The values `r` reads or makes, but constants, empty tensors and
/// arguments (live throughout, or free to make again): two recomputations
/// that share none neither change each other's chain, cost or first use.
llvm::DenseSet<Value> valuesTouched(const Recomputation &r) {
  llvm::DenseSet<Value> values;
  auto add = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (def && !isFree(def))
      values.insert(value);
  };
  for (Value view : getBufferViews(r.value))
    add(view);
  for (Operation *op : r.chain) {
    for (Value result : op->getResults())
      add(result);
    for (Value input : readValues(op))
      add(input);
  }
  for (Value param : r.regathers)
    add(param);
  for (auto [param, copy] : r.copies) {
    add(param);
    add(copy);
  }
  // A merge replaces the sibling and moves the first use: another
  // recomputation next to either is chosen on the next timeline.
  Operation *sibling = r.sibling;
  if (sibling)
    for (Operation *op : {sibling, r.firstAfter}) {
      for (Value value : op->getOperands())
        add(value);
      for (Value value : op->getResults())
        add(value);
    }
  return values;
}

/// Where the offload placement still stalls, how many of the tensors whose
/// copies it waits for, and how many of those made latest before the peak,
/// are recomputed on trial instead (chooseOverOffload).
constexpr size_t kLateCandidates = 4;

class Rematerializer {
public:
  /// `keepCosts`: an op's estimate does not change as ops are inserted
  /// (false with a profile: its keys are op ordinals).
  Rematerializer(func::FuncOp fn, const CostModel &costModel, int64_t budget,
                 int64_t minBytes, int64_t maxOps, bool leaveToOffload,
                 bool mergeSiblings, bool keepCosts)
      : fn(fn), costModel(costModel), modelAlone(costModel.getTarget()),
        budget(budget), minBytes(minBytes), maxOps(maxOps),
        leaveToOffload(leaveToOffload), mergeSiblings(mergeSiblings),
        keepCosts(keepCosts) {
    // Ids stay unique when the pass runs again on a planned step.
    fn.walk([&](Operation *op) {
      if (auto id = op->getAttrOfType<IntegerAttr>(kRecomputeAttrName))
        nextId = std::max(nextId, id.getInt() + 1);
    });
  }

  ~Rematerializer() {
    for (Operation *op : unlinked)
      op->destroy();
  }

  LogicalResult run() {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    if (timeline->getPeakDeviceBytes() <= budget)
      return success();
    if (budget < timeline->getFloorBytes())
      return fn.emitError()
             << "memory budget " << formatBytes(budget)
             << " is below this step's floor of "
             << formatBytes(timeline->getFloorBytes())
             << " (arguments, results and the largest single op); no "
                "recomputation can reach it";
    // What offload alone would face here, for dc-report's comparison.
    SimulationResult sim = StreamSimulator(costModel).run(fn, *timeline);
    std::optional<OffloadFloorAttr> offloadAlone = computeOffloadFloor(
        costModel, *timeline, sim,
        collectOffloadCandidates(fn, costModel, *timeline, sim, minBytes,
                                 /*keepLast=*/0),
        budget);
    if (offloadAlone)
      fn->setAttr(kOffloadAloneFloorAttrName, *offloadAlone);
    // And what no mix of the two can beat, for dc-report's floor line.
    std::vector<RecomputeCost> recomputable;
    for (const Recomputation &r : collectCandidates(
             *timeline, timeline->getPeakIndex(), /*rejected=*/{}))
      recomputable.push_back({r.bytes, r.seconds});
    if (std::optional<OffloadFloorAttr> joint = computeJointFloor(
            costModel, *timeline, sim,
            collectOffloadCandidates(fn, costModel, *timeline, sim, minBytes,
                                     /*keepLast=*/0),
            std::move(recomputable), budget))
      fn->setAttr(kJointFloorAttrName, *joint);
    // Values whose recomputation did not lower the peak it was for.
    llvm::DenseSet<Value> rejected;
    // Each recomputation lowers the peak it was for; the bound only keeps a
    // planner bug from looping forever.
    size_t rounds = 4 * timeline->getOps().size() + 16;
    // The last round's recomputations, checked against the next round's
    // timeline (the one taken after them): one timeline per round.
    std::optional<Batch> last;
    for (size_t round = 0;; ++round) {
      if (round == rounds)
        return fn.emitError() << "dc-rematerialize did not converge after "
                              << rounds << " recomputations";
      timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return failure();
      if (last) {
        int64_t freed = 0;
        for (const Applied &applied : last->applied)
          freed += applied.r.bytes;
        int64_t now = timeline->deviceBytesAt(timeline->indexOf(last->peakOp));
        if (last->applied.size() > 1 && now != last->before - freed) {
          // Some did not free their bytes there: keep only the best, and
          // check it alone.
          while (last->applied.size() > 1) {
            undo(last->applied.back().r, last->applied.back().added);
            last->applied.pop_back();
          }
          timeline = MemoryTimeline::compute(fn);
          if (failed(timeline))
            return failure();
          now = timeline->deviceBytesAt(timeline->indexOf(last->peakOp));
        }
        if (now >= last->before) {
          // Still live at the peak (through a view, or a use the clone does
          // not replace): keep the original.
          Applied &only = last->applied.front();
          undo(only.r, only.added);
          rejected.insert(only.r.value);
          timeline = MemoryTimeline::compute(fn);
          if (failed(timeline))
            return failure();
        } else {
          for (Applied &applied : last->applied)
            kept.push_back(std::move(applied));
        }
        last.reset();
      }
      int64_t excess = timeline->getPeakDeviceBytes() - budget;
      if (excess <= 0)
        return giveBack();
      size_t peak = timeline->getPeakIndex();
      // What the host link can hide is cheaper to offload than any
      // recomputation: stop once offload alone no longer has to stall, or
      // once what is left recomputes slower than the link moves it. The
      // floor is a bound, though: dc-offload-activations' own placement may
      // still stall (copies of tensors made just before an early peak queue
      // behind each other), so at either stop its placement is tried on a
      // copy of the step, and recomputing one more tensor is tried against
      // it (chooseOverOffload).
      bool floorHides = leaveToOffload && offloadCanHide(*timeline);
      std::vector<Recomputation> all =
          collectCandidates(*timeline, peak, rejected);
      std::vector<Recomputation> candidates;
      for (Recomputation &candidate : all)
        // What recomputing cannot do faster than the host link moves
        // bytes is offload's; once offload can hide the rest, only what
        // recomputes in less time than the copies there and back would
        // slow compute (a SwiGLU product made by its backward: 23 us
        // against 50 us on the h200 preset) is still recomputed.
        if (floorHides ? candidate.seconds < copySlowdownSeconds(candidate)
                       : !leaveToOffload ||
                             candidate.bytesPerSecond() >
                                 costModel.getTarget().hostLinkBandwidth)
          candidates.push_back(candidate);
      if (leaveToOffload && candidates.empty()) {
        std::optional<Recomputation> chosen = chooseOverOffload(all, *timeline);
        if (!chosen)
          return giveBack();
        candidates.push_back(std::move(*chosen));
      }
      if (candidates.empty())
        return timeline->getOps()[peak]->emitError()
               << "device memory peaks here at "
               << formatBytes(timeline->getPeakDeviceBytes())
               << " with every activation idle across it that can be "
                  "recomputed exactly (within max-recompute-ops) already "
                  "recomputed; the budget of "
               << formatBytes(budget) << " is short by " << formatBytes(excess);
      // Best first; among equals the first collected.
      llvm::stable_sort(candidates,
                        [](const Recomputation &a, const Recomputation &b) {
                          return a.bytesPerSecond() > b.bytesPerSecond();
                        });
      last = fillPeak(candidates, *timeline, peak, excess);
    }
  }

private:
  /// Undoes, the costliest first, each recomputation the plan turns out
  /// not to need: the rounds choose each against the step as it is then,
  /// and a later choice can make an earlier one unnecessary (two tensors of
  /// one chain: the cheaper taken first, then the other anyway, which alone
  /// would have done), as can a batch's overshoot. Undone, a
  /// recomputation's original stays live from where it is made to where its
  /// clone was made; its clones, and the reads that kept their inputs live
  /// until there, are gone. Where no input dies with the clones, the step
  /// still fits if the bytes on that span, plus its own, do; where one does
  /// (its last read is a clone), the undo is tried on a copy of the step.
  /// Not with `leave-to-offload`: there each test is an offload placement,
  /// much compile time for little step time (docs/cost-model.md, "The
  /// planners' numbers").
  LogicalResult giveBack() {
    if (leaveToOffload || kept.empty())
      return success();
    SmallVector<size_t> order(kept.size());
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      return kept[a].r.seconds > kept[b].r.seconds;
    });
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    llvm::DenseSet<size_t> dropped;
    for (size_t i : order) {
      Applied &applied = kept[i];
      // Not a merged one: its undo would move a product back before an op
      // that a later undo may have erased.
      if (applied.r.movedFrom)
        continue;
      // Not one that another recomputation is placed against (its first
      // use after the peak is a clone this one added).
      bool anchors = false;
      for (auto [j, other] : llvm::enumerate(kept))
        anchors |= j != i && !dropped.contains(j) &&
                   llvm::is_contained(applied.added, other.r.firstAfter);
      if (anchors)
        continue;
      size_t cloned = timeline->getOps().size(), lastClone = 0;
      for (Operation *op : applied.added) {
        cloned = std::min(cloned, timeline->indexOf(op));
        lastClone = std::max(lastClone, timeline->indexOf(op));
      }
      // Lower on the span by at most what dies with the clones.
      int64_t most = 0;
      for (size_t at = timeline->indexOf(definingTop(applied.r.value));
           at < cloned; ++at)
        most = std::max(most, timeline->deviceBytesAt(at));
      int64_t over = most + applied.r.bytes - budget;
      bool fits = over <= 0;
      if (!fits && bytesDyingWithClones(applied, *timeline, lastClone) >= over)
        fits = fitsWithout(applied);
      if (!fits)
        continue;
      undo(applied.r, applied.added);
      dropped.insert(i);
      timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return failure();
    }
    if (timeline->getPeakDeviceBytes() > budget)
      return timeline->getOps()[timeline->getPeakIndex()]->emitError()
             << "dc-rematerialize: internal error: giving recomputations "
                "back left the step over its budget";
    return success();
  }

  /// The bytes of the buffers `applied`'s clones read (not ones they make)
  /// for the last time: no read after op `lastClone`, through views too.
  int64_t bytesDyingWithClones(const Applied &applied,
                               const MemoryTimeline &timeline,
                               size_t lastClone) {
    Block &body = fn.getBody().front();
    llvm::SmallPtrSet<Operation *, 16> added(applied.added.begin(),
                                             applied.added.end());
    llvm::DenseSet<Value> dying;
    for (Operation *op : applied.added) {
      for (Value read : readValues(op)) {
        Value input = getViewedBuffer(read);
        Operation *def = input.getDefiningOp();
        if (!def || added.contains(def) || def->getBlock() != &body ||
            isFree(def) || !isa<RankedTensorType>(input.getType()))
          continue;
        bool readLater = false;
        for (OpOperand *use : getBufferUses(input)) {
          Operation *top = body.findAncestorOpInBlock(*use->getOwner());
          readLater |=
              top && !added.contains(top) && timeline.indexOf(top) > lastClone;
        }
        if (!readLater)
          dying.insert(input);
      }
    }
    int64_t bytes = 0;
    for (Value value : dying)
      bytes += getTypeBytes(cast<RankedTensorType>(value.getType()));
    return bytes;
  }

  /// True if the step fits the budget with `applied` undone, tried on a
  /// copy of the step: undone in place and made again where it failed, it
  /// would not read what later recomputations redirected its clones to.
  bool fitsWithout(const Applied &applied) {
    OpBuilder builder(fn);
    IRMapping mapping;
    auto copy = cast<func::FuncOp>(builder.clone(*fn, mapping));
    copy.setName((fn.getName() + ".give_back_trial").str());
    for (auto [clone, original] : applied.r.views)
      mapping.lookup(clone).replaceAllUsesWith(mapping.lookup(original));
    for (Operation *op : llvm::reverse(applied.added))
      mapping.lookup(op)->erase();
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(copy);
    bool fits = succeeded(timeline) && timeline->getPeakDeviceBytes() <= budget;
    copy.erase();
    return fits;
  }

  /// Recomputes the best of `candidates` (for the peak at op `peak`, over
  /// budget by `excess`) and, without offload (whose test runs each round)
  /// and without a profile (whose costs move as ops are inserted), the next
  /// best until they free half the excess there, skipping any that shares
  /// a value with one taken (its chain or cost may have changed). One
  /// recomputation a round took a timeline of the whole step each; half,
  /// not all, because the rest is chosen again on the next timeline, where
  /// the best tensor of a neighbouring peak may cover this one too (all at
  /// once recomputed 8% more bytes on the 70B step's hierarchical plan; half
  /// chose what one a round did there).
  Batch fillPeak(std::vector<Recomputation> &candidates,
                 const MemoryTimeline &timeline, size_t peak, int64_t excess) {
    Batch batch;
    batch.peakOp = timeline.getOps()[peak];
    batch.before = timeline.deviceBytesAt(peak);
    bool more = !leaveToOffload && keepCosts;
    llvm::DenseSet<Value> touched;
    int64_t freed = 0;
    for (Recomputation &candidate : candidates) {
      if (!batch.applied.empty() && (!more || 2 * freed >= excess))
        break;
      llvm::DenseSet<Value> mine = valuesTouched(candidate);
      if (!batch.applied.empty() &&
          llvm::any_of(mine, [&](Value v) { return touched.contains(v); }))
        continue;
      touched.insert(mine.begin(), mine.end());
      freed += candidate.bytes;
      SmallVector<Operation *> added = recompute(candidate, timeline);
      batch.applied.push_back({std::move(candidate), std::move(added)});
    }
    return batch;
  }

  /// Where the rest would be left to dc-offload-activations: the one of
  /// `all` to recompute instead, if any. Its placement is tried on a copy
  /// of the step (trialOffloadSeconds); where it adds time, the tensors
  /// whose copies it waits for and those made latest before the peak (whose
  /// copies start last), kLateCandidates of each that are cheaper than that
  /// time, are recomputed on trial, and the one whose time plus the
  /// placement's after it is least is chosen if that beats the placement
  /// alone. The tried placements run in parallel (each on its own copy).
  std::optional<Recomputation>
  chooseOverOffload(std::vector<Recomputation> &all,
                    const MemoryTimeline &timeline) {
    SmallVector<Value> stalled;
    double adds =
        trialOffloadSeconds(fn, costModel, budget, minBytes, &stalled);
    if (adds <= 0)
      return std::nullopt;
    SmallVector<Recomputation *> late;
    for (Recomputation &candidate : all)
      if (candidate.seconds < adds)
        late.push_back(&candidate);
    // The tensors whose copies the placement waits for, the longest wait
    // first, then the latest made.
    SmallVector<Recomputation *> tried;
    for (Value value : stalled)
      for (Recomputation *candidate : late)
        if (candidate->value == value && tried.size() < kLateCandidates)
          tried.push_back(candidate);
    llvm::stable_sort(late, [&](Recomputation *a, Recomputation *b) {
      return timeline.indexOf(definingTop(a->value)) >
             timeline.indexOf(definingTop(b->value));
    });
    late.truncate(std::min<size_t>(late.size(), kLateCandidates));
    for (Recomputation *candidate : late)
      if (!llvm::is_contained(tried, candidate))
        tried.push_back(candidate);
    // Each tried recomputation on a copy of the step, the placements on
    // the copies at once.
    SmallVector<func::FuncOp> copies;
    OpBuilder builder(fn);
    for (Recomputation *candidate : tried) {
      SmallVector<Operation *> added = recompute(*candidate, timeline);
      auto copy = cast<func::FuncOp>(builder.clone(*fn));
      copy.setName(
          (fn.getName() + ".recompute_trial" + Twine(copies.size())).str());
      copies.push_back(copy);
      undo(*candidate, added);
    }
    SmallVector<double> placements =
        trialOffloadSeconds(copies, costModel, budget, minBytes);
    Recomputation *chosen = nullptr;
    double least = adds;
    for (auto [candidate, placement] : llvm::zip_equal(tried, placements)) {
      double total = candidate->seconds + placement;
      if (total < least) {
        least = total;
        chosen = candidate;
      }
    }
    if (!chosen)
      return std::nullopt;
    return *chosen;
  }

  /// The compute time offloading `r`'s tensor would add by its two
  /// copies slowing the kernels beside them (the target's
  /// copyComputeSlowdown), if they are hidden.
  double copySlowdownSeconds(const Recomputation &r) {
    return 2 * costModel.copySeconds(r.bytes) *
           costModel.getTarget().copyComputeSlowdown;
  }

  /// The top-level op of the step that makes `value`.
  Operation *definingTop(Value value) {
    return fn.getBody().front().findAncestorOpInBlock(*value.getDefiningOp());
  }

  /// True if, by the stall floor, offloading what is over budget now need
  /// not stall compute.
  bool offloadCanHide(const MemoryTimeline &timeline) {
    SimulationResult sim = StreamSimulator(costModel).run(fn, timeline);
    std::optional<OffloadFloorAttr> floor = computeOffloadFloor(
        costModel, timeline, sim,
        collectOffloadCandidates(fn, costModel, timeline, sim, minBytes,
                                 /*keepLast=*/0),
        budget);
    return floor && floor->getStallSeconds().isZero();
  }

  /// True if `value` is still read at or after op `at` of the timeline.
  static bool liveAt(Value value, size_t at, const MemoryTimeline &timeline,
                     Block &body) {
    // Its buffer is: that of the value it views, if it is a view.
    value = getViewedBuffer(value);
    if (isa<BlockArgument>(value))
      return true;
    for (Value view : getBufferViews(value)) {
      for (Operation *user : view.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && timeline.indexOf(top) >= at)
          return true;
      }
    }
    return false;
  }

  /// Adds to `r` the ops (and gathers) that make `value` at op `at`;
  /// false if some input can be neither read there nor recomputed.
  bool addProducers(Value value, size_t at, const MemoryTimeline &timeline,
                    Recomputation &r,
                    llvm::SmallPtrSetImpl<Operation *> &seen) {
    Block &body = fn.getBody().front();
    Operation *def = value.getDefiningOp();
    if (!def || def->getBlock() != &body)
      return false;
    if (seen.contains(def))
      return true;
    if (!isExactlyRecomputable(def) || (!isFree(def) && r.computeOps >= maxOps))
      return false;
    seen.insert(def);
    r.computeOps += !isFree(def);
    for (Value input : readValues(def)) {
      if (input.getParentBlock() != &body || liveAt(input, at, timeline, body))
        continue;
      Operation *producer = input.getDefiningOp();
      if (auto wait = dyn_cast_or_null<WaitOp>(producer);
          wait &&
          isa_and_nonnull<GatherStartOp>(wait.getFuture().getDefiningOp())) {
        if (llvm::is_contained(r.regathers, input) ||
            llvm::any_of(r.copies, [&](auto &c) { return c.first == input; }))
          continue;
        if (Value copy = liveCopy(wait, at, timeline))
          r.copies.push_back({input, copy});
        else
          r.regathers.push_back(input);
        continue;
      }
      if (!addProducers(input, at, timeline, r, seen))
        return false;
    }
    r.chain.push_back(def);
    return true;
  }

  /// Another gathered copy of the parameter `wait` yields, waited before op
  /// `at` and still live there (released at or after it, or persistent).
  Value liveCopy(WaitOp wait, size_t at, const MemoryTimeline &timeline) {
    Block &body = fn.getBody().front();
    auto future = cast<OpResult>(wait.getFuture());
    Value shard = cast<GatherStartOp>(future.getOwner())
                      .getShards()[future.getResultNumber()];
    for (Operation *user : shard.getUsers()) {
      auto gather = dyn_cast<GatherStartOp>(user);
      if (!gather || gather->getBlock() != &body)
        continue;
      for (auto [i, other] : llvm::enumerate(gather.getShards())) {
        if (other != shard)
          continue;
        for (Operation *waiter : gather.getFutures()[i].getUsers()) {
          auto copy = dyn_cast<WaitOp>(waiter);
          if (!copy || copy == wait || copy->getBlock() != &body ||
              timeline.indexOf(copy) >= at)
            continue;
          if (gather.getPersistent() ||
              liveAt(copy.getResult(), at, timeline, body))
            return copy.getResult();
        }
      }
    }
    return Value();
  }

  /// Every activation idle across `peak` that can be recomputed at its next
  /// use, with what that costs.
  std::vector<Recomputation>
  collectCandidates(const MemoryTimeline &timeline, size_t peak,
                    const llvm::DenseSet<Value> &rejected) {
    Block &body = fn.getBody().front();
    std::vector<Recomputation> candidates;
    for (size_t i = 0; i < peak; ++i) {
      Operation *op = timeline.getOps()[i];
      // Not a recomputed value again: it is made right before its next
      // use already, and taking it again could undo the recomputation it
      // was for (two values made just before one use, each moved after the
      // other in turn: config A's final norm and the logits' fill, which
      // the GPU target prices at 0, swapped until the round limit).
      // A buffer is recomputed whole, from the value that allocates it: a
      // view frees nothing while its buffer has other uses.
      if (isFree(op) || !isExactlyRecomputable(op) ||
          op->hasAttr(kRecomputeAttrName) || getViewedOperand(op))
        continue;
      for (Value value : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(value.getType());
        if (!type || getTypeBytes(type) < minBytes || rejected.contains(value))
          continue;
        // The first top-level op reading it (or a view of it) after the
        // peak; none may read it at the peak itself (nor return it).
        Operation *firstAfter = nullptr;
        bool readAtPeak = false;
        for (OpOperand *use : getBufferUses(value)) {
          Operation *top = body.findAncestorOpInBlock(*use->getOwner());
          if (!top)
            continue;
          size_t at = timeline.indexOf(top);
          if (at == peak || isa<func::ReturnOp>(top))
            readAtPeak = true;
          else if (at > peak &&
                   (!firstAfter || at < timeline.indexOf(firstAfter)))
            firstAfter = top;
        }
        if (readAtPeak || !firstAfter)
          continue;
        Recomputation r;
        r.value = value;
        r.firstAfter = firstAfter;
        r.bytes = getTypeBytes(type);
        llvm::SmallPtrSet<Operation *, 16> seen;
        if (!addProducers(value, timeline.indexOf(firstAfter), timeline, r,
                          seen))
          continue;
        for (Operation *cloned : r.chain)
          if (!isFree(cloned))
            r.seconds += secondsOf(cloned);
        for (Value gathered : r.regathers)
          r.seconds += gatherSeconds(gathered);
        if ((r.sibling = findSibling(r)))
          r.seconds = mergedSeconds(r);
        candidates.push_back(std::move(r));
      }
    }
    return candidates;
  }

  /// The op `r` can be merged into (Recomputation::sibling), if any: one of
  /// the kSiblingWindow ops after its first use, none of which reads what
  /// that use makes or `r`'s tensor, nor has memory effects on what that
  /// use reads (a release of a gathered operand).
  linalg::GenericOp findSibling(const Recomputation &r) {
    if (!mergeSiblings || r.computeOps != 1 || !r.regathers.empty() ||
        !r.copies.empty())
      return {};
    auto later = dyn_cast<linalg::GenericOp>(r.chain.back());
    Operation *use = r.firstAfter;
    if (!later || !isMemoryEffectFree(use))
      return {};
    llvm::SmallPtrSet<Value, 8> useReads(use->operand_begin(),
                                         use->operand_end());
    SmallVector<Value> views = getBufferViews(r.value);
    llvm::SmallPtrSet<Value, 8> tensor(views.begin(), views.end());
    tensor.insert(r.value);
    int window = kSiblingWindow;
    for (Operation *op = use->getNextNode();
         op && !op->hasTrait<OpTrait::IsTerminator>() && window-- > 0;
         op = op->getNextNode()) {
      bool blocks = false;
      bool effects = !isMemoryEffectFree(op);
      op->walk([&](Operation *inner) {
        for (Value value : inner->getOperands())
          blocks |= value.getDefiningOp() == use || tensor.contains(value) ||
                    (effects && useReads.contains(value));
      });
      if (blocks)
        return {};
      auto generic = dyn_cast<linalg::GenericOp>(op);
      if (!generic || op->hasAttr(kRecomputeAttrName) ||
          !readsOnlyInputsOf(later, generic))
        continue;
      // Its body reads no tensor from outside (scalar constants at most):
      // out of the block while merged, it must hold no buffer live.
      llvm::SetVector<Value> fromAbove;
      getUsedValuesDefinedAbove(generic.getRegion(), fromAbove);
      if (llvm::all_of(fromAbove, [](Value value) {
            return !isa<ShapedType>(value.getType()) &&
                   matchPattern(value, m_Constant());
          }))
        return generic;
    }
    return {};
  }

  /// The time the op merging `r` into its sibling takes over the sibling
  /// alone, from one built for the cost model and erased. Both estimated
  /// from their bytes and flops: a profile times the sibling alone (and
  /// would name the merged op by the sibling's place).
  double mergedSeconds(const Recomputation &r) {
    OpBuilder builder(r.sibling);
    auto later = cast<linalg::GenericOp>(r.chain.back());
    linalg::GenericOp merged =
        buildMerged(builder, r.sibling, later, later.getDpsInits());
    double seconds = modelAlone.estimate(merged).seconds -
                     modelAlone.estimate(r.sibling).seconds;
    merged->erase();
    return std::max(0.0, seconds);
  }

  /// The cost model's time for `op`, kept: the candidates of every round
  /// ask for the same ops again.
  double secondsOf(Operation *op) {
    if (!keepCosts)
      return costModel.estimate(op).seconds;
    auto [it, inserted] = seconds.try_emplace(op, 0.0);
    if (inserted)
      it->second = costModel.estimate(op).seconds;
    return it->second;
  }

  /// The time of gathering `gathered` (a dc.wait result) again, alone.
  double gatherSeconds(Value gathered) {
    auto wait = cast<WaitOp>(gathered.getDefiningOp());
    auto group = cast<GatherStartOp>(wait.getFuture().getDefiningOp());
    // The group's time shared by bytes (a fused group moves them at once).
    double groupSeconds = secondsOf(group);
    int64_t total = 0;
    for (Value future : group.getFutures())
      total += getTypeBytes(cast<FutureType>(future.getType()).getValue());
    int64_t mine = getTypeBytes(gathered.getType());
    return total > 0 ? groupSeconds * mine / total : groupSeconds;
  }

  /// Clones `r`'s ops right before its next use and points the uses from
  /// there on at the clone. Returns the ops it added.
  SmallVector<Operation *> recompute(Recomputation &r,
                                     const MemoryTimeline &timeline) {
    if (r.sibling)
      return recomputeMerged(r, timeline);
    OpBuilder builder(r.firstAfter);
    IRMapping mapping;
    SmallVector<Operation *> added;
    IntegerAttr id = builder.getI64IntegerAttr(nextId++);
    SmallVector<Value> gathered;
    for (auto [param, copy] : r.copies)
      mapping.map(param, copy);
    for (Value param : r.regathers) {
      auto wait = cast<WaitOp>(param.getDefiningOp());
      auto group = cast<GatherStartOp>(wait.getFuture().getDefiningOp());
      auto future = cast<OpResult>(wait.getFuture());
      Value shard = group.getShards()[future.getResultNumber()];
      auto start =
          GatherStartOp::create(builder, param.getLoc(),
                                TypeRange{future.getType()}, ValueRange{shard},
                                /*persistent=*/false);
      auto again =
          WaitOp::create(builder, param.getLoc(), start.getFutures()[0]);
      start->setAttr(kRecomputeAttrName, id);
      mapping.map(param, again.getResult());
      gathered.push_back(again.getResult());
      added.push_back(start);
      added.push_back(again);
    }
    for (Operation *op : r.chain) {
      Operation *clone = builder.clone(*op, mapping);
      clone->setAttr(kRecomputeAttrName, id);
      added.push_back(clone);
    }
    for (Value param : gathered)
      added.push_back(ReleaseOp::create(builder, param.getLoc(), param));
    redirectToClone(r, mapping.lookup(r.value), added, timeline, builder);
    return added;
  }

  /// recompute for a merge: the sibling replaced by an op that also makes
  /// `r`'s tensor (its free producers cloned before it), and the first use
  /// moved right after it.
  SmallVector<Operation *> recomputeMerged(Recomputation &r,
                                           const MemoryTimeline &timeline) {
    linalg::GenericOp sibling = r.sibling;
    // Where the use is right before the sibling, undo puts it before the
    // sibling made again, which takes the merged op's place.
    Operation *next = r.firstAfter->getNextNode();
    bool beforeSibling = next == sibling.getOperation();
    OpBuilder builder(sibling);
    IRMapping mapping;
    SmallVector<Operation *> added;
    IntegerAttr id = builder.getI64IntegerAttr(nextId++);
    for (Operation *op : ArrayRef<Operation *>(r.chain).drop_back()) {
      Operation *clone = builder.clone(*op, mapping);
      clone->setAttr(kRecomputeAttrName, id);
      added.push_back(clone);
    }
    auto later = cast<linalg::GenericOp>(r.chain.back());
    SmallVector<Value> inits;
    for (Value init : later.getDpsInits())
      inits.push_back(mapping.lookupOrDefault(init));
    linalg::GenericOp merged = buildMerged(builder, sibling, later, inits);
    unsigned own = sibling->getNumResults();
    merged->setAttr(kRecomputeAttrName, id);
    merged->setAttr(kRecomputedResultsAttrName, builder.getI64IntegerAttr(own));
    added.push_back(merged);
    sibling->replaceAllUsesWith(merged->getResults().take_front(own));
    // Kept out of the block, reading nothing, so that undo puts the same op
    // back: other candidates may name it.
    r.siblingOperands.assign(sibling->operand_begin(), sibling->operand_end());
    sibling->remove();
    for (OpOperand &operand : sibling->getOpOperands())
      operand.drop();
    unlinked.insert(sibling);
    r.movedFrom = beforeSibling ? merged.getOperation() : next;
    r.firstAfter->moveAfter(merged);
    // Its output's fill, made for it alone, goes with it (else it would
    // be live across the ops in between).
    r.movedInits.clear();
    std::function<void(Operation *)> collect = [&](Operation *op) {
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && def->getBlock() == op->getBlock() && def->hasOneUse() &&
            isa<tensor::EmptyOp, linalg::FillOp>(def)) {
          collect(def);
          r.movedInits.push_back(def);
        }
      }
    };
    collect(r.firstAfter);
    for (Operation *op : r.movedInits)
      op->moveBefore(r.firstAfter);
    mapping.map(later->getResults(), merged->getResults().drop_front(own));
    builder.setInsertionPoint(r.firstAfter);
    redirectToClone(r, mapping.lookup(r.value), added, timeline, builder);
    return added;
  }

  /// Points the uses of `r`'s tensor from its first use on (in `timeline`)
  /// at `clone`, through views of it made at `builder`'s point for the uses
  /// through views; those go into `r.views` and `added`.
  void redirectToClone(Recomputation &r, Value clone,
                       SmallVector<Operation *> &added,
                       const MemoryTimeline &timeline, OpBuilder &builder) {
    Block &body = fn.getBody().front();
    size_t from = timeline.indexOf(r.firstAfter);
    r.views = redirectBufferUses(
        r.value, clone,
        [&](OpOperand &use) {
          Operation *top = body.findAncestorOpInBlock(*use.getOwner());
          return top && !llvm::is_contained(added, top) &&
                 timeline.indexOf(top) >= from;
        },
        builder);
    r.views.insert(r.views.begin(), {clone, r.value});
    Attribute id = clone.getDefiningOp()->getAttr(kRecomputeAttrName);
    for (auto [view, original] : llvm::drop_begin(r.views)) {
      view.getDefiningOp()->setAttr(kRecomputeAttrName, id);
      added.push_back(view.getDefiningOp());
    }
  }

  /// Reverts `recompute`: the uses go back to the originals and the added
  /// ops are erased.
  void undo(Recomputation &r, ArrayRef<Operation *> added) {
    for (auto [clone, original] : r.views)
      clone.replaceAllUsesWith(original);
    if (r.movedFrom) {
      Operation *merged = r.views.front().first.getDefiningOp();
      Operation *sibling = r.sibling;
      sibling->setOperands(r.siblingOperands);
      merged->getBlock()->getOperations().insert(merged->getIterator(),
                                                 sibling);
      unlinked.erase(sibling);
      for (auto [mine, theirs] :
           llvm::zip(merged->getResults(), sibling->getResults()))
        mine.replaceAllUsesWith(theirs);
      Operation *before = r.movedFrom == merged ? sibling : r.movedFrom;
      for (Operation *op : r.movedInits)
        op->moveBefore(before);
      r.firstAfter->moveBefore(before);
      r.movedFrom = nullptr;
    }
    for (Operation *op : llvm::reverse(added)) {
      // A later op may be allocated where this one was.
      seconds.erase(op);
      op->erase();
    }
  }

  func::FuncOp fn;
  const CostModel &costModel;
  /// The same model without a profile (mergedSeconds).
  CostModel modelAlone;
  int64_t budget, minBytes, maxOps;
  bool leaveToOffload, mergeSiblings, keepCosts;
  int64_t nextId = 0;
  /// Siblings replaced by merged ops, out of the block (undo puts one
  /// back); destroyed with the planner.
  llvm::SmallPtrSet<Operation *, 8> unlinked;
  llvm::DenseMap<Operation *, double> seconds;
  /// Every recomputation made and kept so far, in the order made.
  std::vector<Applied> kept;
};

struct RematerializePass
    : public dc::impl::DCRematerializeBase<RematerializePass> {
  using DCRematerializeBase::DCRematerializeBase;

  void runOnOperation() override {
    if (failed(checkOptionRange(getOperation(), getArgument(), "min-bytes",
                                minBytes, 0)) ||
        failed(checkOptionRange(getOperation(), getArgument(),
                                "max-recompute-ops", maxRecomputeOps, 1)))
      return signalPassFailure();
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) {
      return Rematerializer(fn, costModel, setup.budgetBytes, minBytes,
                            maxRecomputeOps, leaveToOffload, mergeSiblings,
                            /*keepCosts=*/!setup.profile)
          .run();
    };
    if (failed(planEachStep(getOperation(), getArgument(), profile,
                            optimizerStateBytes, plan)))
      signalPassFailure();
  }
};

} // namespace
