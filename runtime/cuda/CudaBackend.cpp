//===- CudaBackend.cpp - the cuda backend: streams, events, NCCL ----------===//
#include "CudaBackend.h"

#include "CudaCheck.h"
#include "Internal.h"
#include "Kernels.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace dcrt;
using namespace dcrt::detail;
using Kind = dcrt_future_impl::Kind;

namespace {

void checkNccl(ncclResult_t status, const char *what, ncclComm_t comm) {
  if (status == ncclSuccess || status == ncclInProgress)
    return;
  const char *detail = comm ? ncclGetLastError(comm) : "";
  fatal("NCCL failed in %s: %s%s%s", what, ncclGetErrorString(status),
        detail && *detail ? ": " : "", detail ? detail : "");
}

ncclDataType_t ncclTypeOf(int32_t dtype) {
  switch (dtype) {
  case DCRT_BF16:
    return ncclBfloat16;
  case DCRT_F16:
    return ncclFloat16;
  case DCRT_I32:
    return ncclInt32;
  case DCRT_I64:
    return ncclInt64;
  case DCRT_F64:
    return ncclFloat64;
  default:
    return ncclFloat32;
  }
}

/// NCCL likes 256-byte aligned buffers; so do vector loads.
constexpr int64_t deviceAlignment = 256;

void *allocateDevice(int64_t bytes, const char *what) {
  void *pointer = nullptr;
  cudaError_t status = cudaMalloc(&pointer, static_cast<size_t>(bytes));
  if (status != cudaSuccess) {
    size_t freeBytes = 0, totalBytes = 0;
    cudaMemGetInfo(&freeBytes, &totalBytes);
    fatal("out of device memory: %lld bytes for %s (%zu of %zu bytes free): "
          "%s",
          static_cast<long long>(bytes), what, freeBytes, totalBytes,
          cuda::describeCudaError(status).c_str());
  }
  return pointer;
}

void freeDevice(void *pointer) { cudaFree(pointer); }

void *allocatePinned(int64_t bytes, const char *what) {
  void *pointer = nullptr;
  cudaError_t status = cudaHostAlloc(&pointer, static_cast<size_t>(bytes),
                                     cudaHostAllocPortable);
  if (status != cudaSuccess)
    fatal("out of pinned host memory: %lld bytes for %s: %s",
          static_cast<long long>(bytes), what,
          cuda::describeCudaError(status).c_str());
  return pointer;
}

void freePinned(void *pointer) { cudaFreeHost(pointer); }

const MemorySource deviceMemory{allocateDevice, freeDevice, deviceAlignment};
const MemorySource pinnedMemory{allocatePinned, freePinned, deviceAlignment};

/// The backend fatal() aborts the communicators of.
std::atomic<CudaBackend *> abortTarget{nullptr};

void abortOnFatal() {
  if (CudaBackend *backend = abortTarget.exchange(nullptr))
    backend->abortCommunicators();
}

/// The device of this rank: the launcher's local rank, else the rank.
int pickDevice(int requested, int rank) {
  int count = 0;
  DCRT_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count == 0)
    fatal("the cuda backend found no CUDA device");
  if (requested >= 0) {
    if (requested >= count)
      fatal("device %d asked for, but this machine has %d", requested, count);
    return requested;
  }
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK",
                           "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char *value = std::getenv(name))
      return std::atoi(value) % count;
  return rank % count;
}

std::unique_ptr<Backend> createCudaBackend(Job &job,
                                           const RuntimeConfig &config) {
  return std::make_unique<CudaBackend>(job, config);
}

struct RegisterCuda {
  RegisterCuda() { registerBackend("cuda", createCudaBackend); }
} registerCuda;

} // namespace

//===----------------------------------------------------------------------===//
// Setting up and tearing down
//===----------------------------------------------------------------------===//

CudaBackend::CudaBackend(Job &job, const RuntimeConfig &config) : job(job) {
  // NVLink multicast can take shared GPUs out of service; never turn it on
  // unless the user explicitly asked.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  device = pickDevice(config.device, job.rank());
  DCRT_CUDA_CHECK(cudaSetDevice(device));

  int leastPriority = 0, greatestPriority = 0;
  DCRT_CUDA_CHECK(
      cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
  auto makeStream = [](cudaStream_t &stream, int priority) {
    DCRT_CUDA_CHECK(
        cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority));
  };
  makeStream(compute, leastPriority);
  makeStream(gatherStream, greatestPriority);
  makeStream(reduceStream, greatestPriority);
  makeStream(toHost, leastPriority);
  makeStream(toDevice, leastPriority);

  // Two communicators per grid axis (gathers and reductions overlap), and
  // two for the whole grid where it has several axes (Job's groups), each
  // from a unique id broadcast over the group of the job's transport (MPI
  // or TCP).
  for (int axis = 0; axis < job.groupCount(); ++axis) {
    AxisComms axisComms;
    axisComms.size = static_cast<int>(job.axisSize(static_cast<int>(axis)));
    axisComms.rank = static_cast<int>(job.coordinate(static_cast<int>(axis)));
    for (ncclComm_t *comm : {&axisComms.gather, &axisComms.reduce}) {
      ncclUniqueId id;
      if (axisComms.rank == 0)
        checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
      CommOp broadcast;
      broadcast.kind = CommKind::Broadcast;
      broadcast.name = "NCCL id broadcast";
      broadcast.recv = &id;
      broadcast.count = sizeof(id);
      broadcast.type = ElementType::Byte;
      broadcast.root = 0;
      broadcast.group = job.axisGroup(static_cast<int>(axis));
      job.runBlocking(broadcast);
      checkNccl(ncclCommInitRank(comm, axisComms.size, id, axisComms.rank),
                "ncclCommInitRank", nullptr);
    }
    comms.push_back(axisComms);
  }
  abortTarget = this;
  setAbortHook(abortOnFatal);
  connectCommunicators();

  // Every planned pool once, now; nothing is allocated inside a step
  // unless a pool has no plan.
  gatherArena = std::make_unique<Arena>("gather arena", config.gatherArenaBytes,
                                        deviceMemory, true);
  stepBuffers = std::make_unique<Arena>("step buffers", config.stepBufferBytes,
                                        deviceMemory, true);
  gatherStaging = std::make_unique<Arena>("gather staging", config.stagingBytes,
                                          deviceMemory, true);
  reduceStaging = std::make_unique<Arena>("reduce staging", config.stagingBytes,
                                          deviceMemory, true);
  hostPool = std::make_unique<Arena>("host pool", config.hostPoolBytes,
                                     pinnedMemory, false);
  stepArenaBytes = config.stepArenaBytes;
  deterministic = config.deterministic;
  if (stepArenaBytes > 0)
    stepArenaBase = allocateDevice(stepArenaBytes, "the step arena");

  DCRT_CUDA_CHECK(
      cudaEventCreateWithFlags(&lastReload, cudaEventDisableTiming));
  DCRT_CUDA_CHECK(cudaEventRecord(lastReload, toDevice));
  DCRT_CUDA_CHECK(cudaEventCreate(&anchor));
  DCRT_CUDA_CHECK(cudaEventRecord(anchor, compute));
  DCRT_CUDA_CHECK(cudaEventSynchronize(anchor));
  anchorNs = nowNs();
  setUpCompute();
  if (config.checkFinite) {
    finiteRecord = static_cast<cuda::FiniteRecord *>(
        allocateDevice(sizeof(cuda::FiniteRecord), "the finite-value checks"));
    finiteRecordHost = static_cast<cuda::FiniteRecord *>(
        allocatePinned(sizeof(cuda::FiniteRecord), "the finite-value checks"));
    resetFiniteRecord();
  }
}

CudaBackend::~CudaBackend() {
  synchronize();
  tearDownCompute();
  abortTarget = nullptr;
  setAbortHook(nullptr);
  for (AxisComms &axisComms : comms) {
    ncclCommDestroy(axisComms.gather);
    ncclCommDestroy(axisComms.reduce);
  }
  gatherArena.reset();
  stepBuffers.reset();
  gatherStaging.reset();
  reduceStaging.reset();
  hostPool.reset();
  if (stepArenaBase)
    cudaFree(stepArenaBase);
  if (finiteRecord)
    cudaFree(finiteRecord);
  if (finiteRecordHost)
    cudaFreeHost(finiteRecordHost);
  for (const HostProgramBuffer &buffer : hostProgramBuffers)
    buffer.kind == MemoryKind::Host ? cudaFreeHost(buffer.pointer)
                                    : cudaFree(buffer.pointer);
  for (cudaEvent_t event : eventPool)
    cudaEventDestroy(event);
  cudaEventDestroy(lastReload);
  cudaEventDestroy(anchor);
  for (cudaStream_t stream :
       {compute, gatherStream, reduceStream, toHost, toDevice})
    cudaStreamDestroy(stream);
}

void CudaBackend::connectCommunicators() {
  // NCCL connects a communicator's peers at its first collective (about
  // 1.8 s on 2 x H200): pay it here, not in the first step.
  float *scratch =
      static_cast<float *>(allocateDevice(sizeof(float), "a warm-up"));
  for (AxisComms &axisComms : comms) {
    checkNccl(ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum,
                            axisComms.gather, gatherStream),
              "connecting the gather communicator", axisComms.gather);
    checkNccl(ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum,
                            axisComms.reduce, reduceStream),
              "connecting the reduce communicator", axisComms.reduce);
  }
  // Bounded like any wait: a peer that never joins is a fatal error.
  for (cudaStream_t stream : {gatherStream, reduceStream}) {
    cudaEvent_t connected = takeEvent();
    DCRT_CUDA_CHECK(cudaEventRecord(connected, stream));
    waitForEvent(connected, "connecting the NCCL communicators");
  }
  freeDevice(scratch);
}

void CudaBackend::abortCommunicators() {
  for (AxisComms &axisComms : comms) {
    if (axisComms.gather)
      ncclCommAbort(axisComms.gather);
    if (axisComms.reduce)
      ncclCommAbort(axisComms.reduce);
  }
}

//===----------------------------------------------------------------------===//
// Futures, events, waiting
//===----------------------------------------------------------------------===//

cudaEvent_t CudaBackend::takeEvent() {
  cudaEvent_t event;
  if (eventPool.empty()) {
    DCRT_CUDA_CHECK(cudaEventCreate(&event));
  } else {
    event = eventPool.back();
    eventPool.pop_back();
  }
  eventsInUse.push_back(event);
  return event;
}

void CudaBackend::followCompute(cudaStream_t stream) {
  cudaEvent_t mark = takeEvent();
  DCRT_CUDA_CHECK(cudaEventRecord(mark, compute));
  DCRT_CUDA_CHECK(cudaStreamWaitEvent(stream, mark, 0));
}

CudaFuture *CudaBackend::newFuture(Kind kind, cudaStream_t stream,
                                   Track track) {
  CudaFuture *future;
  if (freeFutures.empty()) {
    futures.push_back(std::make_unique<CudaFuture>());
    future = futures.back().get();
  } else {
    future = freeFutures.back();
    freeFutures.pop_back();
  }
  future->kind = kind;
  future->inUse = true;
  future->sequence = ++startedOps;
  future->stream = stream;
  future->track = track;
  future->bytes = 0;
  future->staging.clear();
  followCompute(stream);
  future->start = takeEvent();
  future->done = takeEvent();
  DCRT_CUDA_CHECK(cudaEventRecord(future->start, stream));
  ++outstanding_;
  return future;
}

void CudaBackend::finishStart(CudaFuture *future) {
  DCRT_CUDA_CHECK(cudaEventRecord(future->done, future->stream));
  if (!capturing)
    transfers.push_back({future->start, future->done, future->track,
                         future->what(), future->bytes});
}

void *CudaBackend::stage(CudaFuture *future, Arena &arena, int64_t bytes,
                         const char *what) {
  void *pointer = arena.allocate(bytes, what);
  future->staging.emplace_back(&arena, pointer);
  return pointer;
}

void CudaBackend::wait(dcrt_future handle) {
  auto *future = static_cast<CudaFuture *>(handle);
  DCRT_CUDA_CHECK(cudaStreamWaitEvent(compute, future->done, 0));
  // Later work on the future's stream is ordered after it: its staging
  // buffers can be handed out again.
  for (auto &[arena, pointer] : future->staging)
    arena->release(pointer, "returning staging");
  future->staging.clear();
  for (Gathered &tensor : gathered)
    if (tensor.pending == future)
      tensor.pending = nullptr;
  future->inUse = false;
  freeFutures.push_back(future);
  --outstanding_;
}

bool CudaBackend::isComplete(dcrt_future handle) {
  auto *future = static_cast<CudaFuture *>(handle);
  cudaError_t status = cudaEventQuery(future->done);
  if (status == cudaErrorNotReady)
    return false;
  DCRT_CUDA_CHECK_WHAT(status, "cudaEventQuery");
  return true;
}

void CudaBackend::waitForEvent(cudaEvent_t event, const char *what) {
  auto begin = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      DCRT_CUDA_CHECK_WHAT(status, what);
    for (AxisComms &axisComms : comms)
      for (ncclComm_t comm : {axisComms.gather, axisComms.reduce}) {
        ncclResult_t asyncError = ncclSuccess;
        ncclCommGetAsyncError(comm, &asyncError);
        if (asyncError != ncclSuccess && asyncError != ncclInProgress)
          checkNccl(asyncError, what, comm);
      }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    if (waited > job.timeoutSeconds())
      fatal("timed out after %g s in %s: a collective did not complete (a "
            "peer rank may have died, stalled or issued different "
            "collectives; DCRT_TIMEOUT_S sets the limit)",
            job.timeoutSeconds(), what);
    std::this_thread::sleep_for(pause);
    pause = std::min(std::chrono::microseconds(200),
                     pause * 2 + std::chrono::microseconds(1));
  }
}

void CudaBackend::synchronize() {
  cudaEvent_t end = takeEvent();
  DCRT_CUDA_CHECK(cudaEventRecord(end, compute));
  waitForEvent(end, "waiting for the step's work on the GPU");
  // Copies the artifact never waited for (none in a verified schedule) and
  // the host program's own work end here too.
  for (cudaStream_t stream : {gatherStream, reduceStream, toHost, toDevice})
    DCRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  resolveTimings();
}

void CudaBackend::resolveTimings() {
  auto toNs = [&](cudaEvent_t event) {
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor, event));
    return anchorNs + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  };
  for (const PendingTransfer &transfer : transfers)
    job.tracer.transfer(transfer.track, transfer.name, toNs(transfer.start),
                        toNs(transfer.done), transfer.bytes);
  for (const ProfiledOp &op : profiled)
    job.tracer.op(op.key, toNs(op.begin), toNs(op.end));
  transfers.clear();
  profiled.clear();
  // Every event of the step completed: reuse them; re-anchor the clock so
  // float milliseconds stay precise.
  eventPool.insert(eventPool.end(), eventsInUse.begin(), eventsInUse.end());
  eventsInUse.clear();
  DCRT_CUDA_CHECK(cudaEventRecord(anchor, compute));
  DCRT_CUDA_CHECK(cudaEventSynchronize(anchor));
  anchorNs = nowNs();
}

int64_t CudaBackend::opBegin() {
  if (capturing) // a replay has no timings to resolve
    return -1;
  cudaEvent_t event = takeEvent();
  DCRT_CUDA_CHECK(cudaEventRecord(event, compute));
  profiled.push_back({nullptr, event, nullptr, apiCalls});
  return static_cast<int64_t>(profiled.size() - 1);
}

void CudaBackend::opEnd(const char *key, int64_t begin) {
  if (capturing)
    return;
  if (begin < 0 || begin >= static_cast<int64_t>(profiled.size()) ||
      profiled[begin].key)
    fatal("dcrt_op_end(\"%s\", %lld): not a value dcrt_op_begin returned in "
          "this step",
          key, static_cast<long long>(begin));
  profiled[begin].key = key;
  // Only dcrt_op_end itself since dcrt_op_begin: the op enqueued nothing
  // (its work runs in a neighbour's kernel); it takes no time, not the
  // width of two events.
  if (apiCalls == profiled[begin].callsAtBegin + 1) {
    profiled[begin].end = profiled[begin].begin;
    return;
  }
  cudaEvent_t event = takeEvent();
  DCRT_CUDA_CHECK(cudaEventRecord(event, compute));
  profiled[begin].end = event;
}

//===----------------------------------------------------------------------===//
// Step capture (CUDA graphs)
//===----------------------------------------------------------------------===//

void CudaBackend::beginCapture() {
  if (capturing)
    fatal("dcrt::captureStep inside another capture");
  synchronize();
  // Relaxed: the runtime's host-side calls (event queries of unplanned
  // pools, NCCL's own) stay legal while the compute stream captures.
  DCRT_CUDA_CHECK(
      cudaStreamBeginCapture(compute, cudaStreamCaptureModeRelaxed));
  capturing = true;
  lastReloadCaptured = false;
}

void *CudaBackend::endCapture() {
  cudaGraph_t graph = nullptr;
  capturing = false;
  DCRT_CUDA_CHECK_WHAT(
      cudaStreamEndCapture(compute, &graph),
      "cudaStreamEndCapture (does every stream the step used join the "
      "compute stream again, through dcrt_wait?)");
  cudaGraphExec_t exec = nullptr;
  DCRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DCRT_CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void CudaBackend::replay(void *graph) {
  DCRT_CUDA_CHECK(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), compute));
}

void CudaBackend::destroyGraph(void *graph) {
  synchronize();
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

dcrt_future CudaBackend::gatherStart(int32_t axis, int32_t n,
                                     void *const *shards,
                                     const int64_t *localNumel,
                                     const int64_t *fullNumel,
                                     const int32_t *srcDtype,
                                     const int32_t *dstDtype, void **outFull) {
  AxisComms &group = comms[axis];
  CudaFuture *future = newFuture(Kind::Gather, gatherStream, Track::Gather);
  // Casts first (fp32 master shards to the compute dtype), then one NCCL
  // group: one launch for the whole fused group, each tensor gathered
  // straight into its padded full buffer (no unpacking).
  std::vector<const void *> sends(n);
  for (int i = 0; i < n; ++i) {
    sends[i] = shards[i];
    if (srcDtype[i] != dstDtype[i]) {
      void *converted =
          stage(future, *gatherStaging, localNumel[i] * dtypeSize(dstDtype[i]),
                "casting a shard before its gather");
      DCRT_CUDA_CHECK_WHAT(cuda::convert(shards[i], srcDtype[i], converted,
                                         dstDtype[i], localNumel[i],
                                         gatherStream),
                           "casting a shard before its gather");
      sends[i] = converted;
    }
  }
  checkNccl(ncclGroupStart(), "ncclGroupStart", nullptr);
  for (int i = 0; i < n; ++i) {
    int64_t bytes = group.size * localNumel[i] * dtypeSize(dstDtype[i]);
    void *full = gatherArena->allocate(bytes, "an all-gather");
    outFull[i] = full;
    gathered.push_back({full, shards[i], future});
    future->bytes += bytes;
    checkNccl(ncclAllGather(sends[i], full, static_cast<size_t>(localNumel[i]),
                            ncclTypeOf(dstDtype[i]), group.gather,
                            gatherStream),
              "ncclAllGather", group.gather);
  }
  checkNccl(ncclGroupEnd(), "ncclAllGather (group end)", group.gather);
  (void)fullNumel;
  finishStart(future);
  return future;
}

dcrt_future CudaBackend::reduceScatterStart(
    int32_t axis, int32_t n, int32_t op, void *const *grads,
    const int64_t *fullNumel, const int32_t *gradDtype,
    const int64_t *localNumel, const int32_t *shardDtype, void **outShards) {
  AxisComms &group = comms[axis];
  int64_t world = group.size;
  CudaFuture *future =
      newFuture(Kind::ReduceScatter, reduceStream, Track::ReduceScatter);
  std::vector<int64_t> segments(n);
  int64_t block = 0; // fp32 elements per rank
  for (int i = 0; i < n; ++i) {
    segments[i] = block;
    block += localNumel[i];
    outShards[i] = stepBuffers->allocate(
        localNumel[i] * dtypeSize(shardDtype[i]), "a reduced gradient shard");
    stepOutputs.push_back(outShards[i]);
  }
  // A bucket whose gradients already have their shards' dtype is reduced in
  // that dtype, one NCCL reduce-scatter per gradient in one group, straight
  // from the gradient into its shard (half the bytes of fp32 for bf16, no
  // packing); a gradient whose size the ranks do not divide is first
  // copied into a zero-padded staging buffer. Otherwise gradients are packed
  // into one fp32 bucket (rank r's block holds slot r of every gradient,
  // padding zeroed) and reduced in fp32, like the host backend does.
  bool inShardDtype = true;
  for (int i = 0; i < n; ++i)
    inShardDtype = inShardDtype && gradDtype[i] == shardDtype[i];
  ncclRedOp_t reduction = op == DCRT_AVG ? ncclAvg : ncclSum;
  if (inShardDtype) {
    std::vector<const void *> sends(n);
    for (int i = 0; i < n; ++i) {
      int64_t size = dtypeSize(gradDtype[i]);
      sends[i] = grads[i];
      if (fullNumel[i] == world * localNumel[i])
        continue;
      auto *padded = static_cast<char *>(stage(future, *reduceStaging,
                                               world * localNumel[i] * size,
                                               "padding a gradient"));
      DCRT_CUDA_CHECK_WHAT(
          cudaMemcpyAsync(padded, grads[i], fullNumel[i] * size,
                          cudaMemcpyDeviceToDevice, reduceStream),
          "padding a gradient");
      DCRT_CUDA_CHECK_WHAT(
          cudaMemsetAsync(padded + fullNumel[i] * size, 0,
                          (world * localNumel[i] - fullNumel[i]) * size,
                          reduceStream),
          "padding a gradient");
      sends[i] = padded;
    }
    checkNccl(ncclGroupStart(), "ncclGroupStart", nullptr);
    for (int i = 0; i < n; ++i) {
      future->bytes += world * localNumel[i] * dtypeSize(gradDtype[i]);
      checkNccl(ncclReduceScatter(sends[i], outShards[i],
                                  static_cast<size_t>(localNumel[i]),
                                  ncclTypeOf(gradDtype[i]), reduction,
                                  group.reduce, reduceStream),
                "ncclReduceScatter", group.reduce);
    }
    checkNccl(ncclGroupEnd(), "ncclReduceScatter (group end)", group.reduce);
    finishStart(future);
    return future;
  }
  bool sendDirect =
      n == 1 && gradDtype[0] == DCRT_F32 && fullNumel[0] == world * block;
  bool recvDirect = n == 1 && shardDtype[0] == DCRT_F32;
  const void *send = grads[0];
  if (!sendDirect) {
    auto *packed = static_cast<float *>(stage(
        future, *reduceStaging, world * block * 4, "reduce-scatter packing"));
    for (int i = 0; i < n; ++i)
      DCRT_CUDA_CHECK_WHAT(cuda::packSlots(grads[i], gradDtype[i], fullNumel[i],
                                           localNumel[i], world, block,
                                           segments[i], packed, reduceStream),
                           "packing a reduce-scatter bucket");
    send = packed;
  }
  void *recv = recvDirect ? outShards[0]
                          : stage(future, *reduceStaging, block * 4,
                                  "reduce-scatter result");
  checkNccl(ncclReduceScatter(send, recv, static_cast<size_t>(block),
                              ncclFloat32, reduction, group.reduce,
                              reduceStream),
            "ncclReduceScatter", group.reduce);
  if (!recvDirect)
    for (int i = 0; i < n; ++i)
      DCRT_CUDA_CHECK_WHAT(
          cuda::convert(static_cast<float *>(recv) + segments[i], DCRT_F32,
                        outShards[i], shardDtype[i], localNumel[i],
                        reduceStream),
          "unpacking a reduce-scatter bucket");
  future->bytes = world * block * 4;
  finishStart(future);
  return future;
}

dcrt_future CudaBackend::allReduceStart(int32_t axis, int32_t op,
                                        const void *input, int64_t numel,
                                        int32_t dtype, void **out) {
  AxisComms &group = comms[axis];
  CudaFuture *future =
      newFuture(Kind::AllReduce, reduceStream, Track::AllReduce);
  *out =
      stepBuffers->allocate(numel * dtypeSize(dtype), "an all-reduce result");
  stepOutputs.push_back(*out);
  ncclRedOp_t reduction = op == DCRT_AVG ? ncclAvg : ncclSum;
  if (dtype == DCRT_BF16 || dtype == DCRT_F16) {
    // Half types are reduced in fp32, like the host backend does.
    void *wide = stage(future, *reduceStaging, numel * 4, "all-reduce in fp32");
    DCRT_CUDA_CHECK_WHAT(
        cuda::convert(input, dtype, wide, DCRT_F32, numel, reduceStream),
        "widening an all-reduce");
    checkNccl(ncclAllReduce(wide, wide, static_cast<size_t>(numel), ncclFloat32,
                            reduction, group.reduce, reduceStream),
              "ncclAllReduce", group.reduce);
    DCRT_CUDA_CHECK_WHAT(
        cuda::convert(wide, DCRT_F32, *out, dtype, numel, reduceStream),
        "narrowing an all-reduce");
  } else {
    checkNccl(ncclAllReduce(input, *out, static_cast<size_t>(numel),
                            ncclTypeOf(dtype), reduction, group.reduce,
                            reduceStream),
              "ncclAllReduce", group.reduce);
  }
  future->bytes = numel * dtypeSize(dtype);
  finishStart(future);
  return future;
}

dcrt_future CudaBackend::allToAllStart(int32_t axis, const void *input,
                                       void *output,
                                       const AllToAllLayout &layout) {
  AxisComms &group = comms[axis];
  int64_t world = layout.world, pieceBytes = layout.pieceBytes;
  CudaFuture *future = newFuture(Kind::AllToAll, reduceStream, Track::AllToAll);
  auto *send = static_cast<char *>(
      stage(future, *reduceStaging, world * pieceBytes, "all-to-all staging"));
  auto *recv = static_cast<char *>(
      stage(future, *reduceStaging, world * pieceBytes, "all-to-all staging"));

  // Pack and unpack as strided copies (AllToAllLayout).
  for (int64_t i = 0; i < world && pieceBytes > 0; ++i)
    DCRT_CUDA_CHECK_WHAT(
        cudaMemcpy2DAsync(
            send + i * pieceBytes, layout.chunkBytes,
            static_cast<const char *>(input) + i * layout.chunkBytes,
            layout.splitRowBytes, layout.chunkBytes, layout.splitOuter,
            cudaMemcpyDeviceToDevice, reduceStream),
        "packing an all-to-all");
  checkNccl(ncclGroupStart(), "ncclGroupStart", nullptr);
  for (int peer = 0; peer < world; ++peer) {
    checkNccl(ncclSend(send + peer * pieceBytes, pieceBytes, ncclInt8, peer,
                       group.reduce, reduceStream),
              "ncclSend", group.reduce);
    checkNccl(ncclRecv(recv + peer * pieceBytes, pieceBytes, ncclInt8, peer,
                       group.reduce, reduceStream),
              "ncclRecv", group.reduce);
  }
  checkNccl(ncclGroupEnd(), "all-to-all (group end)", group.reduce);
  for (int64_t j = 0; j < world && pieceBytes > 0; ++j)
    DCRT_CUDA_CHECK_WHAT(
        cudaMemcpy2DAsync(static_cast<char *>(output) + j * layout.rowBytes,
                          world * layout.rowBytes, recv + j * pieceBytes,
                          layout.rowBytes, layout.rowBytes, layout.concatOuter,
                          cudaMemcpyDeviceToDevice, reduceStream),
        "unpacking an all-to-all");
  future->bytes = world * pieceBytes;
  finishStart(future);
  return future;
}

//===----------------------------------------------------------------------===//
// Offload, reload, upload
//===----------------------------------------------------------------------===//

dcrt_future CudaBackend::offloadStart(const void *device, int64_t bytes,
                                      void **outHost) {
  void *host = hostPool->allocate(bytes, "an offload");
  *outHost = host;
  CudaFuture *future = newFuture(Kind::Offload, toHost, Track::CopyToHost);
  // The pool buffer may have been a reload's source a moment ago. (In a
  // captured step, a reload of an earlier replay finished with it.)
  if (!capturing || lastReloadCaptured)
    DCRT_CUDA_CHECK(cudaStreamWaitEvent(toHost, lastReload, 0));
  DCRT_CUDA_CHECK_WHAT(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, toHost),
      "an offload copy");
  future->bytes = bytes;
  finishStart(future);
  return future;
}

// A reload's or an upload's destination is the caller's (a step-arena
// temporary): newFuture orders the copy after the compute enqueued before
// it, the last that may have used those bytes, and dcrt_wait the compute
// after it.
dcrt_future CudaBackend::reloadInto(void *host, int64_t bytes, void *device) {
  if (!hostPool->owns(host))
    fatal("dcrt_reload_into(%p): not a host copy from dcrt_offload_start "
          "(reloaded twice?)",
          host);
  if (bytes < 0 || bytes > hostPool->allocationSize(host))
    fatal("dcrt_reload_into: %lld bytes from a host copy of %lld",
          static_cast<long long>(bytes),
          static_cast<long long>(hostPool->allocationSize(host)));
  CudaFuture *future = newFuture(Kind::Reload, toDevice, Track::CopyToDevice);
  DCRT_CUDA_CHECK_WHAT(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, toDevice),
      "a reload copy");
  DCRT_CUDA_CHECK(cudaEventRecord(lastReload, toDevice));
  lastReloadCaptured = capturing;
  // Back to the pool now; an offload reusing it waits for lastReload.
  hostPool->release(host, "returning a reloaded host copy");
  future->bytes = bytes;
  finishStart(future);
  return future;
}

dcrt_future CudaBackend::uploadInto(const void *host, int64_t bytes,
                                    void *device) {
  if (hostPool->owns(host))
    fatal("dcrt_upload_into(%p): a host copy from dcrt_offload_start, not a "
          "caller's buffer (dcrt_reload_into brings those back)",
          host);
  CudaFuture *future = newFuture(Kind::Upload, toDevice, Track::CopyToDevice);
  DCRT_CUDA_CHECK_WHAT(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, toDevice),
      "an upload copy");
  future->bytes = bytes;
  finishStart(future);
  return future;
}

// The caller's host buffer (pinned) gets the device bytes; newFuture orders
// the copy after the compute that wrote them.
dcrt_future CudaBackend::downloadInto(const void *device, int64_t bytes,
                                      void *host) {
  if (hostPool->owns(host))
    fatal("dcrt_download_into(%p): a host copy from dcrt_offload_start, not "
          "a caller's buffer",
          host);
  CudaFuture *future = newFuture(Kind::Offload, toHost, Track::CopyToHost);
  DCRT_CUDA_CHECK_WHAT(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, toHost),
      "a download copy");
  future->bytes = bytes;
  finishStart(future);
  return future;
}

//===----------------------------------------------------------------------===//
// Releasing and the end of a step
//===----------------------------------------------------------------------===//

void CudaBackend::releaseGathered(std::vector<Gathered>::iterator tensor,
                                  const char *caller) {
  if (tensor->pending)
    fatal("%s: the gathered tensor %p is released before its gather (#%llu) "
          "was waited",
          caller, tensor->full,
          static_cast<unsigned long long>(tensor->pending->sequence));
  gatherArena->release(tensor->full, caller);
}

void CudaBackend::release(void *buffer) {
  auto found =
      std::find_if(gathered.rbegin(), gathered.rend(),
                   [&](const Gathered &t) { return t.full == buffer; });
  if (found == gathered.rend())
    fatal("dcrt_release(%p): not a gathered tensor in use (released twice, "
          "or not from dcrt_gather_start; a reload's or an upload's "
          "destination is the caller's)",
          buffer);
  auto tensor = std::next(found).base();
  releaseGathered(tensor, "dcrt_release");
  gathered.erase(tensor);
}

void CudaBackend::invalidateGathered(const void *shard) {
  for (auto tensor = gathered.begin(); tensor != gathered.end();) {
    if (tensor->shard != shard) {
      ++tensor;
      continue;
    }
    releaseGathered(tensor, "dcrt_invalidate_gathered");
    tensor = gathered.erase(tensor);
  }
}

void CudaBackend::clearGathered() {
  for (auto tensor = gathered.begin(); tensor != gathered.end(); ++tensor)
    releaseGathered(tensor, "dcrt_clear_gathered");
  gathered.clear();
}

void CudaBackend::endStep() {
  clearGathered(); // persistent gathers live until here
  for (void *output : stepOutputs)
    stepBuffers->release(output, "the end of the step");
  stepOutputs.clear();
  // The entry calls this last: its checks are numbered from 0 again in the
  // next call, as in the capture of a step that is replayed.
  finiteChecks = 0;
}

//===----------------------------------------------------------------------===//
// Finite-value checks
//===----------------------------------------------------------------------===//

void CudaBackend::checkFinite(const void *data, int64_t numel, int32_t dtype,
                              int32_t flags, const char *site) {
  // Numbered in program order: the kernel of the step's first check that
  // finds a non-finite value takes the record, the later ones see it taken
  // and return. A captured step's kernels keep the numbers and sites of
  // the capture, which every replay repeats (the same calls in the same
  // order); the site is written by the kernel, not looked up here, so the
  // two forms of a micro-batched step, each captured on its own, report
  // their own ops.
  if (finiteChecks == cuda::FiniteRecord::noneFound)
    fatal("dcrt_check_finite: %u checks in one step (does the entry call "
          "dcrt_end_step?)",
          finiteChecks);
  unsigned sequence = finiteChecks++;
  DCRT_CUDA_CHECK_WHAT(cuda::checkFinite(data, dtype, numel,
                                         flags & DCRT_FINITE_ALLOW_INF,
                                         sequence, site, finiteRecord, compute),
                       "dcrt_check_finite (launching the check)");
}

const char *CudaBackend::firstNonFinite(const char *&what, int64_t &count) {
  if (capturing)
    fatal("dcrt_first_nonfinite inside a step capture: call it after the "
          "step");
  DCRT_CUDA_CHECK_WHAT(cudaMemcpyAsync(finiteRecordHost, finiteRecord,
                                       sizeof(cuda::FiniteRecord),
                                       cudaMemcpyDeviceToHost, compute),
                       "reading the finite-value checks' record");
  // Bounded like every wait: a collective that never ends is a fatal error
  // after the timeout, not a hang here.
  synchronize();
  cuda::FiniteRecord found = *finiteRecordHost;
  resetFiniteRecord();
  finiteChecks = 0;
  if (found.first == cuda::FiniteRecord::noneFound)
    return nullptr;
  what = found.nans ? "NaN" : "infinity";
  count = static_cast<int64_t>(found.nans ? found.nans : found.infinities);
  return found.site;
}

void CudaBackend::resetFiniteRecord() {
  // On the compute stream, after the reads of the step just checked and
  // before the next step's checks.
  DCRT_CUDA_CHECK_WHAT(
      cudaMemsetAsync(finiteRecord, 0, sizeof(cuda::FiniteRecord), compute),
      "resetting the finite-value checks' record");
  DCRT_CUDA_CHECK_WHAT(cudaMemsetAsync(&finiteRecord->first, 0xff,
                                       sizeof(finiteRecord->first), compute),
                       "resetting the finite-value checks' record");
}

//===----------------------------------------------------------------------===//
// The host program's memory
//===----------------------------------------------------------------------===//

void *CudaBackend::allocate(int64_t bytes, MemoryKind kind, const char *what) {
  int64_t size = std::max<int64_t>(bytes, 1);
  void *pointer = kind == MemoryKind::Host ? allocatePinned(size, what)
                                           : allocateDevice(size, what);
  if (kind == MemoryKind::Host)
    std::memset(pointer, 0, size);
  else
    // On the compute stream: cudaMemset would run on the legacy default
    // stream, which the (non-blocking) compute stream does not wait for,
    // so a copy or kernel enqueued next could run before the zeroing.
    DCRT_CUDA_CHECK_WHAT(cudaMemsetAsync(pointer, 0, size, compute),
                         "zeroing a new buffer");
  hostProgramBuffers.push_back({pointer, bytes, kind});
  if (kind == MemoryKind::Device)
    hostProgramDeviceBytes += bytes;
  return pointer;
}

void CudaBackend::deallocate(void *pointer) {
  auto found =
      std::find_if(hostProgramBuffers.begin(), hostProgramBuffers.end(),
                   [&](const HostProgramBuffer &buffer) {
                     return buffer.pointer == pointer;
                   });
  if (found == hostProgramBuffers.end())
    fatal("dcrt::deallocate(%p): not a buffer from dcrt::allocate", pointer);
  synchronize(); // nothing enqueued may still use it
  if (found->kind == MemoryKind::Host) {
    cudaFreeHost(pointer);
  } else {
    cudaFree(pointer);
    hostProgramDeviceBytes -= found->bytes;
  }
  hostProgramBuffers.erase(found);
}

void CudaBackend::copy(void *dst, const void *src, int64_t bytes) {
  DCRT_CUDA_CHECK_WHAT(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute),
      "dcrt::copy");
  synchronize();
}

MemoryStats CudaBackend::memoryStats() {
  MemoryStats stats{gatherArena->stats(),
                    hostPool->stats(),
                    stepBuffers->stats(),
                    gatherStaging->stats(),
                    {},
                    hostProgramDeviceBytes,
                    0,   // deviceUsedBytes
                    {},  // matmulWorkspace
                    {},  // attentionWorkspace
                    {}}; // moeWorkspace
  PoolStats reduce = reduceStaging->stats();
  stats.staging.plan += reduce.plan;
  stats.staging.live += reduce.live;
  stats.staging.highWater += reduce.highWater;
  stats.staging.reserved += reduce.reserved;
  stats.staging.systemAllocations += reduce.systemAllocations;
  stats.stepArena.plan = stats.stepArena.reserved = stats.stepArena.highWater =
      stepArenaBytes;
  if (matmulWorkspace) {
    PoolStats &workspace = stats.matmulWorkspace;
    workspace.plan = workspace.live = workspace.highWater = workspace.reserved =
        matmulWorkspaceBytes;
    workspace.systemAllocations = 1;
  }
  PoolStats &attention = stats.attentionWorkspace;
  attention.live = attention.highWater = attention.reserved =
      attentionWorkspaceBytes;
  attention.systemAllocations = static_cast<int64_t>(attentionPlans.size());
  stats.moeWorkspace = moeStats();
  size_t freeBytes = 0, totalBytes = 0;
  DCRT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  stats.deviceUsedBytes = static_cast<int64_t>(totalBytes - freeBytes);
  return stats;
}

void CudaBackend::resetPeakMemory() {
  gatherArena->resetHighWater();
  hostPool->resetHighWater();
  stepBuffers->resetHighWater();
  gatherStaging->resetHighWater();
  reduceStaging->resetHighWater();
}
