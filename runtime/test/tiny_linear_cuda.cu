//===- tiny_linear_cuda.cu - a hand-written GPU artifact for dc-run -------===//
//
// tiny_linear.c's classifier (logits = x W + b, mean cross-entropy; W [4, 3]
// and b [3] ZeRO-3 sharded; a global batch of 6 rows split over the ranks)
// with its compute in CUDA kernels on dcrt_compute_stream(), as dc-compile
// --target=h200 will emit it: the same runtime calls (one fused gather,
// offload of x during the gather, reload for the backward, one avg
// reduce-scatter bucket), temporaries at planned offsets of the step arena,
// no host synchronization. dc-run trains it on the cuda backend and must
// print the losses the host artifact prints.
//
//===----------------------------------------------------------------------===//
#include "CudaCheck.h"
#include "dcrt/dcrt.h"
#include "seal_manifest.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#ifndef TINY_WORLD
#error "define TINY_WORLD, the world size this artifact is compiled for"
#endif

namespace {
constexpr int In = 4, Classes = 3, GlobalBatch = 6;
constexpr int Batch = GlobalBatch / TINY_WORLD;
constexpr int WNumel = In * Classes, BNumel = Classes;
constexpr int WLocal = (WNumel + TINY_WORLD - 1) / TINY_WORLD;
constexpr int BLocal = (BNumel + TINY_WORLD - 1) / TINY_WORLD;
constexpr int XBytes = Batch * In * 4;

// The step arena's plan: probabilities, then the two full gradients, then
// the reloaded x (the reload's destination is a temporary like the others).
constexpr int ProbsOffset = 0;
constexpr int DwOffset = 256;
constexpr int DbOffset = 512;
constexpr int XBackOffset = 768;
constexpr int StepArenaBytes = 1024;
static_assert(XBytes <= StepArenaBytes - XBackOffset, "x fits its slot");

__global__ void forward(const float *x, const int32_t *labels, const float *w,
                        const float *b, float *probs, float *loss) {
  double total = 0;
  for (int r = 0; r < Batch; ++r) {
    float logits[Classes], max = -INFINITY, sum = 0;
    for (int c = 0; c < Classes; ++c) {
      logits[c] = b[c];
      for (int k = 0; k < In; ++k)
        logits[c] += x[r * In + k] * w[k * Classes + c];
      max = fmaxf(max, logits[c]);
    }
    for (int c = 0; c < Classes; ++c)
      sum += expf(logits[c] - max);
    for (int c = 0; c < Classes; ++c)
      probs[r * Classes + c] = expf(logits[c] - max) / sum;
    total += logf(sum) + max - logits[labels[r]];
  }
  *loss = static_cast<float>(total / Batch);
}

__global__ void backward(const float *x, const int32_t *labels,
                         const float *probs, float *dw, float *db) {
  for (int i = 0; i < WNumel; ++i)
    dw[i] = 0;
  for (int c = 0; c < BNumel; ++c)
    db[c] = 0;
  for (int r = 0; r < Batch; ++r)
    for (int c = 0; c < Classes; ++c) {
      float d =
          (probs[r * Classes + c] - (labels[r] == c ? 1.0f : 0.0f)) / Batch;
      db[c] += d;
      for (int k = 0; k < In; ++k)
        dw[k * Classes + c] += x[r * In + k] * d;
    }
}
} // namespace

extern "C" {

int32_t dc_artifact_abi_version(void) { return DCRT_ABI_VERSION; }

const char *dc_artifact_manifest(void) {
  static char manifest[2048];
  std::snprintf(
      manifest, sizeof(manifest),
      "{\"abi\": %d, \"target\": \"h200\", \"world_size\": %d,"
      " \"grid\": \"world\", \"grid_shape\": [%d], \"vocab\": %d,"
      " \"plan\": {\"gather_arena_bytes\": %d, \"host_pool_bytes\": %d,"
      " \"step_arena_bytes\": %d, \"step_buffer_bytes\": %d,"
      " \"staging_bytes\": %d},"
      " \"steps\": [{\"name\": \"train_step\","
      " \"entry\": \"dc_entry_train_step\", \"args\": ["
      "{\"kind\": \"param\", \"id\": 0, \"name\": \"fc.weight\","
      " \"shape\": [%d, %d], \"dtype\": \"f32\", \"local\": %d},"
      " {\"kind\": \"param\", \"id\": 1, \"name\": \"fc.bias\","
      " \"shape\": [%d], \"dtype\": \"f32\", \"local\": %d},"
      " {\"kind\": \"data\", \"name\": \"x\", \"shape\": [%d, %d],"
      " \"dtype\": \"f32\"},"
      " {\"kind\": \"data\", \"name\": \"labels\", \"shape\": [%d],"
      " \"dtype\": \"i32\"}],"
      " \"results\": [{\"kind\": \"loss\", \"shape\": [], \"dtype\": \"f32\"},"
      " {\"kind\": \"grad\", \"param\": 0, \"shape\": [%d, %d],"
      " \"dtype\": \"f32\", \"local\": %d},"
      " {\"kind\": \"grad\", \"param\": 1, \"shape\": [%d],"
      " \"dtype\": \"f32\", \"local\": %d}]}]}",
      DCRT_ABI_VERSION, TINY_WORLD, TINY_WORLD, Classes,
      // Both gathered tensors at once, each padded to world * local
      // elements; the reduced shards are step buffers.
      TINY_WORLD * (WLocal + BLocal) * 4, XBytes, StepArenaBytes, 4096, 4096,
      In, Classes, WLocal, Classes, BLocal, Batch, In, Batch, In, Classes,
      WLocal, Classes, BLocal);
  sealManifest(manifest, sizeof(manifest));
  return manifest;
}

/* buffers: W shard, b shard, x, labels, then loss, dW shard, db shard. */
void dc_entry_train_step(void **buffers) {
  auto stream = static_cast<cudaStream_t>(dcrt_compute_stream());
  char *arena = static_cast<char *>(dcrt_step_arena());
  if (!arena) {
    std::fprintf(stderr, "tiny_linear_cuda: no step arena\n");
    std::abort();
  }
  auto *probs = reinterpret_cast<float *>(arena + ProbsOffset);
  auto *dw = reinterpret_cast<float *>(arena + DwOffset);
  auto *db = reinterpret_cast<float *>(arena + DbOffset);
  const auto *labels = static_cast<const int32_t *>(buffers[3]);

  void *shards[2] = {buffers[0], buffers[1]};
  int64_t local[2] = {WLocal, BLocal}, full[2] = {WNumel, BNumel};
  int32_t f32[2] = {DCRT_F32, DCRT_F32};
  void *gathered[2];
  dcrt_future gather =
      dcrt_gather_start(0, 2, shards, local, full, f32, f32, gathered);
  void *xHost;
  dcrt_future offload = dcrt_offload_start(buffers[2], XBytes, &xHost);
  dcrt_wait(gather);

  int64_t t = dcrt_op_begin();
  forward<<<1, 1, 0, stream>>>(static_cast<const float *>(buffers[2]), labels,
                               static_cast<const float *>(gathered[0]),
                               static_cast<const float *>(gathered[1]), probs,
                               static_cast<float *>(buffers[4]));
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "launching forward");
  dcrt_op_end("train_step:0", t);
  dcrt_release(gathered[0]);
  dcrt_release(gathered[1]);

  dcrt_wait(offload);
  void *xBack = arena + XBackOffset;
  dcrt_wait(dcrt_reload_into(xHost, XBytes, xBack));
  t = dcrt_op_begin();
  backward<<<1, 1, 0, stream>>>(static_cast<const float *>(xBack), labels,
                                probs, dw, db);
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "launching backward");
  dcrt_op_end("train_step:1", t);

  void *grads[2] = {dw, db};
  void *reduced[2];
  dcrt_wait(dcrt_reduce_scatter_start(0, 2, DCRT_AVG, grads, full, f32, local,
                                      f32, reduced));
  DCRT_CUDA_CHECK_WHAT(cudaMemcpyAsync(buffers[5], reduced[0], WLocal * 4,
                                       cudaMemcpyDeviceToDevice, stream),
                       "copying dW");
  DCRT_CUDA_CHECK_WHAT(cudaMemcpyAsync(buffers[6], reduced[1], BLocal * 4,
                                       cudaMemcpyDeviceToDevice, stream),
                       "copying db");
  dcrt_end_step();
}

} // extern "C"
