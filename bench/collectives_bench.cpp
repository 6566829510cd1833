//===- collectives_bench.cpp - libdcrt's collectives against raw NCCL -----===//
//
// `mpirun -n 2 collectives-bench` on a GPU machine (cuda backend): for the
// parameter groups of configs A and B (../docs/performance.md), one fused
// gather per layer and one reduce-scatter bucket per layer through libdcrt,
// against a raw NCCL all-gather / reduce-scatter of the same bytes on a
// communicator of the bench's own; offload and reload through libdcrt
// against raw pinned cudaMemcpyAsync; the host-side cost of one small
// collective (start + wait + release). Prints one table; times are the
// median of the repetitions, each timed with CUDA events.
//
//===----------------------------------------------------------------------===//
#include "CudaCheck.h"
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
#define CHECK_NCCL(call)                                                       \
  do {                                                                         \
    ncclResult_t status_ = (call);                                             \
    if (status_ != ncclSuccess) {                                              \
      std::fprintf(stderr, "%s: %s\n", #call, ncclGetErrorString(status_));    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

constexpr int warmup = 3, repetitions = 10;

struct Config {
  const char *name;
  int64_t d, ffn, vocab, layers;
};
const Config configs[] = {{"A", 2048, 5632, 32000, 16},
                          {"B", 4096, 11008, 32000, 8}};

/// One layer's parameters, as the Llama generator shapes them.
std::vector<int64_t> layerTensors(const Config &c) {
  return {c.d, 3 * c.d * c.d, c.d * c.d, c.d, 2 * c.d * c.ffn, c.ffn * c.d};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Milliseconds of `body` on `stream`, median over repetitions.
template <typename Body> double timeOn(cudaStream_t stream, Body body) {
  cudaEvent_t begin, end;
  DCRT_CUDA_CHECK(cudaEventCreate(&begin));
  DCRT_CUDA_CHECK(cudaEventCreate(&end));
  std::vector<double> times;
  for (int i = 0; i < warmup + repetitions; ++i) {
    DCRT_CUDA_CHECK(cudaEventRecord(begin, stream));
    body();
    DCRT_CUDA_CHECK(cudaEventRecord(end, stream));
    DCRT_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    if (i >= warmup)
      times.push_back(ms);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return median(times);
}

int rank, world;

/// A device buffer for the raw small gathers' output.
void *rawSmall() {
  static void *buffer = nullptr;
  if (!buffer)
    DCRT_CUDA_CHECK(cudaMalloc(&buffer, 2048 * 2 * 64));
  return buffer;
}
void row(const std::string &what, double bytes, double dcMs, double rawMs,
         bool collective) {
  if (rank != 0)
    return;
  // Bus bandwidth (nccl-tests' convention) for collectives, plain for copies.
  double factor = collective ? double(world - 1) / world : 1.0;
  double dcBw = bytes * factor / (dcMs * 1e-3) / 1e9;
  double rawBw = bytes * factor / (rawMs * 1e-3) / 1e9;
  std::printf("| %-38s | %9.1f MB | %8.3f ms | %7.1f GB/s | %8.3f ms | %7.1f "
              "GB/s | %5.1f%% |\n",
              what.c_str(), bytes / 1e6, dcMs, dcBw, rawMs, rawBw,
              100.0 * rawMs / dcMs);
}
} // namespace

int main() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // The raw baseline's own communicator, made before libdcrt's thread owns
  // MPI.
  ncclUniqueId id;
  if (rank == 0)
    CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);

  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.backend = DCRT_BACKEND_CUDA;
  options.device = -1;
  options.gather_arena_bytes = int64_t(2) << 30;
  options.step_buffer_bytes = int64_t(2) << 30;
  options.staging_bytes = int64_t(4) << 30;
  options.host_pool_bytes = int64_t(1) << 30;
  dcrt_init(&options);
  ncclComm_t raw;
  CHECK_NCCL(ncclCommInitRank(&raw, world, id, rank));
  auto stream = static_cast<cudaStream_t>(dcrt_compute_stream());
  if (rank == 0)
    std::printf("| op (%d GPUs) | bytes | dcrt | dcrt bus bw | raw | raw bus "
                "bw | dcrt vs raw |\n|---|---|---|---|---|---|---|\n",
                world);

  for (const Config &config : configs) {
    std::vector<int64_t> tensors = layerTensors(config);
    int n = static_cast<int>(tensors.size());
    std::vector<int64_t> local(n);
    std::vector<int32_t> bf16(n, DCRT_BF16), f32(n, DCRT_F32);
    int64_t shardElements = 0, fullElements = 0;
    for (int i = 0; i < n; ++i) {
      local[i] = (tensors[i] + world - 1) / world;
      shardElements += local[i];
      fullElements += world * local[i];
    }
    dcrt::Buffer shards(shardElements * 2, dcrt::MemoryKind::Device, "shards");
    dcrt::Buffer grads(fullElements * 2, dcrt::MemoryKind::Device, "grads");
    std::vector<void *> shardPointers(n), gradPointers(n);
    for (int i = 0, offset = 0; i < n; offset += local[i], ++i) {
      shardPointers[i] = shards.as<char>() + 2 * offset;
      gradPointers[i] = grads.as<char>() + 2 * world * offset;
    }
    std::vector<void *> out(n);

    // One fused bf16 gather of a layer's parameters.
    double dcGather = timeOn(stream, [&] {
      dcrt_wait(dcrt_gather_start(0, n, shardPointers.data(), local.data(),
                                  tensors.data(), bf16.data(), bf16.data(),
                                  out.data()));
      for (void *full : out)
        dcrt_release(full);
    });
    dcrt::Buffer rawFull(fullElements * 2, dcrt::MemoryKind::Device, "raw");
    double rawGather = timeOn(stream, [&] {
      CHECK_NCCL(ncclAllGather(shards.data(), rawFull.data(), shardElements,
                               ncclBfloat16, raw, stream));
    });
    row(std::string(config.name) + ": gather one layer (bf16, " +
            std::to_string(n) + " tensors)",
        fullElements * 2.0, dcGather, rawGather, true);

    // One bucket of a layer's bf16 gradients into bf16 shards (dcrt reduces
    // in fp32: twice the bytes of a bf16 reduce-scatter).
    double dcReduce = timeOn(stream, [&] {
      dcrt_wait(dcrt_reduce_scatter_start(
          0, n, DCRT_AVG, gradPointers.data(), tensors.data(), bf16.data(),
          local.data(), bf16.data(), out.data()));
      dcrt_end_step();
    });
    double rawReduceBf16 = timeOn(stream, [&] {
      CHECK_NCCL(ncclReduceScatter(grads.data(), rawFull.data(), shardElements,
                                   ncclBfloat16, ncclAvg, raw, stream));
    });
    dcrt::Buffer grads32(fullElements * 4, dcrt::MemoryKind::Device, "f32");
    double rawReduceF32 = timeOn(stream, [&] {
      CHECK_NCCL(ncclReduceScatter(grads32.data(), grads32.data(),
                                   shardElements, ncclFloat32, ncclAvg, raw,
                                   stream));
    });
    row(std::string(config.name) + ": reduce-scatter a layer vs bf16 raw",
        fullElements * 2.0, dcReduce, rawReduceBf16, true);
    row(std::string(config.name) + ": reduce-scatter a layer vs fp32 raw",
        fullElements * 4.0, dcReduce, rawReduceF32, true);
    (void)f32;
  }

  // Offload and reload of 256 MiB against raw pinned copies.
  const int64_t bytes = int64_t(256) << 20;
  dcrt::Buffer activation(bytes, dcrt::MemoryKind::Device, "activation");
  dcrt::Buffer pinned(bytes, dcrt::MemoryKind::Host, "pinned");
  void *host = nullptr;
  double dcOffload = timeOn(stream, [&] {
    dcrt_wait(dcrt_offload_start(activation.data(), bytes, &host));
    dcrt_wait(dcrt_reload_into(host, bytes, activation.data()));
  });
  double rawCopies = timeOn(stream, [&] {
    DCRT_CUDA_CHECK(cudaMemcpyAsync(pinned.data(), activation.data(), bytes,
                                    cudaMemcpyDeviceToHost, stream));
    DCRT_CUDA_CHECK(cudaMemcpyAsync(activation.data(), pinned.data(), bytes,
                                    cudaMemcpyHostToDevice, stream));
  });
  row("offload + reload 256 MiB (pinned)", 2.0 * bytes, dcOffload, rawCopies,
      false);
  dcrt_end_step();

  // The cost of one small collective (4 KiB per rank): host time to
  // enqueue start + wait + release, and device time per op, 1000 in a row.
  {
    const int count = 1000;
    int64_t full = 2048 * world, smallLocal = 2048;
    int32_t type = DCRT_BF16;
    void *shard = activation.data(), *gathered = nullptr;
    double hostUs = 0;
    double deviceMs = timeOn(stream, [&] {
      auto begin = std::chrono::steady_clock::now();
      for (int i = 0; i < count; ++i) {
        dcrt_wait(dcrt_gather_start(0, 1, &shard, &smallLocal, &full, &type,
                                    &type, &gathered));
        dcrt_release(gathered);
      }
      hostUs = std::chrono::duration<double, std::micro>(
                   std::chrono::steady_clock::now() - begin)
                   .count() /
               count;
    });
    double rawMs = timeOn(stream, [&] {
      for (int i = 0; i < count; ++i)
        CHECK_NCCL(ncclAllGather(shard, rawSmall(), smallLocal, ncclBfloat16,
                                 raw, stream));
    });
    // The same 1000 gathers captured once as a step and replayed.
    struct Loop {
      void *shard;
      int64_t full, local;
      int32_t type;
      int count;
    } loop{shard, full, smallLocal, type, count};
    dcrt::StepGraph graph = dcrt::captureStep(
        [](void *context) {
          auto *l = static_cast<Loop *>(context);
          void *out = nullptr;
          for (int i = 0; i < l->count; ++i) {
            dcrt_wait(dcrt_gather_start(0, 1, &l->shard, &l->local, &l->full,
                                        &l->type, &l->type, &out));
            dcrt_release(out);
          }
        },
        &loop);
    double graphMs = timeOn(stream, [&] { dcrt::replay(graph); });
    // The raw NCCL calls captured the same way, on one stream: what NCCL
    // costs inside a graph, without dcrt's cross-stream events.
    cudaStream_t side = nullptr;
    DCRT_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaGraph_t rawGraph = nullptr;
    cudaGraphExec_t rawExec = nullptr;
    DCRT_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < count; ++i)
      CHECK_NCCL(ncclAllGather(shard, rawSmall(), smallLocal, ncclBfloat16, raw,
                               side));
    DCRT_CUDA_CHECK(cudaStreamEndCapture(side, &rawGraph));
    DCRT_CUDA_CHECK(cudaGraphInstantiate(&rawExec, rawGraph, 0));
    double rawGraphMs =
        timeOn(side, [&] { DCRT_CUDA_CHECK(cudaGraphLaunch(rawExec, side)); });
    cudaGraphExecDestroy(rawExec);
    cudaGraphDestroy(rawGraph);
    cudaStreamDestroy(side);
    if (rank == 0)
      std::printf("\nsmall gather (4 KiB per rank), 1000 in a row: host "
                  "enqueue %.2f us per op; device %.2f us per op; as one "
                  "captured step (CUDA graph) %.2f us per op; raw NCCL %.2f "
                  "us per op, raw NCCL captured in a graph %.2f us per op\n",
                  hostUs, deviceMs * 1e3 / count, graphMs * 1e3 / count,
                  rawMs * 1e3 / count, rawGraphMs * 1e3 / count);
  }
  dcrt_finalize();
  ncclCommDestroy(raw);
  MPI_Finalize();
  return 0;
}
