//===- Collectives.cpp - the artifact's C ABI: collectives, futures, copies
//===//
//
// Starts pack (and cast) on the caller's thread, hand one MPI nonblocking
// collective per group or bucket to the communication thread and return a
// future; dcrt_wait blocks until the thread saw it complete, then unpacks,
// casts and averages. Staging buffers are pooled, outputs come from the
// gather arena (gathers) or the step buffers (everything else).
//
//===----------------------------------------------------------------------===//
#include "Runtime.h"

#include "dcrt/core.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"
#include "dcrt/params.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;
using Kind = dcrt_future_impl::Kind;

const std::atomic<bool> &dcrt_future_impl::doneFlag() const {
  return kind == Kind::Offload || kind == Kind::Reload || kind == Kind::Upload
             ? copy.done
             : comm.done;
}

const char *dcrt_future_impl::what() const {
  switch (kind) {
  case Kind::Gather:
    return "all-gather";
  case Kind::ReduceScatter:
    return "reduce-scatter";
  case Kind::AllReduce:
    return "all-reduce";
  case Kind::Offload:
    return "offload copy";
  case Kind::Reload:
    return "reload copy";
  case Kind::Upload:
    return "upload copy";
  }
  return "?";
}

static const char *waitSpanName(Kind kind) {
  switch (kind) {
  case Kind::Gather:
    return "wait all-gather";
  case Kind::ReduceScatter:
    return "wait reduce-scatter";
  case Kind::AllReduce:
    return "wait all-reduce";
  case Kind::Offload:
    return "wait offload";
  case Kind::Reload:
    return "wait reload";
  case Kind::Upload:
    return "wait upload";
  }
  return "wait";
}

static char *bytesAt(void *base, int64_t offset) {
  return static_cast<char *>(base) + offset;
}

static const char *bytesAt(const void *base, int64_t offset) {
  return static_cast<const char *>(base) + offset;
}

/// Elements of rank `r`'s slot that are real, not padding.
static int64_t validInSlot(int64_t fullNumel, int64_t localNumel, int64_t r) {
  return std::clamp<int64_t>(fullNumel - r * localNumel, 0, localNumel);
}

static void checkDType(int32_t dtype, const char *caller, int index) {
  if (!isValidDType(dtype))
    fatal("%s: tensor %d has unknown dtype code %d", caller, index, dtype);
}

static void checkShard(const Runtime &rt, int64_t localNumel, int64_t fullNumel,
                       const char *caller, int index) {
  if (fullNumel < 0 || localNumel != shardNumel(fullNumel, rt.worldSize))
    fatal("%s: tensor %d has %lld elements and a shard of %lld, but %d ranks "
          "need shards of ceil(%lld / %d) = %lld (was the artifact compiled "
          "for this world size?)",
          caller, index, static_cast<long long>(fullNumel),
          static_cast<long long>(localNumel), rt.worldSize,
          static_cast<long long>(fullNumel), rt.worldSize,
          static_cast<long long>(shardNumel(fullNumel, rt.worldSize)));
}

static int checkedCount(int64_t count, const char *caller) {
  if (count > INT_MAX)
    fatal("%s: %lld elements per rank is too large for one MPI call", caller,
          static_cast<long long>(count));
  return static_cast<int>(count);
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

dcrt_future dcrt_gather_start(int32_t n, void *const *shards,
                              const int64_t *local_numel,
                              const int64_t *full_numel,
                              const int32_t *src_dtype,
                              const int32_t *dst_dtype, void **out_full) {
  const char *caller = "dcrt_gather_start";
  Runtime &rt = runtime(caller);
  if (n <= 0)
    fatal("%s: a group of %d shards", caller, n);
  for (int i = 0; i < n; ++i) {
    checkDType(src_dtype[i], caller, i);
    checkDType(dst_dtype[i], caller, i);
    if (isFloatDType(src_dtype[i]) != isFloatDType(dst_dtype[i]))
      fatal("%s: tensor %d cannot be cast from %s to %s", caller, i,
            dtypeName(src_dtype[i]), dtypeName(dst_dtype[i]));
    checkShard(rt, local_numel[i], full_numel[i], caller, i);
  }

  dcrt_future_impl *future = rt.newFuture(Kind::Gather);
  int64_t world = rt.worldSize;
  // One shard that is exactly a rank's slice needs no packing at all.
  bool sendDirect = n == 1 && src_dtype[0] == dst_dtype[0];
  bool recvDirect = n == 1 && full_numel[0] == world * local_numel[0];
  int64_t block = 0;
  for (int i = 0; i < n; ++i) {
    int64_t slotBytes = local_numel[i] * dtypeSize(dst_dtype[i]);
    future->items.push_back(
        {nullptr, dst_dtype[i], local_numel[i], full_numel[i], block});
    // Slots start on 8 bytes so the group moves in 8-byte units.
    block += n == 1 ? slotBytes : alignUp(slotBytes, 8);
  }
  future->blockSize = block;

  const void *send = shards[0];
  if (!sendDirect) {
    future->sendStaging = rt.staging.acquire(block, "gather staging");
    for (int i = 0; i < n; ++i) {
      const dcrt_future_impl::Item &item = future->items[i];
      char *slot = bytesAt(future->sendStaging, item.segment);
      convert(shards[i], src_dtype[i], slot, item.dtype, item.localNumel);
      // Zero the gap to the next slot: no uninitialized bytes on the wire.
      int64_t used = item.localNumel * dtypeSize(item.dtype);
      int64_t next = i + 1 < n ? future->items[i + 1].segment : block;
      std::memset(slot + used, 0, next - item.segment - used);
    }
    send = future->sendStaging;
  }
  for (int i = 0; i < n; ++i) {
    dcrt_future_impl::Item &item = future->items[i];
    item.out = rt.gatherArena.allocate(item.fullNumel * dtypeSize(item.dtype),
                                       "an all-gather");
    out_full[i] = item.out;
    rt.gathered.push_back({item.out, shards[i], future});
  }
  void *recv = future->items[0].out;
  if (!recvDirect) {
    future->recvStaging = rt.staging.acquire(world * block, "gather staging");
    recv = future->recvStaging;
  }

  CommOp &op = future->comm;
  op.kind = CommKind::AllGather;
  op.track = Track::Gather;
  op.name = "all-gather";
  op.send = send;
  op.recv = recv;
  op.type = rt.unitFor(block, op.count, caller);
  op.bytes = world * block;
  rt.commEngine.submit(&op);
  return future;
}

static void finishGather(Runtime &rt, dcrt_future_impl *future) {
  if (future->recvStaging) {
    for (const auto &item : future->items) {
      int64_t elementSize = dtypeSize(item.dtype);
      for (int64_t r = 0; r < rt.worldSize; ++r)
        std::memcpy(
            bytesAt(item.out, r * item.localNumel * elementSize),
            bytesAt(future->recvStaging, r * future->blockSize + item.segment),
            validInSlot(item.fullNumel, item.localNumel, r) * elementSize);
    }
  }
  for (GatheredTensor &tensor : rt.gathered)
    if (tensor.pending == future)
      tensor.pending = nullptr;
}

static void releaseGathered(Runtime &rt,
                            std::vector<GatheredTensor>::iterator tensor,
                            const char *caller) {
  if (tensor->pending)
    fatal("%s: the gathered tensor %p is released before its gather (#%llu) "
          "was waited",
          caller, tensor->full,
          static_cast<unsigned long long>(tensor->pending->sequence));
  rt.gatherArena.release(tensor->full, caller);
}

/// Returns a reloaded or uploaded tensor to the step buffers.
static void releaseCopied(Runtime &rt,
                          std::vector<CopiedTensor>::iterator tensor) {
  if (tensor->pending)
    fatal("dcrt_release: the %s tensor %p is released before its %s (#%llu) "
          "was waited",
          tensor->pending->kind == Kind::Upload ? "uploaded" : "reloaded",
          tensor->device, tensor->pending->what(),
          static_cast<unsigned long long>(tensor->pending->sequence));
  rt.stepBuffers.release(tensor->device);
  rt.copied.erase(tensor);
}

void dcrt_release(void *full) {
  Runtime &rt = runtime("dcrt_release");
  auto found = std::find_if(
      rt.gathered.rbegin(), rt.gathered.rend(),
      [&](const GatheredTensor &tensor) { return tensor.full == full; });
  if (found == rt.gathered.rend()) {
    // Not gathered: a reload's or an upload's destination, freed now
    // rather than at the end of the step.
    auto copy = std::find_if(
        rt.copied.begin(), rt.copied.end(),
        [&](const CopiedTensor &tensor) { return tensor.device == full; });
    if (copy == rt.copied.end())
      fatal("dcrt_release(%p): not a gathered, reloaded or uploaded tensor in "
            "use (released twice, or not from dcrt_gather_start, "
            "dcrt_reload_start or dcrt_upload_start)",
            full);
    releaseCopied(rt, copy);
    return;
  }
  auto tensor = std::next(found).base();
  releaseGathered(rt, tensor, "dcrt_release");
  rt.gathered.erase(tensor);
}

void dcrt_invalidate_gathered(const void *shard) {
  Runtime &rt = runtime("dcrt_invalidate_gathered");
  for (auto tensor = rt.gathered.begin(); tensor != rt.gathered.end();) {
    if (tensor->shard != shard) {
      ++tensor;
      continue;
    }
    releaseGathered(rt, tensor, "dcrt_invalidate_gathered");
    tensor = rt.gathered.erase(tensor);
  }
}

void dcrt_clear_gathered(void) {
  Runtime &rt = runtime("dcrt_clear_gathered");
  for (auto tensor = rt.gathered.begin(); tensor != rt.gathered.end(); ++tensor)
    releaseGathered(rt, tensor, "dcrt_clear_gathered");
  rt.gathered.clear();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static void checkReduceOp(int32_t op, const char *caller) {
  if (op != DCRT_SUM && op != DCRT_AVG)
    fatal("%s: unknown reduction %d (DCRT_SUM or DCRT_AVG)", caller, op);
}

dcrt_future dcrt_reduce_scatter_start(int32_t n, int32_t op, void *const *grads,
                                      const int64_t *full_numel,
                                      const int32_t *grad_dtype,
                                      const int64_t *local_numel,
                                      const int32_t *shard_dtype,
                                      void **out_shards) {
  const char *caller = "dcrt_reduce_scatter_start";
  Runtime &rt = runtime(caller);
  checkReduceOp(op, caller);
  if (n <= 0)
    fatal("%s: a bucket of %d gradients", caller, n);
  for (int i = 0; i < n; ++i) {
    checkDType(grad_dtype[i], caller, i);
    checkDType(shard_dtype[i], caller, i);
    // Gradients are reduced in f32, whatever they are stored in.
    if (!isFloatDType(grad_dtype[i]) || !isFloatDType(shard_dtype[i]))
      fatal("%s: gradient %d is %s -> %s; only float gradients are reduced",
            caller, i, dtypeName(grad_dtype[i]), dtypeName(shard_dtype[i]));
    checkShard(rt, local_numel[i], full_numel[i], caller, i);
  }

  dcrt_future_impl *future = rt.newFuture(Kind::ReduceScatter);
  future->average = op == DCRT_AVG;
  int64_t world = rt.worldSize;
  int64_t block = 0; // f32 elements per rank
  for (int i = 0; i < n; ++i) {
    void *out = rt.stepBuffers.acquire(
        local_numel[i] * dtypeSize(shard_dtype[i]), "a reduced gradient shard");
    out_shards[i] = out;
    future->items.push_back(
        {out, shard_dtype[i], local_numel[i], full_numel[i], block});
    block += local_numel[i];
  }
  future->blockSize = block;

  bool sendDirect = n == 1 && grad_dtype[0] == DCRT_F32 &&
                    full_numel[0] == world * local_numel[0];
  bool recvDirect = n == 1 && shard_dtype[0] == DCRT_F32;
  const void *send = grads[0];
  if (!sendDirect) {
    // Rank r's block holds slot r of every gradient, padding zeroed.
    float *packed = static_cast<float *>(
        rt.staging.acquire(world * block * 4, "reduce-scatter staging"));
    for (int i = 0; i < n; ++i) {
      const auto &item = future->items[i];
      int64_t gradSize = dtypeSize(grad_dtype[i]);
      for (int64_t r = 0; r < world; ++r) {
        int64_t valid = validInSlot(item.fullNumel, item.localNumel, r);
        float *slot = packed + r * block + item.segment;
        convert(bytesAt(grads[i], r * item.localNumel * gradSize),
                grad_dtype[i], slot, DCRT_F32, valid);
        std::fill(slot + valid, slot + item.localNumel, 0.0f);
      }
    }
    future->sendStaging = packed;
    send = packed;
  }
  void *recv = future->items[0].out;
  if (!recvDirect) {
    future->recvStaging =
        rt.staging.acquire(block * 4, "reduce-scatter staging");
    recv = future->recvStaging;
  }

  CommOp &comm = future->comm;
  comm.kind = CommKind::ReduceScatter;
  comm.track = Track::ReduceScatter;
  comm.name = "reduce-scatter";
  comm.send = send;
  comm.recv = recv;
  comm.count = checkedCount(block, caller);
  comm.type = MPI_FLOAT;
  comm.op = MPI_SUM;
  comm.bytes = world * block * 4;
  rt.commEngine.submit(&comm);
  return future;
}

static void divideInPlace(float *values, int64_t numel, int worldSize) {
  float divisor = static_cast<float>(worldSize);
  for (int64_t i = 0; i < numel; ++i)
    values[i] /= divisor;
}

static void finishReduceScatter(Runtime &rt, dcrt_future_impl *future) {
  for (const auto &item : future->items) {
    float *reduced =
        future->recvStaging
            ? static_cast<float *>(future->recvStaging) + item.segment
            : static_cast<float *>(item.out);
    if (future->average)
      divideInPlace(reduced, item.localNumel, rt.worldSize);
    if (future->recvStaging)
      convert(reduced, DCRT_F32, item.out, item.dtype, item.localNumel);
  }
}

dcrt_future dcrt_all_reduce_start(int32_t op, const void *input, int64_t numel,
                                  int32_t dtype, void **out) {
  const char *caller = "dcrt_all_reduce_start";
  Runtime &rt = runtime(caller);
  checkReduceOp(op, caller);
  checkDType(dtype, caller, 0);
  if (op == DCRT_AVG && !isFloatDType(dtype))
    fatal("%s: the average of %s values is not defined; use DCRT_SUM", caller,
          dtypeName(dtype));
  if (numel < 0)
    fatal("%s: %lld elements", caller, static_cast<long long>(numel));

  dcrt_future_impl *future = rt.newFuture(Kind::AllReduce);
  future->average = op == DCRT_AVG;
  future->allReduceType = dtype;
  future->allReduceNumel = numel;
  future->allReduceOut =
      rt.stepBuffers.acquire(numel * dtypeSize(dtype), "an all-reduce result");
  *out = future->allReduceOut;

  CommOp &comm = future->comm;
  comm.kind = CommKind::AllReduce;
  comm.track = Track::AllReduce;
  comm.name = "all-reduce";
  comm.count = checkedCount(numel, caller);
  comm.op = MPI_SUM;
  switch (dtype) {
  case DCRT_BF16:
  case DCRT_F16: // reduced in f32, in place in a staging buffer
    future->recvStaging = rt.staging.acquire(numel * 4, "all-reduce staging");
    convert(input, dtype, future->recvStaging, DCRT_F32, numel);
    comm.send = comm.recv = future->recvStaging;
    comm.type = MPI_FLOAT;
    break;
  default:
    comm.send = input;
    comm.recv = future->allReduceOut;
    comm.type = dtype == DCRT_F32   ? MPI_FLOAT
                : dtype == DCRT_I32 ? MPI_INT32_T
                                    : MPI_INT64_T;
  }
  comm.bytes = numel * dtypeSize(dtype);
  rt.commEngine.submit(&comm);
  return future;
}

static void finishAllReduce(Runtime &rt, dcrt_future_impl *future) {
  float *reduced = static_cast<float *>(
      future->recvStaging ? future->recvStaging : future->allReduceOut);
  if (future->average)
    divideInPlace(reduced, future->allReduceNumel, rt.worldSize);
  if (future->recvStaging)
    convert(reduced, DCRT_F32, future->allReduceOut, future->allReduceType,
            future->allReduceNumel);
}

//===----------------------------------------------------------------------===//
// Offload and reload
//===----------------------------------------------------------------------===//

dcrt_future dcrt_offload_start(const void *device, int64_t bytes,
                               void **out_host) {
  Runtime &rt = runtime("dcrt_offload_start");
  if (bytes < 0 || (bytes > 0 && !device))
    fatal("dcrt_offload_start: bad source (%p, %lld bytes)", device,
          static_cast<long long>(bytes));
  void *host = rt.hostPool.allocate(bytes, "an offload");
  *out_host = host;
  dcrt_future_impl *future = rt.newFuture(Kind::Offload);
  CopyJob &job = future->copy;
  job.dst = host;
  job.src = device;
  job.bytes = bytes;
  job.name = "offload";
  job.releaseTo = nullptr;
  rt.toHost.submit(&job);
  return future;
}

/// Starts copying `bytes` from `host` into a new step buffer on the
/// host-to-device stream; `releaseTo` (if any) gets `host` back once copied.
static dcrt_future copyToStepBuffer(Runtime &rt, Kind kind, const char *name,
                                    const void *host, int64_t bytes,
                                    void **out_device, Arena *releaseTo) {
  void *device = rt.stepBuffers.acquire(
      bytes, kind == Kind::Reload ? "a reloaded tensor" : "an uploaded tensor");
  *out_device = device;
  dcrt_future_impl *future = rt.newFuture(kind);
  CopyJob &job = future->copy;
  job.dst = device;
  job.src = host;
  job.bytes = bytes;
  job.name = name;
  job.releaseTo = releaseTo;
  job.releasePointer = releaseTo ? const_cast<void *>(host) : nullptr;
  rt.copied.push_back({device, future});
  rt.toDevice.submit(&job);
  return future;
}

dcrt_future dcrt_reload_start(void *host, int64_t bytes, void **out_device) {
  Runtime &rt = runtime("dcrt_reload_start");
  if (!rt.hostPool.owns(host))
    fatal("dcrt_reload_start(%p): not a host copy from dcrt_offload_start "
          "(reloaded twice?)",
          host);
  if (bytes < 0 || bytes > rt.hostPool.allocationSize(host))
    fatal("dcrt_reload_start: %lld bytes from a host copy of %lld",
          static_cast<long long>(bytes),
          static_cast<long long>(rt.hostPool.allocationSize(host)));
  // The host copy goes back to the pool once copied.
  return copyToStepBuffer(rt, Kind::Reload, "reload", host, bytes, out_device,
                          &rt.hostPool);
}

dcrt_future dcrt_upload_start(const void *host, int64_t bytes,
                              void **out_device) {
  Runtime &rt = runtime("dcrt_upload_start");
  if (bytes < 0 || (bytes > 0 && !host))
    fatal("dcrt_upload_start: bad source (%p, %lld bytes)", host,
          static_cast<long long>(bytes));
  // A pool copy uploaded instead of reloaded would never return to the pool.
  if (rt.hostPool.owns(host))
    fatal("dcrt_upload_start(%p): a host copy from dcrt_offload_start, not a "
          "caller's buffer (dcrt_reload_start brings those back)",
          host);
  // The source is the caller's: nothing goes back to the host pool.
  return copyToStepBuffer(rt, Kind::Upload, "upload", host, bytes, out_device,
                          nullptr);
}

//===----------------------------------------------------------------------===//
// Waiting
//===----------------------------------------------------------------------===//

void dcrt_wait(dcrt_future future) {
  Runtime &rt = runtime("dcrt_wait");
  if (!future || !future->inUse)
    fatal("dcrt_wait(%p): not a future in flight (waited twice?)",
          static_cast<void *>(future));
  int64_t begin = nowNs();
  rt.awaitCompletion(future);
  switch (future->kind) {
  case Kind::Gather:
    finishGather(rt, future);
    break;
  case Kind::ReduceScatter:
    finishReduceScatter(rt, future);
    break;
  case Kind::AllReduce:
    finishAllReduce(rt, future);
    break;
  case Kind::Offload:
    break;
  case Kind::Reload:
  case Kind::Upload:
    for (CopiedTensor &tensor : rt.copied)
      if (tensor.pending == future)
        tensor.pending = nullptr;
    break;
  }
  if (future->sendStaging)
    rt.staging.release(future->sendStaging);
  if (future->recvStaging)
    rt.staging.release(future->recvStaging);
  rt.tracer.span(Track::Compute, waitSpanName(future->kind), begin, nowNs(),
                 "op", static_cast<int64_t>(future->sequence));
  future->inUse = false;
  rt.freeFutures.push_back(future);
  --rt.outstanding;
}

//===----------------------------------------------------------------------===//
// All-to-all and the end of a step
//===----------------------------------------------------------------------===//

void dcrt_all_to_all(const void *input, void *output, int32_t rank,
                     const int64_t *shape, int64_t split_dim,
                     int64_t concat_dim, int32_t dtype) {
  const char *caller = "dcrt_all_to_all";
  Runtime &rt = runtime(caller);
  checkDType(dtype, caller, 0);
  if (rank < 1 || split_dim < 0 || split_dim >= rank || concat_dim < 0 ||
      concat_dim >= rank)
    fatal("%s: split dim %lld / concat dim %lld out of range for rank %d",
          caller, static_cast<long long>(split_dim),
          static_cast<long long>(concat_dim), rank);
  int64_t world = rt.worldSize;
  if (shape[split_dim] % world != 0)
    fatal("%s: dim %lld (size %lld) does not split evenly over %lld ranks",
          caller, static_cast<long long>(split_dim),
          static_cast<long long>(shape[split_dim]),
          static_cast<long long>(world));

  // A piece has the input's shape with split_dim divided by the world size.
  std::vector<int64_t> piece(shape, shape + rank);
  piece[split_dim] /= world;
  auto product = [](const std::vector<int64_t> &dims, int64_t from,
                    int64_t to) {
    int64_t result = 1;
    for (int64_t d = from; d < to; ++d)
      result *= dims[d];
    return result;
  };
  std::vector<int64_t> full(shape, shape + rank);
  int64_t elementSize = dtypeSize(dtype);
  int64_t pieceNumel = product(piece, 0, rank);
  int64_t pieceBytes = pieceNumel * elementSize;

  // Pack: piece i is rows [i*chunk, (i+1)*chunk) of split_dim.
  char *send = static_cast<char *>(
      rt.staging.acquire(world * pieceBytes, "all-to-all staging"));
  char *recv = static_cast<char *>(
      rt.staging.acquire(world * pieceBytes, "all-to-all staging"));
  int64_t splitOuter = product(full, 0, split_dim);
  int64_t splitInner = product(full, split_dim + 1, rank) * elementSize;
  int64_t chunk = piece[split_dim];
  for (int64_t i = 0; i < world; ++i)
    for (int64_t o = 0; o < splitOuter; ++o)
      std::memcpy(
          send + i * pieceBytes + o * chunk * splitInner,
          bytesAt(input, (o * full[split_dim] + i * chunk) * splitInner),
          chunk * splitInner);

  CommOp op;
  op.kind = CommKind::AllToAll;
  op.track = Track::AllToAll;
  op.name = "all-to-all";
  op.send = send;
  op.recv = recv;
  op.type = rt.unitFor(pieceBytes, op.count, caller);
  op.bytes = world * pieceBytes;
  int64_t begin = nowNs();
  rt.runBlocking(op);
  rt.tracer.span(Track::Compute, "wait all-to-all", begin, nowNs(), nullptr, 0);

  // Unpack: the piece from rank j goes to block j of concat_dim.
  int64_t concatOuter = product(piece, 0, concat_dim);
  int64_t concatInner = product(piece, concat_dim + 1, rank) * elementSize;
  int64_t rows = piece[concat_dim];
  for (int64_t j = 0; j < world; ++j)
    for (int64_t o = 0; o < concatOuter; ++o)
      std::memcpy(bytesAt(output, (o * world * rows + j * rows) * concatInner),
                  recv + j * pieceBytes + o * rows * concatInner,
                  rows * concatInner);
  rt.staging.release(send);
  rt.staging.release(recv);
}

void dcrt_end_step(void) {
  Runtime &rt = runtime("dcrt_end_step");
  if (rt.outstanding > 0)
    fatal("dcrt_end_step with %d operations still in flight (every future "
          "must be waited before the step ends)",
          rt.outstanding);
  // Persistent gathers live until here.
  dcrt_clear_gathered();
  // Reloads and uploads not released yet end here, with the step buffers.
  rt.copied.clear();
  rt.stepBuffers.releaseAll();
  ++rt.endedSteps;
}
