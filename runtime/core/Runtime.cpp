//===- Runtime.cpp - the C ABI and the C++ core API over one Backend ------===//
//
// Every dcrt_* call checks what any backend would reject (counts, dtypes,
// shard sizes, axes) and forwards to the backend dcrt_init chose. The
// host program's blocking collectives run on the Job, whatever the backend.
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"
#include "Attention.h"
#include "Backend.h"
#include "Internal.h"
#include "Job.h"
#include "Matmul.h"
#include "Moe.h"

#include "dcrt/core.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
struct State {
  std::unique_ptr<Job> job;
  std::unique_ptr<Backend> backend;
  int64_t endedSteps = 0;
  /// DCRT_INIT_CHECK_FINITE: without it dcrt_check_finite returns at once.
  bool checkFinite = false;
};
State *state = nullptr;

using Clock = std::chrono::steady_clock;
/// The job's common start; reset by dcrt_init right after a barrier.
Clock::time_point epoch = Clock::now();

std::map<std::string, BackendFactory> &factories() {
  static std::map<std::string, BackendFactory> registered;
  return registered;
}

void onOutOfMemory() {
  fatal("out of host memory (an allocation inside the runtime or dc-run "
        "failed)");
}

State &current(const char *caller) {
  if (!state)
    fatal("%s called before dcrt_init (or after dcrt_finalize)", caller);
  return *state;
}

Backend &backend(const char *caller) {
  Backend &b = *current(caller).backend;
  ++b.apiCalls;
  return b;
}
Job &job(const char *caller) { return *current(caller).job; }

/// `axis` as the job's group number (an axis, or DCRT_ALL_AXES: the whole
/// grid).
int32_t checkAxis(int32_t axis, const char *caller) {
  const Job &j = *state->job;
  int group = j.groupOf(axis);
  if (group < 0)
    fatal("%s: grid axis %d, but the grid has %zu axes", caller, axis,
          j.gridShape().size());
  return group;
}

/// The backend name `options` asks for: the field, else DCRT_BACKEND, else
/// host.
std::string chooseBackend(int32_t requested) {
  switch (requested) {
  case DCRT_BACKEND_HOST:
    return "host";
  case DCRT_BACKEND_CUDA:
    return "cuda";
  case DCRT_BACKEND_AUTO:
    break;
  default:
    fatal("dcrt_init: unknown backend %d", requested);
  }
  const char *fromEnvironment = std::getenv("DCRT_BACKEND");
  if (fromEnvironment && *fromEnvironment)
    return fromEnvironment;
  return "host";
}

/// Reads the caller's options, field by field up to its struct_size.
RuntimeConfig readOptions(const dcrt_init_options *options,
                          int32_t &expectedWorldSize) {
  dcrt_init_options full{};
  if (!options)
    fatal("dcrt_init: null options");
  if (options->struct_size < static_cast<int64_t>(sizeof(int64_t)))
    fatal("dcrt_init: options.struct_size is %lld (set it to "
          "sizeof(dcrt_init_options))",
          static_cast<long long>(options->struct_size));
  std::memcpy(&full, options,
              std::min<size_t>(sizeof(full),
                               static_cast<size_t>(options->struct_size)));
  RuntimeConfig config;
  config.backend = chooseBackend(full.backend);
  config.device = full.device;
  if (full.grid_rank < 0 || (full.grid_rank > 0 && !full.grid_shape))
    fatal("dcrt_init: a grid of rank %d without its shape", full.grid_rank);
  config.gridShape.assign(full.grid_shape, full.grid_shape + full.grid_rank);
  const std::pair<const char *, int64_t> sizes[] = {
      {"gather_arena_bytes", full.gather_arena_bytes},
      {"host_pool_bytes", full.host_pool_bytes},
      {"step_arena_bytes", full.step_arena_bytes},
      {"step_buffer_bytes", full.step_buffer_bytes},
      {"staging_bytes", full.staging_bytes}};
  for (const auto &[name, value] : sizes)
    if (value < 0)
      fatal("dcrt_init: negative planned size %s = %lld", name,
            static_cast<long long>(value));
  config.gatherArenaBytes = full.gather_arena_bytes;
  config.hostPoolBytes = full.host_pool_bytes;
  config.stepArenaBytes = full.step_arena_bytes;
  config.stepBufferBytes = full.step_buffer_bytes;
  config.stagingBytes = full.staging_bytes;
  if (full.flags & ~(DCRT_INIT_DETERMINISTIC | DCRT_INIT_CHECK_FINITE))
    fatal("dcrt_init: unknown flags 0x%x", static_cast<unsigned>(full.flags));
  config.deterministic = full.flags & DCRT_INIT_DETERMINISTIC;
  config.checkFinite = full.flags & DCRT_INIT_CHECK_FINITE;
  expectedWorldSize = full.expected_world_size;
  return config;
}
} // namespace

void dcrt::detail::registerBackend(const char *name, BackendFactory factory) {
  factories()[name] = std::move(factory);
}

void dcrt::detail::resetClock() { epoch = Clock::now(); }

int64_t dcrt::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                              epoch)
      .count();
}

//===----------------------------------------------------------------------===//
// Checks every backend shares
//===----------------------------------------------------------------------===//

int64_t dcrt::detail::validInSlot(int64_t fullNumel, int64_t localNumel,
                                  int64_t r) {
  return std::clamp<int64_t>(fullNumel - r * localNumel, 0, localNumel);
}

void dcrt::detail::checkDType(int32_t dtype, const char *caller, int index) {
  if (!isValidDType(dtype))
    fatal("%s: tensor %d has unknown dtype code %d", caller, index, dtype);
}

void dcrt::detail::checkShard(int64_t localNumel, int64_t fullNumel,
                              int32_t groupSize, const char *caller,
                              int index) {
  int64_t expected = (fullNumel + groupSize - 1) / groupSize;
  if (fullNumel < 0 || localNumel != expected)
    fatal("%s: tensor %d has %lld elements and a shard of %lld, but %d ranks "
          "need shards of ceil(%lld / %d) = %lld (was the artifact compiled "
          "for this world size?)",
          caller, index, static_cast<long long>(fullNumel),
          static_cast<long long>(localNumel), groupSize,
          static_cast<long long>(fullNumel), groupSize,
          static_cast<long long>(expected));
}

void dcrt::detail::checkReduceOp(int32_t op, const char *caller) {
  if (op != DCRT_SUM && op != DCRT_AVG)
    fatal("%s: unknown reduction %d (DCRT_SUM or DCRT_AVG)", caller, op);
}

AllToAllLayout::AllToAllLayout(const std::vector<int64_t> &shape,
                               int64_t splitDim, int64_t concatDim,
                               int64_t elementSize, int64_t world)
    : world(world) {
  auto product = [](const std::vector<int64_t> &dims, int64_t from,
                    int64_t to) {
    int64_t result = 1;
    for (int64_t d = from; d < to; ++d)
      result *= dims[d];
    return result;
  };
  // A piece has the input's shape with split_dim divided by the group size.
  std::vector<int64_t> piece = shape;
  piece[splitDim] /= world;
  int64_t rank = static_cast<int64_t>(shape.size());
  pieceBytes = product(piece, 0, rank) * elementSize;
  int64_t splitInner = product(shape, splitDim + 1, rank) * elementSize;
  splitOuter = product(shape, 0, splitDim);
  splitRowBytes = shape[splitDim] * splitInner;
  chunkBytes = piece[splitDim] * splitInner;
  concatOuter = product(piece, 0, concatDim);
  rowBytes = product(piece, concatDim, rank) * elementSize;
}

const char *dcrt_future_impl::what() const {
  switch (kind) {
  case Kind::Gather:
    return "all-gather";
  case Kind::ReduceScatter:
    return "reduce-scatter";
  case Kind::AllReduce:
    return "all-reduce";
  case Kind::AllToAll:
    return "all-to-all";
  case Kind::Offload:
    return "offload copy";
  case Kind::Reload:
    return "reload copy";
  case Kind::Upload:
    return "upload copy";
  }
  return "?";
}

const char *dcrt_future_impl::waitSpanName() const {
  switch (kind) {
  case Kind::Gather:
    return "wait all-gather";
  case Kind::ReduceScatter:
    return "wait reduce-scatter";
  case Kind::AllReduce:
    return "wait all-reduce";
  case Kind::AllToAll:
    return "wait all-to-all";
  case Kind::Offload:
    return "wait offload";
  case Kind::Reload:
    return "wait reload";
  case Kind::Upload:
    return "wait upload";
  }
  return "wait";
}

//===----------------------------------------------------------------------===//
// C ABI: joining and leaving the job
//===----------------------------------------------------------------------===//

int32_t dcrt_abi_version(void) { return DCRT_ABI_VERSION; }

void dcrt_init(const dcrt_init_options *options) {
  if (state)
    fatal("dcrt_init called twice");
  std::set_new_handler(onOutOfMemory);
  int32_t expectedWorldSize = 0;
  RuntimeConfig config = readOptions(options, expectedWorldSize);
  auto factory = factories().find(config.backend);
  if (factory == factories().end()) {
    std::string known;
    for (const auto &[name, unused] : factories())
      known += " " + name;
    fatal("backend '%s' is not in this libdcrt (it has:%s)%s",
          config.backend.c_str(), known.c_str(),
          config.backend == "cuda"
              ? "; it was built without CUDA (configure found no CUDA "
                "toolkit >= 12.4 with cuBLASLt and NCCL)"
              : "");
  }
  auto *fresh = new State;
  fresh->job = std::make_unique<Job>(expectedWorldSize, config.gridShape);
  fresh->checkFinite = config.checkFinite;
  state = fresh;
  state->backend = factory->second(*state->job, config);
}

void dcrt_finalize(void) {
  State &s = current("dcrt_finalize");
  if (s.backend->outstanding() > 0)
    fatal("dcrt_finalize with %d operations still in flight (every future "
          "must be waited)",
          s.backend->outstanding());
  s.backend.reset();
  s.job.reset();
  delete state;
  state = nullptr;
}

int32_t dcrt_rank(void) { return job("dcrt_rank").rank(); }

int32_t dcrt_world_size(void) { return job("dcrt_world_size").worldSize(); }

const char *dcrt_backend_name(void) {
  return backend("dcrt_backend_name").name();
}

//===----------------------------------------------------------------------===//
// C ABI: the artifact's calls
//===----------------------------------------------------------------------===//

dcrt_future dcrt_gather_start(int32_t axis, int32_t n, void *const *shards,
                              const int64_t *local_numel,
                              const int64_t *full_numel,
                              const int32_t *src_dtype,
                              const int32_t *dst_dtype, void **out_full) {
  const char *caller = "dcrt_gather_start";
  Backend &b = backend(caller);
  axis = checkAxis(axis, caller);
  if (n <= 0)
    fatal("%s: a group of %d shards", caller, n);
  auto groupSize = static_cast<int32_t>(state->job->axisSize(axis));
  for (int i = 0; i < n; ++i) {
    checkDType(src_dtype[i], caller, i);
    checkDType(dst_dtype[i], caller, i);
    if (isFloatDType(src_dtype[i]) != isFloatDType(dst_dtype[i]))
      fatal("%s: tensor %d cannot be cast from %s to %s", caller, i,
            dtypeName(src_dtype[i]), dtypeName(dst_dtype[i]));
    checkShard(local_numel[i], full_numel[i], groupSize, caller, i);
  }
  return b.gatherStart(axis, n, shards, local_numel, full_numel, src_dtype,
                       dst_dtype, out_full);
}

dcrt_future
dcrt_reduce_scatter_start(int32_t axis, int32_t n, int32_t op,
                          void *const *grads, const int64_t *full_numel,
                          const int32_t *grad_dtype, const int64_t *local_numel,
                          const int32_t *shard_dtype, void **out_shards) {
  const char *caller = "dcrt_reduce_scatter_start";
  Backend &b = backend(caller);
  axis = checkAxis(axis, caller);
  checkReduceOp(op, caller);
  if (n <= 0)
    fatal("%s: a bucket of %d gradients", caller, n);
  auto groupSize = static_cast<int32_t>(state->job->axisSize(axis));
  for (int i = 0; i < n; ++i) {
    checkDType(grad_dtype[i], caller, i);
    checkDType(shard_dtype[i], caller, i);
    // Gradients are reduced in f32, whatever they are stored in.
    if (!isFloatDType(grad_dtype[i]) || !isFloatDType(shard_dtype[i]))
      fatal("%s: gradient %d is %s -> %s; only float gradients are reduced",
            caller, i, dtypeName(grad_dtype[i]), dtypeName(shard_dtype[i]));
    checkShard(local_numel[i], full_numel[i], groupSize, caller, i);
  }
  return b.reduceScatterStart(axis, n, op, grads, full_numel, grad_dtype,
                              local_numel, shard_dtype, out_shards);
}

dcrt_future dcrt_all_reduce_start(int32_t axis, int32_t op, const void *input,
                                  int64_t numel, int32_t dtype, void **out) {
  const char *caller = "dcrt_all_reduce_start";
  Backend &b = backend(caller);
  axis = checkAxis(axis, caller);
  checkReduceOp(op, caller);
  checkDType(dtype, caller, 0);
  if (op == DCRT_AVG && !isFloatDType(dtype))
    fatal("%s: the average of %s values is not defined; use DCRT_SUM", caller,
          dtypeName(dtype));
  if (numel < 0)
    fatal("%s: %lld elements", caller, static_cast<long long>(numel));
  return b.allReduceStart(axis, op, input, numel, dtype, out);
}

dcrt_future dcrt_all_to_all_start(int32_t axis, const void *input, void *output,
                                  int32_t rank, const int64_t *shape,
                                  int64_t split_dim, int64_t concat_dim,
                                  int32_t dtype) {
  const char *caller = "dcrt_all_to_all_start";
  Backend &b = backend(caller);
  axis = checkAxis(axis, caller);
  checkDType(dtype, caller, 0);
  if (rank < 1 || split_dim < 0 || split_dim >= rank || concat_dim < 0 ||
      concat_dim >= rank)
    fatal("%s: split dim %lld / concat dim %lld out of range for rank %d",
          caller, static_cast<long long>(split_dim),
          static_cast<long long>(concat_dim), rank);
  int64_t group = state->job->axisSize(axis);
  if (shape[split_dim] % group != 0)
    fatal("%s: dim %lld (size %lld) does not split evenly over %lld ranks",
          caller, static_cast<long long>(split_dim),
          static_cast<long long>(shape[split_dim]),
          static_cast<long long>(group));
  return b.allToAllStart(
      axis, input, output,
      AllToAllLayout(std::vector<int64_t>(shape, shape + rank), split_dim,
                     concat_dim, dtypeSize(dtype), group));
}

dcrt_future dcrt_offload_start(const void *device, int64_t bytes,
                               void **out_host) {
  Backend &b = backend("dcrt_offload_start");
  if (bytes < 0 || (bytes > 0 && !device))
    fatal("dcrt_offload_start: bad source (%p, %lld bytes)", device,
          static_cast<long long>(bytes));
  return b.offloadStart(device, bytes, out_host);
}

dcrt_future dcrt_reload_into(void *host, int64_t bytes, void *device_dst) {
  Backend &b = backend("dcrt_reload_into");
  if (bytes > 0 && !device_dst)
    fatal("dcrt_reload_into: no destination for %lld bytes",
          static_cast<long long>(bytes));
  return b.reloadInto(host, bytes, device_dst);
}

dcrt_future dcrt_upload_into(const void *host, int64_t bytes,
                             void *device_dst) {
  Backend &b = backend("dcrt_upload_into");
  if (bytes < 0 || (bytes > 0 && !host))
    fatal("dcrt_upload_into: bad source (%p, %lld bytes)", host,
          static_cast<long long>(bytes));
  if (bytes > 0 && !device_dst)
    fatal("dcrt_upload_into: no destination for %lld bytes",
          static_cast<long long>(bytes));
  return b.uploadInto(host, bytes, device_dst);
}

dcrt_future dcrt_download_into(const void *device, int64_t bytes,
                               void *host_dst) {
  Backend &b = backend("dcrt_download_into");
  if (bytes < 0 || (bytes > 0 && (!device || !host_dst)))
    fatal("dcrt_download_into: bad copy (%p to %p, %lld bytes)", device,
          host_dst, static_cast<long long>(bytes));
  return b.downloadInto(device, bytes, host_dst);
}

void dcrt_wait(dcrt_future future) {
  Backend &b = backend("dcrt_wait");
  if (!future || !future->inUse)
    fatal("dcrt_wait(%p): not a future in flight (waited twice?)",
          static_cast<void *>(future));
  b.wait(future);
}

void dcrt_release(void *full) { backend("dcrt_release").release(full); }

void dcrt_invalidate_gathered(const void *shard) {
  backend("dcrt_invalidate_gathered").invalidateGathered(shard);
}

void dcrt_clear_gathered(void) {
  backend("dcrt_clear_gathered").clearGathered();
}

void *dcrt_compute_stream(void) {
  return backend("dcrt_compute_stream").computeStream();
}

void *dcrt_step_arena(void) { return backend("dcrt_step_arena").stepArena(); }

void dcrt_matmul(const dcrt_matmul_desc *desc, const void *a, const void *b,
                 void *c) {
  const char *caller = "dcrt_matmul";
  Backend &bk = backend(caller);
  checkMatmul(desc, a, b, c, caller);
  bk.matmul(*desc, a, b, c);
}

void dcrt_attention_fwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, void *o, float *lse) {
  const char *caller = "dcrt_attention_fwd";
  Backend &bk = backend(caller);
  dcrt_attention_desc d =
      checkAttentionDesc(desc, caller, AttentionDirection::Forward);
  const void *buffers[] = {q, k, v, o, lse};
  const char *names[] = {"q", "k", "v", "o", "lse"};
  checkAttentionBuffers(d, buffers, names, 5, caller);
  bk.attentionForward(d, q, k, v, o, lse);
}

void dcrt_attention_bwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, const void *o,
                        const float *lse, const void *dO, void *dq, void *dk,
                        void *dv) {
  const char *caller = "dcrt_attention_bwd";
  Backend &bk = backend(caller);
  dcrt_attention_desc d =
      checkAttentionDesc(desc, caller, AttentionDirection::Backward);
  const void *buffers[] = {q, k, v, o, lse, dO, dq, dk, dv};
  const char *names[] = {"q", "k", "v", "o", "lse", "dO", "dq", "dk", "dv"};
  checkAttentionBuffers(d, buffers, names, 9, caller);
  bk.attentionBackward(d, q, k, v, o, lse, dO, dq, dk, dv);
}

void dcrt_topk(const dcrt_topk_desc *desc, const void *scores, void *values,
               void *indices) {
  const char *caller = "dcrt_topk";
  Backend &bk = backend(caller);
  bk.topk(checkTopk(desc, scores, values, indices, caller), scores, values,
          indices);
}

void dcrt_group_by_expert(const dcrt_group_by_expert_desc *desc,
                          const void *ids, void *order, void *ends) {
  const char *caller = "dcrt_group_by_expert";
  Backend &bk = backend(caller);
  bk.groupByExpert(checkGroupByExpert(desc, ids, order, ends, caller), ids,
                   order, ends);
}

void dcrt_gather_rows(const dcrt_row_map_desc *desc, const void *source,
                      const void *index, void *result) {
  const char *caller = "dcrt_gather_rows";
  Backend &bk = backend(caller);
  bk.gatherRows(checkRowMap(desc, source, index, result, caller), source, index,
                result);
}

void dcrt_scatter_add_rows(const dcrt_row_map_desc *desc, const void *source,
                           const void *index, void *result) {
  const char *caller = "dcrt_scatter_add_rows";
  Backend &bk = backend(caller);
  bk.scatterAddRows(checkRowMap(desc, source, index, result, caller), source,
                    index, result);
}

void dcrt_grouped_matmul(const dcrt_grouped_matmul_desc *desc, const void *lhs,
                         const void *rhs, const void *ends, void *out) {
  const char *caller = "dcrt_grouped_matmul";
  Backend &bk = backend(caller);
  bk.groupedMatmul(checkGroupedMatmul(desc, GroupedProduct::Forward, lhs, rhs,
                                      ends, out, caller),
                   lhs, rhs, ends, out);
}

void dcrt_grouped_weight_grad(const dcrt_grouped_matmul_desc *desc,
                              const void *lhs, const void *rhs,
                              const void *ends, void *out) {
  const char *caller = "dcrt_grouped_weight_grad";
  Backend &bk = backend(caller);
  bk.groupedWeightGrad(checkGroupedMatmul(desc, GroupedProduct::WeightGrad, lhs,
                                          rhs, ends, out, caller),
                       lhs, rhs, ends, out);
}

void dcrt_grad_squares(const dcrt_adamw_desc *desc, const void *grad,
                       const double *squares_in, double *squares_out) {
  const char *caller = "dcrt_grad_squares";
  Backend &bk = backend(caller);
  AdamWSlot slot;
  dcrt_adamw_desc d = checkAdamW(desc, job(caller), slot, caller);
  if ((!grad && d.local_numel > 0) || !squares_in || !squares_out)
    fatal("%s: null buffer (%s)", caller, describeAdamW(d).c_str());
  bk.gradSquares(d, slot, grad, squares_in, squares_out);
}

void dcrt_grad_accumulate(const dcrt_adamw_desc *desc, const void *grad,
                          const float *sum_in, float *sum_out) {
  const char *caller = "dcrt_grad_accumulate";
  Backend &bk = backend(caller);
  AdamWSlot slot;
  dcrt_adamw_desc d = checkAdamW(desc, job(caller), slot, caller);
  if (d.local_numel > 0 && (!grad || !sum_in || !sum_out))
    fatal("%s: null buffer (%s)", caller, describeAdamW(d).c_str());
  bk.gradAccumulate(d, grad, sum_in, sum_out);
}

void dcrt_adamw(const dcrt_adamw_desc *desc, const void *param,
                const void *grad, const void *exp_avg, const void *exp_avg_sq,
                const void *master, const double *lr, const int64_t *step,
                const double *squares, void *param_out, void *exp_avg_out,
                void *exp_avg_sq_out, void *master_out) {
  const char *caller = "dcrt_adamw";
  Backend &bk = backend(caller);
  AdamWSlot slot;
  dcrt_adamw_desc d = checkAdamW(desc, job(caller), slot, caller);
  bool hasMaster = d.master_dtype == DCRT_F32;
  bool tensors =
      d.local_numel == 0 ||
      (param && grad && exp_avg && exp_avg_sq && param_out && exp_avg_out &&
       exp_avg_sq_out && (!hasMaster || (master && master_out)));
  if (!tensors || !lr || !step || !squares)
    fatal("%s: null buffer (%s)", caller, describeAdamW(d).c_str());
  bk.adamw(d, slot, param, grad, hasMaster ? master : nullptr, exp_avg,
           exp_avg_sq, lr, step, squares, param_out,
           hasMaster ? master_out : nullptr, exp_avg_out, exp_avg_sq_out);
}

namespace {

/// dcrt_launch_kernel and dcrt_launch_kernel_coresident: the arguments
/// checked, then the backend's launch.
void launchKernel(const char *caller, const void *binary, int64_t binary_bytes,
                  const char *kernel, const int64_t *dims, int32_t shared_bytes,
                  void **args, int64_t coresident_blocks) {
  Backend &b = backend(caller);
  const char *name = kernel ? kernel : "<null>";
  if (!kernel || !*kernel)
    fatal("%s: no kernel name", caller);
  if (!binary || binary_bytes <= 0)
    fatal("%s: kernel %s: no binary (%p, %lld bytes)", caller, name, binary,
          static_cast<long long>(binary_bytes));
  if (!dims)
    fatal("%s: kernel %s: no launch dimensions", caller, name);
  for (int i = 0; i < 6; ++i)
    if (dims[i] <= 0 || dims[i] > INT32_MAX)
      fatal("%s: kernel %s: %s %c is %lld (grid {%lld, %lld, %lld}, block "
            "{%lld, %lld, %lld})",
            caller, name, i < 3 ? "grid" : "block", "xyz"[i % 3],
            static_cast<long long>(dims[i]), static_cast<long long>(dims[0]),
            static_cast<long long>(dims[1]), static_cast<long long>(dims[2]),
            static_cast<long long>(dims[3]), static_cast<long long>(dims[4]),
            static_cast<long long>(dims[5]));
  if (shared_bytes < 0)
    fatal("%s: kernel %s: %d bytes of shared memory", caller, name,
          shared_bytes);
  // Each dimension is below 2^31: their product fits 128 bits.
  __int128 blocks = static_cast<__int128>(dims[0]) * dims[1] * dims[2];
  if (coresident_blocks > blocks)
    fatal("%s: kernel %s: %lld blocks must be resident at once, of a grid "
          "of %lld",
          caller, name, static_cast<long long>(coresident_blocks),
          static_cast<long long>(blocks));
  b.launchKernel(binary, binary_bytes, kernel, dims, shared_bytes, args,
                 coresident_blocks);
}

} // namespace

void dcrt_launch_kernel(const void *binary, int64_t binary_bytes,
                        const char *kernel, const int64_t *dims,
                        int32_t shared_bytes, void **args) {
  launchKernel("dcrt_launch_kernel", binary, binary_bytes, kernel, dims,
               shared_bytes, args, /*coresident_blocks=*/0);
}

void dcrt_launch_kernel_coresident(const void *binary, int64_t binary_bytes,
                                   const char *kernel, const int64_t *dims,
                                   int32_t shared_bytes, void **args,
                                   int64_t coresident_blocks) {
  if (coresident_blocks < 1)
    fatal("dcrt_launch_kernel_coresident: kernel %s: %lld blocks must be "
          "resident at once (at least 1)",
          kernel && *kernel ? kernel : "<null>",
          static_cast<long long>(coresident_blocks));
  launchKernel("dcrt_launch_kernel_coresident", binary, binary_bytes, kernel,
               dims, shared_bytes, args, coresident_blocks);
}

void dcrt_end_step(void) {
  Backend &b = backend("dcrt_end_step");
  if (b.outstanding() > 0)
    fatal("dcrt_end_step with %d operations still in flight (every future "
          "must be waited before the step ends)",
          b.outstanding());
  b.endStep();
  ++state->endedSteps;
}

void dcrt_check_finite(const void *data, int64_t numel, int32_t dtype,
                       int32_t flags, const char *site) {
  const char *caller = "dcrt_check_finite";
  // Compiled into the artifact for good: a run that did not ask for the
  // checks pays a load and a branch per op, and counts no call.
  if (!current(caller).checkFinite)
    return;
  Backend &b = backend(caller);
  if (!site)
    fatal("%s: no site (a null name for the op)", caller);
  if (dtype != DCRT_F32 && dtype != DCRT_BF16 && dtype != DCRT_F16)
    fatal("%s: %s: dtype %s (code %d) is not checked (f32, bf16 or f16)",
          caller, site, isValidDType(dtype) ? dtypeName(dtype) : "unknown",
          dtype);
  if (numel < 0 || (numel > 0 && !data))
    fatal("%s: %s: bad buffer (%p, %lld elements)", caller, site, data,
          static_cast<long long>(numel));
  if (flags & ~DCRT_FINITE_ALLOW_INF)
    fatal("%s: %s: unknown flags 0x%x", caller, site,
          static_cast<unsigned>(flags));
  b.checkFinite(data, numel, dtype, flags, site);
}

const char *dcrt_first_nonfinite(const char **what, int64_t *count) {
  const char *caller = "dcrt_first_nonfinite";
  const char *kind = nullptr;
  int64_t found = 0;
  const char *site = nullptr;
  // Without the checks nothing was recorded.
  if (current(caller).checkFinite)
    site = backend(caller).firstNonFinite(kind, found);
  if (what)
    *what = site ? kind : nullptr;
  if (count)
    *count = site ? found : 0;
  return site;
}

int64_t dcrt_op_begin(void) { return backend("dcrt_op_begin").opBegin(); }

void dcrt_op_end(const char *op_key, int64_t begin) {
  backend("dcrt_op_end").opEnd(op_key, begin);
}

//===----------------------------------------------------------------------===//
// C++ core API
//===----------------------------------------------------------------------===//

int64_t MemoryStats::peakBytes() const {
  return gatherArena.highWater + stepBuffers.highWater + staging.highWater +
         stepArena.highWater + matmulWorkspace.highWater +
         attentionWorkspace.highWater + moeWorkspace.highWater;
}

MemoryStats dcrt::memoryStats() {
  return backend("dcrt::memoryStats").memoryStats();
}

void dcrt::resetPeakMemory() {
  backend("dcrt::resetPeakMemory").resetPeakMemory();
}

void *dcrt::allocate(int64_t bytes, MemoryKind kind, const char *what) {
  if (bytes < 0)
    fatal("negative allocation (%lld bytes) for %s",
          static_cast<long long>(bytes), what);
  return backend("dcrt::allocate").allocate(bytes, kind, what);
}

void dcrt::deallocate(void *pointer) {
  // Buffers may outlive the runtime in a failing program's unwinding.
  if (state && pointer)
    state->backend->deallocate(pointer);
}

void dcrt::copy(void *dst, const void *src, int64_t bytes) {
  if (bytes < 0)
    fatal("dcrt::copy: %lld bytes", static_cast<long long>(bytes));
  if (bytes > 0)
    backend("dcrt::copy").copy(dst, src, bytes);
}

void dcrt::synchronize() { backend("dcrt::synchronize").synchronize(); }

void *dcrt::computeStream() {
  return backend("dcrt::computeStream").computeStream();
}

bool dcrt::deviceIsHost() {
  return backend("dcrt::deviceIsHost").deviceIsHost();
}

bool dcrt::canCaptureSteps() {
  return backend("dcrt::canCaptureSteps").canCaptureSteps();
}

StepGraph dcrt::captureStep(void (*step)(void *), void *context) {
  Backend &b = backend("dcrt::captureStep");
  if (!b.canCaptureSteps())
    fatal("the %s backend cannot capture steps", b.name());
  StepGraph graph;
  b.beginCapture();
  step(context);
  graph.handle = b.endCapture();
  return graph;
}

void dcrt::replay(const StepGraph &graph) {
  if (!graph)
    fatal("dcrt::replay of an empty step graph");
  backend("dcrt::replay").replay(graph.handle);
}

StepGraph::~StepGraph() {
  if (handle && state)
    state->backend->destroyGraph(handle);
}

bool dcrt::isComplete(dcrt_future future) {
  return backend("dcrt::isComplete").isComplete(future);
}

int64_t dcrt::endedSteps() { return current("dcrt::endedSteps").endedSteps; }

double dcrt::timeoutSeconds() {
  return job("dcrt::timeoutSeconds").timeoutSeconds();
}

void dcrt::allReduceSum(double *values, int count) {
  Job &j = job("dcrt::allReduceSum");
  CommOp op;
  op.kind = CommKind::AllReduce;
  op.name = "host all-reduce";
  op.send = op.recv = values;
  op.count = count;
  op.type = ElementType::F64;
  op.bytes = count * int64_t(sizeof(double));
  j.runBlocking(op);
}

void dcrt::broadcast(void *data, int64_t bytes, int root) {
  Job &j = job("dcrt::broadcast");
  CommOp op;
  op.kind = CommKind::Broadcast;
  op.name = "host broadcast";
  op.recv = data;
  op.count = bytes;
  op.root = root;
  op.bytes = bytes;
  j.runBlocking(op);
}

void dcrt::gatherToRoot(const void *local, int64_t bytes, void *out, int root) {
  Job &j = job("dcrt::gatherToRoot");
  CommOp op;
  op.kind = CommKind::Gather;
  op.name = "host gather";
  op.send = local;
  op.recv = out;
  op.count = bytes;
  op.root = root;
  op.bytes = bytes;
  j.runBlocking(op);
}

std::vector<std::string> dcrt::gatherStrings(const std::string &local,
                                             int root) {
  Job &j = job("dcrt::gatherStrings");
  if (local.size() > INT_MAX)
    fatal("dcrt::gatherStrings: %zu bytes is too large", local.size());
  int length = static_cast<int>(local.size());
  std::vector<int> lengths(j.worldSize()), offsets(j.worldSize());
  CommOp counts;
  counts.kind = CommKind::Gather;
  counts.name = "host gather";
  counts.send = &length;
  counts.recv = lengths.data();
  counts.count = 1;
  counts.type = ElementType::I32;
  counts.root = root;
  j.runBlocking(counts);

  int64_t total = 0;
  for (int r = 0; r < j.worldSize(); ++r) {
    if (total > INT_MAX)
      fatal("dcrt::gatherStrings: more than 2 GiB in total");
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  std::string all(j.rank() == root ? total : 0, '\0');
  CommOp text;
  text.kind = CommKind::Gatherv;
  text.name = "host gather";
  text.send = local.data();
  text.recv = all.data();
  text.count = length;
  text.type = ElementType::Byte;
  text.root = root;
  text.recvCounts = lengths.data();
  text.displacements = offsets.data();
  text.bytes = length;
  j.runBlocking(text);

  std::vector<std::string> result;
  if (j.rank() == root)
    for (int r = 0; r < j.worldSize(); ++r)
      result.push_back(all.substr(offsets[r], lengths[r]));
  return result;
}

void dcrt::barrier() {
  Job &j = job("dcrt::barrier");
  CommOp op;
  op.kind = CommKind::Barrier;
  op.name = "host barrier";
  j.runBlocking(op);
}

void dcrt::setTracing(bool enabled) {
  job("dcrt::setTracing").tracer.setEnabled(enabled);
}

void dcrt::traceSpan(Track track, const char *name, int64_t beginNs,
                     int64_t endNs, const char *argName, int64_t argValue) {
  job("dcrt::traceSpan")
      .tracer.span(track, name, beginNs, endNs, argName, argValue);
}

void dcrt::writeTrace(const std::string &path) {
  Job &j = job("dcrt::writeTrace");
  std::vector<std::string> ranks =
      gatherStrings(j.tracer.eventsJson(j.rank()), 0);
  if (j.rank() != 0)
    return;
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    fatal("cannot write the trace '%s'", path.c_str());
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", file);
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::fputs(ranks[r].c_str(), file);
    std::fputs(r + 1 < ranks.size() ? ",\n" : "\n", file);
  }
  std::fputs("]}\n", file);
  if (std::fclose(file) != 0)
    fatal("cannot write the trace '%s'", path.c_str());
}

std::vector<TransferStats> dcrt::transferStats() {
  return job("dcrt::transferStats").tracer.transferStats();
}

std::vector<OpTime> dcrt::opProfile() {
  return job("dcrt::opProfile").tracer.opProfile();
}

void dcrt::resetOpProfile() {
  job("dcrt::resetOpProfile").tracer.resetOpProfile();
}
