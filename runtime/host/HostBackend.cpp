//===- HostBackend.cpp - the host backend: CPU memory, host collectives ---===//
#include "HostBackend.h"
#include "Attention.h"
#include "Finite.h"
#include "Matmul.h"
#include "Moe.h"

#include "dcrt/core.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;
using Kind = dcrt_future_impl::Kind;

const std::atomic<bool> &HostFuture::doneFlag() const {
  return kind == Kind::Offload || kind == Kind::Reload || kind == Kind::Upload
             ? copy.done
             : comm.done;
}

static char *bytesAt(void *base, int64_t offset) {
  return static_cast<char *>(base) + offset;
}

static const char *bytesAt(const void *base, int64_t offset) {
  return static_cast<const char *>(base) + offset;
}

static std::unique_ptr<Backend> createHostBackend(Job &job,
                                                  const RuntimeConfig &config) {
  return std::make_unique<HostBackend>(job, config);
}

namespace {
/// Registers the host backend when libdcrt loads.
struct RegisterHost {
  RegisterHost() { registerBackend("host", createHostBackend); }
} registerHost;
} // namespace

HostBackend::HostBackend(Job &job, const RuntimeConfig &config)
    : job(job), gatherArena("gather arena", config.gatherArenaBytes),
      hostPool("host pool", config.hostPoolBytes),
      toHost(Track::CopyToHost, job.completion, job.tracer),
      toDevice(Track::CopyToDevice, job.completion, job.tracer) {
  if (config.stepArenaBytes > 0)
    stepArenaMemory = AlignedBuffer(config.stepArenaBytes, "the step arena");
  toHost.start();
  toDevice.start();
}

HostBackend::~HostBackend() {
  toHost.stop();
  toDevice.stop();
}

HostFuture *HostBackend::newFuture(Kind kind) {
  HostFuture *future;
  if (freeFutures.empty()) {
    futures.push_back(std::make_unique<HostFuture>());
    future = futures.back().get();
  } else {
    future = freeFutures.back();
    freeFutures.pop_back();
  }
  future->kind = kind;
  future->inUse = true;
  future->sequence = ++startedOps;
  future->items.clear();
  future->sendStaging = future->recvStaging = nullptr;
  future->blockSize = 0;
  future->groupSize = 1;
  future->average = false;
  future->allReduceOut = nullptr;
  future->allToAllOut = nullptr;
  ++outstanding_;
  return future;
}

void HostBackend::awaitCompletion(HostFuture *future) {
  if (!job.completion.waitFor(future->doneFlag(), job.timeoutSeconds()))
    fatal("timed out after %g s waiting for %s #%llu: a peer rank may have "
          "died, stalled or issued different collectives (DCRT_TIMEOUT_S "
          "sets the limit)",
          job.timeoutSeconds(), future->what(),
          static_cast<unsigned long long>(future->sequence));
}

bool HostBackend::isComplete(dcrt_future future) {
  return static_cast<HostFuture *>(future)->doneFlag().load(
      std::memory_order_acquire);
}

void HostBackend::opEnd(const char *key, int64_t begin) {
  job.tracer.op(key, begin, nowNs());
}

void HostBackend::attentionForward(const dcrt_attention_desc &desc,
                                   const void *q, const void *k, const void *v,
                                   void *o, float *lse) {
  hostAttentionForward(desc, q, k, v, o, lse);
}

void HostBackend::attentionBackward(const dcrt_attention_desc &desc,
                                    const void *q, const void *k, const void *v,
                                    const void *o, const float *lse,
                                    const void *dO, void *dq, void *dk,
                                    void *dv) {
  hostAttentionBackward(desc, q, k, v, o, lse, dO, dq, dk, dv);
}

void HostBackend::matmul(const dcrt_matmul_desc &desc, const void *a,
                         const void *b, void *c) {
  hostMatmul(desc, a, b, c);
}

void HostBackend::topk(const dcrt_topk_desc &desc, const void *scores,
                       void *values, void *indices) {
  hostTopk(desc, scores, values, indices);
}

void HostBackend::groupByExpert(const dcrt_group_by_expert_desc &desc,
                                const void *ids, void *order, void *ends) {
  hostGroupByExpert(desc, ids, order, ends);
}

void HostBackend::gatherRows(const dcrt_row_map_desc &desc, const void *source,
                             const void *index, void *result) {
  hostGatherRows(desc, source, index, result);
}

void HostBackend::scatterAddRows(const dcrt_row_map_desc &desc,
                                 const void *source, const void *index,
                                 void *result) {
  hostScatterAddRows(desc, source, index, result);
}

void HostBackend::groupedMatmul(const dcrt_grouped_matmul_desc &desc,
                                const void *lhs, const void *rhs,
                                const void *ends, void *out) {
  hostGroupedMatmul(desc, lhs, rhs, ends, out);
}

void HostBackend::groupedWeightGrad(const dcrt_grouped_matmul_desc &desc,
                                    const void *lhs, const void *rhs,
                                    const void *ends, void *out) {
  hostGroupedWeightGrad(desc, lhs, rhs, ends, out);
}

void HostBackend::gradSquares(const dcrt_adamw_desc &desc,
                              const AdamWSlot &slot, const void *grad,
                              const double *squaresIn, double *squaresOut) {
  hostGradSquares(desc, slot, grad, squaresIn, squaresOut);
}

void HostBackend::gradAccumulate(const dcrt_adamw_desc &desc, const void *grad,
                                 const float *sumIn, float *sumOut) {
  hostGradAccumulate(desc, grad, sumIn, sumOut);
}

void HostBackend::adamw(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                        const void *param, const void *grad, const void *master,
                        const void *expAvg, const void *expAvgSq,
                        const double *lr, const int64_t *step,
                        const double *squares, void *paramOut, void *masterOut,
                        void *expAvgOut, void *expAvgSqOut) {
  hostAdamW(desc, slot, param, grad, master, expAvg, expAvgSq, *lr, *step,
            *squares, paramOut, masterOut, expAvgOut, expAvgSqOut);
}

void HostBackend::launchKernel(const void *, int64_t, const char *kernel,
                               const int64_t *, int32_t, void **, int64_t) {
  fatal("artifact compiled for a GPU (dc-compile --target=h200): kernel %s "
        "cannot run on the host backend; run with DCRT_BACKEND=cuda",
        kernel);
}

void HostBackend::checkFinite(const void *data, int64_t numel, int32_t dtype,
                              int32_t flags, const char *site) {
  // Compute ran on this thread before the call: the calls' order is the
  // program's, and the first one that finds something is the one to report.
  if (nonFinite.site)
    return;
  FloatBits masks = floatBitsOf(dtype);
  NonFiniteCounts counts;
  if (dtype == DCRT_F32) {
    const auto *floats = static_cast<const float *>(data);
    for (int64_t i = 0; i < numel; ++i) {
      uint32_t bits;
      std::memcpy(&bits, floats + i, sizeof(bits));
      countBits(bits, masks, counts);
    }
  } else {
    const auto *halves = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < numel; ++i)
      countBits(halves[i], masks, counts);
  }
  if (flags & DCRT_FINITE_ALLOW_INF)
    counts.infinities = 0;
  if (counts.nans == 0 && counts.infinities == 0)
    return;
  nonFinite.site = site;
  nonFinite.what = counts.nans ? "NaN" : "infinity";
  nonFinite.count =
      static_cast<int64_t>(counts.nans ? counts.nans : counts.infinities);
}

const char *HostBackend::firstNonFinite(const char *&what, int64_t &count) {
  const char *site = nonFinite.site;
  if (site) {
    what = nonFinite.what;
    count = nonFinite.count;
  }
  nonFinite = {};
  return site;
}

void *HostBackend::allocate(int64_t bytes, MemoryKind kind, const char *what) {
  hostProgramBuffers.emplace_back(AlignedBuffer(bytes, what), kind);
  if (kind == MemoryKind::Device)
    hostProgramBytes += bytes;
  return hostProgramBuffers.back().first.data();
}

void HostBackend::deallocate(void *pointer) {
  auto found = std::find_if(
      hostProgramBuffers.begin(), hostProgramBuffers.end(),
      [&](const auto &buffer) { return buffer.first.data() == pointer; });
  if (found == hostProgramBuffers.end())
    fatal("dcrt::deallocate(%p): not a buffer from dcrt::allocate", pointer);
  if (found->second == MemoryKind::Device)
    hostProgramBytes -= found->first.size();
  hostProgramBuffers.erase(found);
}

void HostBackend::copy(void *dst, const void *src, int64_t bytes) {
  std::memmove(dst, src, bytes);
}

MemoryStats HostBackend::memoryStats() {
  MemoryStats stats{gatherArena.stats(),
                    hostPool.stats(),
                    stepBuffers.stats(),
                    staging.stats(),
                    {},
                    hostProgramBytes,
                    0,   // deviceUsedBytes
                    {},  // matmulWorkspace
                    {},  // attentionWorkspace
                    {}}; // moeWorkspace
  stats.stepArena.plan = stats.stepArena.reserved = stats.stepArena.highWater =
      stepArenaMemory.size();
  return stats;
}

void HostBackend::resetPeakMemory() {
  gatherArena.resetHighWater();
  hostPool.resetHighWater();
  stepBuffers.resetHighWater();
  staging.resetHighWater();
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

dcrt_future
HostBackend::gatherStart(int32_t axis, int32_t n, void *const *shards,
                         const int64_t *local_numel, const int64_t *full_numel,
                         const int32_t *src_dtype, const int32_t *dst_dtype,
                         void **out_full) {
  HostBackend &rt = *this;
  HostFuture *future = rt.newFuture(Kind::Gather);
  int64_t world = job.axisSize(axis);
  future->groupSize = world;
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
      const HostFuture::Item &item = future->items[i];
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
    HostFuture::Item &item = future->items[i];
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
  op.type = ElementType::Byte;
  op.count = block;
  op.group = job.axisGroup(axis);
  op.bytes = world * block;
  job.commEngine.submit(&op);
  return future;
}

void HostBackend::finishGather(HostFuture *future) {
  HostBackend &rt = *this;
  if (future->recvStaging) {
    for (const auto &item : future->items) {
      int64_t elementSize = dtypeSize(item.dtype);
      for (int64_t r = 0; r < future->groupSize; ++r)
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

void HostBackend::releaseGathered(std::vector<GatheredTensor>::iterator tensor,
                                  const char *caller) {
  HostBackend &rt = *this;
  if (tensor->pending)
    fatal("%s: the gathered tensor %p is released before its gather (#%llu) "
          "was waited",
          caller, tensor->full,
          static_cast<unsigned long long>(tensor->pending->sequence));
  rt.gatherArena.release(tensor->full, caller);
}

void HostBackend::release(void *full) {
  HostBackend &rt = *this;
  auto found = std::find_if(
      rt.gathered.rbegin(), rt.gathered.rend(),
      [&](const GatheredTensor &tensor) { return tensor.full == full; });
  if (found == rt.gathered.rend())
    fatal("dcrt_release(%p): not a gathered tensor in use (released twice, "
          "or not from dcrt_gather_start; a reload's or an upload's "
          "destination is the caller's)",
          full);
  auto tensor = std::next(found).base();
  releaseGathered(tensor, "dcrt_release");
  rt.gathered.erase(tensor);
}

void HostBackend::invalidateGathered(const void *shard) {
  HostBackend &rt = *this;
  for (auto tensor = rt.gathered.begin(); tensor != rt.gathered.end();) {
    if (tensor->shard != shard) {
      ++tensor;
      continue;
    }
    releaseGathered(tensor, "dcrt_invalidate_gathered");
    tensor = rt.gathered.erase(tensor);
  }
}

void HostBackend::clearGathered() {
  HostBackend &rt = *this;
  for (auto tensor = rt.gathered.begin(); tensor != rt.gathered.end(); ++tensor)
    releaseGathered(tensor, "dcrt_clear_gathered");
  rt.gathered.clear();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

dcrt_future HostBackend::reduceScatterStart(
    int32_t axis, int32_t n, int32_t op, void *const *grads,
    const int64_t *full_numel, const int32_t *grad_dtype,
    const int64_t *local_numel, const int32_t *shard_dtype, void **out_shards) {
  HostBackend &rt = *this;
  HostFuture *future = rt.newFuture(Kind::ReduceScatter);
  future->average = op == DCRT_AVG;
  int64_t world = job.axisSize(axis);
  future->groupSize = world;
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
  comm.count = block;
  comm.type = ElementType::F32;
  comm.op = ReduceOp::Sum;
  comm.group = job.axisGroup(axis);
  comm.bytes = world * block * 4;
  job.commEngine.submit(&comm);
  return future;
}

static void divideInPlace(float *values, int64_t numel, int worldSize) {
  float divisor = static_cast<float>(worldSize);
  for (int64_t i = 0; i < numel; ++i)
    values[i] /= divisor;
}

void HostBackend::finishReduceScatter(HostFuture *future) {
  for (const auto &item : future->items) {
    float *reduced =
        future->recvStaging
            ? static_cast<float *>(future->recvStaging) + item.segment
            : static_cast<float *>(item.out);
    if (future->average)
      divideInPlace(reduced, item.localNumel, future->groupSize);
    if (future->recvStaging)
      convert(reduced, DCRT_F32, item.out, item.dtype, item.localNumel);
  }
}

dcrt_future HostBackend::allReduceStart(int32_t axis, int32_t op,
                                        const void *input, int64_t numel,
                                        int32_t dtype, void **out) {
  HostBackend &rt = *this;
  HostFuture *future = rt.newFuture(Kind::AllReduce);
  future->groupSize = job.axisSize(axis);
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
  comm.count = numel;
  comm.op = ReduceOp::Sum;
  switch (dtype) {
  case DCRT_BF16:
  case DCRT_F16: // reduced in f32, in place in a staging buffer
    future->recvStaging = rt.staging.acquire(numel * 4, "all-reduce staging");
    convert(input, dtype, future->recvStaging, DCRT_F32, numel);
    comm.send = comm.recv = future->recvStaging;
    comm.type = ElementType::F32;
    break;
  default:
    comm.send = input;
    comm.recv = future->allReduceOut;
    comm.type = dtype == DCRT_F32   ? ElementType::F32
                : dtype == DCRT_F64 ? ElementType::F64
                : dtype == DCRT_I32 ? ElementType::I32
                                    : ElementType::I64;
  }
  comm.group = job.axisGroup(axis);
  comm.bytes = numel * dtypeSize(dtype);
  job.commEngine.submit(&comm);
  return future;
}

void HostBackend::finishAllReduce(HostFuture *future) {
  if (future->allReduceType == DCRT_F64) {
    auto *reduced = static_cast<double *>(future->allReduceOut);
    if (future->average)
      for (int64_t i = 0; i < future->allReduceNumel; ++i)
        reduced[i] /= static_cast<double>(future->groupSize);
    return;
  }
  float *reduced = static_cast<float *>(
      future->recvStaging ? future->recvStaging : future->allReduceOut);
  if (future->average)
    divideInPlace(reduced, future->allReduceNumel, future->groupSize);
  if (future->recvStaging)
    convert(reduced, DCRT_F32, future->allReduceOut, future->allReduceType,
            future->allReduceNumel);
}

//===----------------------------------------------------------------------===//
// Offload and reload
//===----------------------------------------------------------------------===//

/// Starts copying `bytes` from `device` into `host` on the device-to-host
/// stream. The compute that wrote `device` ran on this thread before.
dcrt_future HostBackend::copyToHost(const char *name, const void *device,
                                    int64_t bytes, void *host) {
  HostFuture *future = newFuture(Kind::Offload);
  CopyJob &job = future->copy;
  job.dst = host;
  job.src = device;
  job.bytes = bytes;
  job.name = name;
  job.releaseTo = nullptr;
  toHost.submit(&job);
  return future;
}

dcrt_future HostBackend::offloadStart(const void *device, int64_t bytes,
                                      void **out_host) {
  void *host = hostPool.allocate(bytes, "an offload");
  *out_host = host;
  return copyToHost("offload", device, bytes, host);
}

/// Starts copying `bytes` from `host` into the caller's `device` buffer on
/// the host-to-device stream; `releaseTo` (if any) gets `host` back once
/// copied. The compute that wrote `device` before ran on this thread, so
/// the copy comes after it.
dcrt_future HostBackend::copyToDevice(Kind kind, const char *name,
                                      const void *host, int64_t bytes,
                                      void *device, Arena *releaseTo) {
  HostBackend &rt = *this;
  HostFuture *future = rt.newFuture(kind);
  CopyJob &job = future->copy;
  job.dst = device;
  job.src = host;
  job.bytes = bytes;
  job.name = name;
  job.releaseTo = releaseTo;
  job.releasePointer = releaseTo ? const_cast<void *>(host) : nullptr;
  rt.toDevice.submit(&job);
  return future;
}

dcrt_future HostBackend::reloadInto(void *host, int64_t bytes, void *device) {
  HostBackend &rt = *this;
  if (!rt.hostPool.owns(host))
    fatal("dcrt_reload_into(%p): not a host copy from dcrt_offload_start "
          "(reloaded twice?)",
          host);
  if (bytes < 0 || bytes > rt.hostPool.allocationSize(host))
    fatal("dcrt_reload_into: %lld bytes from a host copy of %lld",
          static_cast<long long>(bytes),
          static_cast<long long>(rt.hostPool.allocationSize(host)));
  // The host copy goes back to the pool once copied.
  return copyToDevice(Kind::Reload, "reload", host, bytes, device,
                      &rt.hostPool);
}

dcrt_future HostBackend::uploadInto(const void *host, int64_t bytes,
                                    void *device) {
  HostBackend &rt = *this;
  // A pool copy uploaded instead of reloaded would never return to the pool.
  if (rt.hostPool.owns(host))
    fatal("dcrt_upload_into(%p): a host copy from dcrt_offload_start, not a "
          "caller's buffer (dcrt_reload_into brings those back)",
          host);
  // The source is the caller's: nothing goes back to the host pool.
  return copyToDevice(Kind::Upload, "upload", host, bytes, device, nullptr);
}

dcrt_future HostBackend::downloadInto(const void *device, int64_t bytes,
                                      void *host) {
  // A pool copy is the runtime's: the caller's buffers only.
  if (hostPool.owns(host))
    fatal("dcrt_download_into(%p): a host copy from dcrt_offload_start, not "
          "a caller's buffer",
          host);
  return copyToHost("download", device, bytes, host);
}

//===----------------------------------------------------------------------===//
// Waiting
//===----------------------------------------------------------------------===//

void HostBackend::wait(dcrt_future handle) {
  HostBackend &rt = *this;
  auto *future = static_cast<HostFuture *>(handle);
  int64_t begin = nowNs();
  rt.awaitCompletion(future);
  switch (future->kind) {
  case Kind::Gather:
    finishGather(future);
    break;
  case Kind::ReduceScatter:
    finishReduceScatter(future);
    break;
  case Kind::AllReduce:
    finishAllReduce(future);
    break;
  case Kind::AllToAll:
    finishAllToAll(future);
    break;
  case Kind::Offload:
  case Kind::Reload:
  case Kind::Upload:
    break;
  }
  if (future->sendStaging)
    rt.staging.release(future->sendStaging);
  if (future->recvStaging)
    rt.staging.release(future->recvStaging);
  job.tracer.span(Track::Compute, future->waitSpanName(), begin, nowNs(), "op",
                  static_cast<int64_t>(future->sequence));
  future->inUse = false;
  rt.freeFutures.push_back(future);
  --rt.outstanding_;
}

//===----------------------------------------------------------------------===//
// All-to-all and the end of a step
//===----------------------------------------------------------------------===//

dcrt_future HostBackend::allToAllStart(int32_t axis, const void *input,
                                       void *output,
                                       const AllToAllLayout &layout) {
  int64_t world = layout.world;
  HostFuture *future = newFuture(Kind::AllToAll);
  future->groupSize = world;
  future->allToAllOut = output;
  future->allToAll = layout;
  char *send = static_cast<char *>(
      staging.acquire(world * layout.pieceBytes, "all-to-all staging"));
  char *recv = static_cast<char *>(
      staging.acquire(world * layout.pieceBytes, "all-to-all staging"));
  future->sendStaging = send;
  future->recvStaging = recv;
  for (int64_t i = 0; i < world; ++i)
    for (int64_t o = 0; o < layout.splitOuter; ++o)
      std::memcpy(
          send + i * layout.pieceBytes + o * layout.chunkBytes,
          bytesAt(input, o * layout.splitRowBytes + i * layout.chunkBytes),
          layout.chunkBytes);

  CommOp &op = future->comm;
  op.kind = CommKind::AllToAll;
  op.track = Track::AllToAll;
  op.name = "all-to-all";
  op.send = send;
  op.recv = recv;
  op.type = ElementType::Byte;
  op.count = layout.pieceBytes;
  op.group = job.axisGroup(axis);
  op.bytes = world * layout.pieceBytes;
  job.commEngine.submit(&op);
  return future;
}

void HostBackend::finishAllToAll(HostFuture *future) {
  const AllToAllLayout &layout = *future->allToAll;
  const char *recv = static_cast<const char *>(future->recvStaging);
  for (int64_t j = 0; j < layout.world; ++j)
    for (int64_t o = 0; o < layout.concatOuter; ++o)
      std::memcpy(bytesAt(future->allToAllOut,
                          (o * layout.world + j) * layout.rowBytes),
                  recv + j * layout.pieceBytes + o * layout.rowBytes,
                  layout.rowBytes);
}

void HostBackend::endStep() {
  HostBackend &rt = *this;
  // Persistent gathers live until here.
  clearGathered();
  rt.stepBuffers.releaseAll();
}
