//===- MemoryTimeline.cpp - device and host bytes live at each op ---------===//
#include "dc/Analysis/MemoryTimeline.h"

#include "dc/Analysis/Accumulators.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace dc;

/// Every asynchronous start (the interface, not a list that a new start op
/// could miss: an all-reduce's input was once taken as free at its start).
static bool isStartOp(Operation *op) { return isa<AsyncStartOpInterface>(op); }

static bool isOnHost(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  return isa<HostType>(type);
}

/// The value whose buffer `result` shares, or null if it allocates its own.
static Value getAliasedValue(OpResult result) {
  Operation *op = result.getOwner();
  if (auto wait = dyn_cast<WaitOp>(op))
    return wait.getFuture();
  if (auto flush = dyn_cast<EndBackwardOp>(op))
    return flush.getFutures()[result.getResultNumber()];
  if (OpOperand *viewed = getViewedOperand(op))
    return viewed->get();
  // The updated parameter and state are returned into their arguments'
  // buffers (dc-optimizer-in-step): the update allocates nothing for them.
  // State uploaded from host memory (dc-offload-optimizer-state) is updated
  // into a buffer of its own.
  if (auto update = dyn_cast<AdamWOp>(op)) {
    Value operands[] = {update.getParam(), update.getExpAvg(),
                        update.getExpAvgSq(), update.getMaster()};
    Value operand = operands[result.getResultNumber()];
    return isa<BlockArgument>(operand) ? operand : Value();
  }
  // A gradient's sum over micro-batches is returned into its accumulator
  // argument's buffer (dc-optimizer-in-step): the caller passes one.
  if (auto sum = dyn_cast<GradAccumulateOp>(op))
    if (auto arg = dyn_cast<BlockArgument>(sum.getSum()))
      if (auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
        if (arg.hasOneUse() && getAccumulatedParam(fn, arg.getArgNumber()))
          return arg;
  // A destination-style op writes its result into its init, and a loop
  // updates the tensor it carries in its init's buffer, as One-Shot
  // Bufferize does in place when nothing else reads the init afterwards
  // (used nowhere else, or read only before: dc-in-place-at-peak's rewrite).
  Value init;
  bool destination = false;
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op)) {
    init = dps.getDpsInitOperand(result.getResultNumber())->get();
    destination = true;
  } else if (auto loop = dyn_cast<LoopLikeOpInterface>(op)) {
    if (OpOperand *tied = loop.getTiedLoopInit(result))
      init = tied->get();
  }
  if (init && isa<OpResult>(init) && !init.getDefiningOp<tensor::EmptyOp>() &&
      (init.hasOneUse() ||
       (destination && isLastReadBeforeInPlaceWrite(init, op))))
    return init;
  // A gradient accumulator's update (dc-accumulate-gradients) is returned
  // into the accumulator argument's own buffer: the caller passes one.
  if (auto arg = dyn_cast_or_null<BlockArgument>(init))
    if (auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      if (init.hasOneUse() && getAccumulatedParam(fn, arg.getArgNumber()))
        return init;
  return {};
}

/// tensor.empty only names a shape: its buffer is the one its first writer
/// allocates.
static bool allocatesNothing(Operation *op) { return isa<tensor::EmptyOp>(op); }

/// True if `value` is a tensor of dynamic shape: it has no bytes to plan.
static bool isDynamicTensor(Value value) {
  auto tensor = dyn_cast<TensorType>(value.getType());
  return tensor && !tensor.hasStaticShape();
}

/// Fails with an error on `fn`, and a note at the value, if `value` is a
/// tensor of dynamic shape.
static LogicalResult checkStaticShape(func::FuncOp fn, Value value,
                                      const llvm::Twine &what) {
  if (!isDynamicTensor(value))
    return success();
  auto tensor = cast<TensorType>(value.getType());
  InFlightDiagnostic diag =
      fn.emitError() << "cannot plan the memory of '" << fn.getSymName()
                     << "': " << what << " has the dynamically shaped type "
                     << tensor << " (dc needs static shapes)";
  diag.attachNote(value.getLoc()) << "the dynamically shaped value";
  return diag;
}

bool MemoryTimeline::canCompute(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return false;
  Block &body = fn.getBody().front();
  if (llvm::any_of(body.getArguments(), isDynamicTensor))
    return false;
  return llvm::none_of(body, [](Operation &op) {
    return llvm::any_of(op.getResults(), isDynamicTensor);
  });
}

FailureOr<MemoryTimeline> MemoryTimeline::compute(func::FuncOp fn) {
  if (fn.isExternal())
    return fn.emitError() << "cannot plan the memory of '" << fn.getSymName()
                          << "': it has no body";
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << "cannot plan the memory of '" << fn.getSymName()
                          << "': its body has "
                          << fn.getBody().getBlocks().size()
                          << " blocks, dc plans straight-line steps (one "
                             "block)";
  Block &body = fn.getBody().front();

  for (BlockArgument arg : body.getArguments())
    if (failed(checkStaticShape(
            fn, arg, "argument #" + llvm::Twine(arg.getArgNumber()))))
      return failure();

  // A planner takes a timeline per decision, so this is the planners' inner
  // loop: the op list is walked once (each step of it a cache miss on a
  // large step; its size() walks it too), uses are read as each op's
  // operands rather than through use lists, and nothing is looked up by op
  // that the walk already knows.
  MemoryTimeline timeline;
  for (Operation &op : body)
    timeline.ops.push_back(&op);
  size_t bodySize = timeline.ops.size();
  timeline.index.reserve(bodySize);
  llvm::DenseMap<Value, unsigned> bufferOf;
  bufferOf.reserve(bodySize + body.getNumArguments());
  std::vector<bool> wholeFunction;
  std::vector<bool> isUnreleasedGather;
  auto addBuffer = [&](Value value, size_t begin, bool gather) {
    int64_t bytes = getTypeBytes(value.getType());
    if (bytes == 0)
      return;
    bufferOf[value] = timeline.buffers.size();
    timeline.buffers.push_back(
        {value, bytes, isOnHost(value.getType()), begin, begin});
    wholeFunction.push_back(false);
    // Cleared by a dc.release; a persistent gather keeps it set.
    isUnreleasedGather.push_back(gather);
  };
  for (BlockArgument arg : body.getArguments()) {
    addBuffer(arg, 0, /*gather=*/false);
    if (bufferOf.count(arg))
      wholeFunction.back() = true;
  }
  SmallVector<size_t> startOps;
  SmallVector<GatherStartOp> persistentGathers;
  for (auto [i, op] : llvm::enumerate(timeline.ops)) {
    timeline.index[op] = i;
    for (OpResult result : op->getResults()) {
      if (failed(checkStaticShape(fn, result,
                                  "result #" +
                                      llvm::Twine(result.getResultNumber()) +
                                      " of " + op->getName().getStringRef())))
        return failure();
      if (Value source = getAliasedValue(result)) {
        auto it = bufferOf.find(source);
        if (it != bufferOf.end())
          bufferOf[result] = it->second;
        continue;
      }
      if (!allocatesNothing(op))
        addBuffer(result, i, isa<GatherStartOp>(op));
    }
    if (isStartOp(op)) {
      startOps.push_back(i);
      if (auto gather = dyn_cast<GatherStartOp>(op);
          gather && gather.getPersistent())
        persistentGathers.push_back(gather);
    }
  }
  const size_t numOps = timeline.ops.size();
  if (numOps == 0)
    return MemoryTimeline();
  const size_t last = numOps - 1;

  // Until where each op's operands stay live: the op itself, or for a
  // start op where its futures are waited. A future never waited keeps
  // them to the end.
  std::vector<size_t> liveTo(numOps);
  std::iota(liveTo.begin(), liveTo.end(), 0);
  for (size_t i : startOps) {
    for (Value future : timeline.ops[i]->getResults()) {
      if (future.use_empty())
        liveTo[i] = last;
      for (Operation *user : future.getUsers())
        if (Operation *ancestor = body.findAncestorOpInBlock(*user))
          liveTo[i] = std::max(liveTo[i], timeline.index[ancestor]);
    }
  }

  // Extend each buffer over its uses: each top-level op reads its operands
  // and those of the ops nested in it (a use inside a region counts at the
  // enclosing op); a start op's until its futures are waited. The floor
  // reads the distinct buffers each op touches (results and operands).
  std::vector<llvm::SmallVector<unsigned, 4>> touched(numOps);
  for (auto [i, op] : llvm::enumerate(timeline.ops)) {
    llvm::SmallVector<unsigned, 4> &ids = touched[i];
    for (Value result : op->getResults())
      if (auto it = bufferOf.find(result); it != bufferOf.end())
        ids.push_back(it->second);
    auto readOperands = [&](Operation *user) {
      bool release = isa<ReleaseOp>(user);
      for (Value operand : user->getOperands()) {
        auto it = bufferOf.find(operand);
        if (it == bufferOf.end())
          continue;
        ids.push_back(it->second);
        Buffer &live = timeline.buffers[it->second];
        live.end = std::max(live.end, liveTo[i]);
        if (release)
          isUnreleasedGather[it->second] = false;
      }
    };
    // The nested ops by hand (a linalg body is a handful of ops; the
    // generic walk costs more than reading them).
    auto readNested = [&](auto &self, Operation *parent) -> void {
      for (Region &region : parent->getRegions())
        for (Block &block : region)
          for (Operation &inner : block) {
            readOperands(&inner);
            if (inner.getNumRegions() != 0)
              self(self, &inner);
          }
    };
    readOperands(op);
    if (op->getNumRegions() != 0)
      readNested(readNested, op);
  }
  for (GatherStartOp gather : persistentGathers)
    for (Value future : gather.getFutures())
      if (auto it = bufferOf.find(future); it != bufferOf.end())
        isUnreleasedGather[it->second] = true;
  // A returned buffer the step allocates lives from where it is made to the
  // end: the artifact places it in the step arena (the caller reads it there
  // after the step), so before it is made its bytes hold other temporaries.
  // One the caller passes in (an argument) lives the whole step.
  if (Operation *terminator = body.empty() ? nullptr : &body.back())
    if (terminator->hasTrait<OpTrait::IsTerminator>())
      for (Value returned : terminator->getOperands())
        if (auto it = bufferOf.find(returned); it != bufferOf.end())
          timeline.buffers[it->second].end = last;

  for (auto [id, buffer] : llvm::enumerate(timeline.buffers)) {
    buffer.wholeFunction = wholeFunction[id];
    if (isUnreleasedGather[id])
      buffer.end = last;
  }
  timeline.bufferByValue = std::move(bufferOf);
  timeline.sweep();

  int64_t largestOpNeed = 0;
  for (llvm::SmallVector<unsigned, 4> &ids : touched) {
    llvm::sort(ids);
    int64_t need = 0;
    for (unsigned id : llvm::make_range(ids.begin(), llvm::unique(ids)))
      if (!wholeFunction[id] && !timeline.buffers[id].onHost)
        need += timeline.buffers[id].bytes;
    largestOpNeed = std::max(largestOpNeed, need);
  }
  timeline.floorBytes = timeline.baseDevice + largestOpNeed;
  return timeline;
}

void MemoryTimeline::sweep() {
  const size_t numOps = ops.size();
  deviceBytes.assign(numOps, 0);
  hostBytes.assign(numOps, 0);
  baseDevice = 0;
  peaksStale = true;
  if (numOps == 0)
    return;
  // +bytes at a buffer's begin, -bytes after its end.
  std::vector<int64_t> deviceDelta(numOps + 1, 0), hostDelta(numOps + 1, 0);
  for (Buffer &buffer : buffers) {
    if (buffer.wholeFunction) {
      buffer.begin = 0;
      buffer.end = numOps - 1;
      if (!buffer.onHost)
        baseDevice += buffer.bytes;
    }
    std::vector<int64_t> &delta = buffer.onHost ? hostDelta : deviceDelta;
    delta[buffer.begin] += buffer.bytes;
    delta[buffer.end + 1] -= buffer.bytes;
  }
  int64_t device = 0, host = 0;
  for (size_t i = 0; i < numOps; ++i) {
    device += deviceDelta[i];
    host += hostDelta[i];
    deviceBytes[i] = device;
    hostBytes[i] = host;
  }
}

void MemoryTimeline::refreshPeaks() const {
  if (!peaksStale)
    return;
  peaksStale = false;
  peakDevice = peakHost = 0;
  peakIndex = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (deviceBytes[i] > peakDevice) {
      peakDevice = deviceBytes[i];
      peakIndex = i;
    }
    peakHost = std::max(peakHost, hostBytes[i]);
  }
}

void MemoryTimeline::addLive(bool onHost, size_t begin, size_t end,
                             int64_t bytes) {
  std::vector<int64_t> &live = onHost ? hostBytes : deviceBytes;
  for (size_t i = begin; i <= end && i < live.size(); ++i)
    live[i] += bytes;
  peaksStale = true;
}

std::pair<int64_t, int64_t> MemoryTimeline::liveAt(size_t i) const {
  int64_t device = 0, host = 0;
  for (const Buffer &buffer : buffers)
    if (buffer.wholeFunction || (buffer.begin <= i && i <= buffer.end))
      (buffer.onHost ? host : device) += buffer.bytes;
  return {device, host};
}

void MemoryTimeline::insertOp(Operation *op, size_t at) {
  ops.insert(ops.begin() + at, op);
  for (size_t i = at; i < ops.size(); ++i)
    index[ops[i]] = i;
  for (Buffer &buffer : buffers) {
    if (buffer.wholeFunction)
      continue;
    buffer.begin += buffer.begin >= at;
    buffer.end += buffer.end >= at;
  }
  auto [device, host] = liveAt(at);
  deviceBytes.insert(deviceBytes.begin() + at, device);
  hostBytes.insert(hostBytes.begin() + at, host);
  peaksStale = true;
}

void MemoryTimeline::moveOp(size_t from, size_t to) {
  if (to == from || to == from + 1)
    return;
  if (to < ops.size())
    ops[from]->moveBefore(ops[to]);
  else
    ops[from]->moveAfter(ops.back());
  size_t dest = to > from ? to - 1 : to;
  // The ops it passes (old indices) gain or lose the buffers it bounds: one
  // it makes is live at them only if it now comes before them, one it reads
  // last only if it now comes after them.
  size_t first = to > from ? from + 1 : to,
         last = to > from ? to - 1 : from - 1;
  for (const Buffer &buffer : buffers) {
    if (buffer.wholeFunction || buffer.begin == buffer.end ||
        (buffer.begin != from && buffer.end != from))
      continue;
    bool made = buffer.begin == from;
    if (to > from) // later: a made one leaves the ops up to its end
      made ? addLive(buffer.onHost, first, std::min(last, buffer.end),
                     -buffer.bytes)
           : addLive(buffer.onHost, first, last, buffer.bytes);
    else // earlier: an ended one leaves the ops from its begin
      made ? addLive(buffer.onHost, first, last, buffer.bytes)
           : addLive(buffer.onHost, std::max(first, buffer.begin), last,
                     -buffer.bytes);
  }
  auto moved = [&](size_t old) -> size_t {
    if (old == from)
      return dest;
    if (to > from && old > from && old < to)
      return old - 1;
    if (to < from && old >= to && old < from)
      return old + 1;
    return old;
  };
  // The moved entry to `dest`, the passed ones by one toward `from`.
  auto shift = [&](auto &entries) {
    auto at = [&](size_t i) { return entries.begin() + i; };
    if (to > from)
      std::rotate(at(from), at(from + 1), at(to));
    else
      std::rotate(at(to), at(from), at(from + 1));
  };
  shift(ops);
  shift(deviceBytes);
  shift(hostBytes);
  for (size_t i = std::min(from, dest), e = std::max(from, dest); i <= e; ++i)
    index[ops[i]] = i;
  for (Buffer &buffer : buffers) {
    if (buffer.wholeFunction)
      continue;
    buffer.begin = moved(buffer.begin);
    buffer.end = moved(buffer.end);
  }
  std::tie(deviceBytes[dest], hostBytes[dest]) = liveAt(dest);
  peaksStale = true;
}

void MemoryTimeline::setBufferEnd(size_t id, size_t end) {
  Buffer &buffer = buffers[id];
  if (end < buffer.end)
    addLive(buffer.onHost, end + 1, buffer.end, -buffer.bytes);
  else if (end > buffer.end)
    addLive(buffer.onHost, buffer.end + 1, end, buffer.bytes);
  buffer.end = end;
}

void MemoryTimeline::addBuffer(const Buffer &buffer) {
  bufferByValue[buffer.value] = buffers.size();
  buffers.push_back(buffer);
  addLive(buffer.onHost, buffer.begin, buffer.end, buffer.bytes);
}

std::optional<size_t> MemoryTimeline::findBuffer(Value value) const {
  auto it = bufferByValue.find(value);
  if (it == bufferByValue.end())
    return std::nullopt;
  return it->second;
}

bool MemoryTimeline::equalsRecomputed(func::FuncOp fn) const {
  FailureOr<MemoryTimeline> fresh = compute(fn);
  return succeeded(fresh) && fresh->ops == ops &&
         fresh->deviceBytes == deviceBytes && fresh->hostBytes == hostBytes &&
         fresh->getPeakDeviceBytes() == getPeakDeviceBytes() &&
         fresh->getPeakIndex() == getPeakIndex();
}

size_t MemoryTimeline::indexOf(Operation *op) const {
  auto it = index.find(op);
  // Checked in every build: reading past the map is heap corruption, and a
  // caller that gets here has skipped checkPlanningPreconditions.
  if (it == index.end())
    llvm::report_fatal_error(
        "MemoryTimeline::indexOf: not a top-level op of the timeline's "
        "function");
  return it->second;
}
