/*===- dcrt.h - the dc runtime's C ABI (libdcrt)
 * ----------------------------===*
 *
 * The one contract between code dc compiles (the "artifact", a shared
 * library) and the runtime that runs it (libdcrt, host or CUDA backend).
 * Bump DCRT_ABI_VERSION on any change to this file that an existing artifact
 * would notice: an artifact records the version it was compiled against and
 * dc-run refuses a mismatch. Pure additions that older artifacts never call
 * keep the version (they are marked "addition" below).
 *
 * Conventions:
 *  - One process per rank; the runtime state is per process (dcrt_init).
 *  - Buffers are raw pointers to dense row-major storage in the backend's
 *    device memory (host memory on the host backend). Element counts are
 *    `int64_t`; element types are dcrt_dtype codes.
 *  - Every *_start returns a future handle; the artifact waits each future
 *    exactly once with dcrt_wait (dc-verify-schedule proves it). On a device
 *    backend a start and its wait only enqueue work: the compute stream
 *    waits for the operation, the host does not.
 *  - A start is ordered after every compute the artifact enqueued before it
 *    (its inputs may be written right before the start); its outputs may be
 *    used by compute enqueued after its dcrt_wait.
 *  - Buffers the runtime hands out (gathered parameters, reduced gradient
 *    shards, host copies) stay valid until dcrt_release (gathers), until
 *    the step ends (reductions) or until the reload of a host copy
 *    completes (offloads). Reloads and uploads write into a device buffer
 *    of the caller's (the artifact's step arena), which the runtime does
 *    not own.
 *  - Every collective names its process group: `axis`, an axis of the
 *    artifact's grid (0 for the one axis of a 1-D grid), or DCRT_ALL_AXES.
 *    The runtime holds one communicator per axis, and one for the whole
 *    grid where it has several axes.
 *  - Errors never return: the runtime prints what failed and where (rank,
 *    op, reason) and aborts every rank (bounded time, no hang).
 *
 *===----------------------------------------------------------------------===*/
#ifndef DCRT_DCRT_H
#define DCRT_DCRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 3: dcrt_init takes an options struct; collectives name a grid
 * axis; all-to-all is an async start/wait pair; dcrt_compute_stream and
 * dcrt_step_arena.
 * Version 4: reloads and uploads copy into the caller's device buffer (a
 * step-arena temporary): dcrt_reload_into and dcrt_upload_into replace
 * dcrt_reload_start and dcrt_upload_start; step_buffer_bytes no longer
 * counts them and dcrt_release takes only gathered tensors. */
#define DCRT_ABI_VERSION 4

typedef enum dcrt_dtype {
  DCRT_F32 = 0,
  DCRT_BF16 = 1,
  DCRT_F16 = 2,
  DCRT_I32 = 3,
  DCRT_I64 = 4,
  /* Scalars only (addition): the optimizer's squared gradient norm and
   * learning rate, which the host trainer keeps in double. No tensor kernel
   * takes it; all-reduces do. */
  DCRT_F64 = 5,
} dcrt_dtype;

/* The `axis` of a collective over every axis of the grid at once (the
 * world): for a tensor sharded over all axes of a grid of several (ZeRO
 * over data x sequence). On a 1-D grid it is axis 0. */
#define DCRT_ALL_AXES (-1)

typedef enum dcrt_reduce {
  DCRT_SUM = 0,
  DCRT_AVG = 1,
} dcrt_reduce;

typedef enum dcrt_backend {
  /* DCRT_BACKEND from the environment ("host" or "cuda"), else host. */
  DCRT_BACKEND_AUTO = 0,
  DCRT_BACKEND_HOST = 1,
  DCRT_BACKEND_CUDA = 2,
} dcrt_backend;

/* An in-flight asynchronous operation. */
typedef struct dcrt_future_impl *dcrt_future;

/*--- Called by dc-run (the host program) ----------------------------------*/

/* The ABI version libdcrt implements. */
int32_t dcrt_abi_version(void);

/* What dcrt_init needs. Fields are only ever appended: set `struct_size` to
 * sizeof(dcrt_init_options) as the caller was compiled, and the runtime
 * reads no field past it (missing ones take their zero defaults). Sizes
 * come from the compile-time plan in the artifact's manifest; 0 means
 * "not planned": the pool grows as needed (tests and tools only; a device
 * backend warns). */
typedef struct dcrt_init_options {
  int64_t struct_size;
  int32_t backend;             /* dcrt_backend */
  int32_t expected_world_size; /* the artifact's; 0 accepts any */
  int32_t device;              /* device ordinal; -1: the local rank */
  int32_t grid_rank;           /* number of grid axes (0: a 1-D world) */
  const int64_t *grid_shape;   /* grid_rank sizes, product = world size */
  int64_t gather_arena_bytes;  /* gathered parameters at once */
  int64_t host_pool_bytes;     /* offloaded activations at once */
  int64_t step_arena_bytes;    /* the artifact's planned temporaries */
  int64_t step_buffer_bytes;   /* reduced shards, all-reduce results */
  int64_t staging_bytes;       /* packing buffers of collectives */
  int32_t flags;               /* DCRT_INIT_* bits */
} dcrt_init_options;

/* dcrt_init_options.flags: run-to-run bit-identical results where a device
 * library offers a choice (cuDNN's attention backward writes dQ from a
 * materialized dP instead of accumulating it with atomics); an operation
 * without a deterministic form is then an error, never silently
 * nondeterministic. The host backend is always deterministic. */
#define DCRT_INIT_DETERMINISTIC 1
/* dcrt_init_options.flags (addition): run the finite-value checks of an
 * artifact compiled with dc-compile --check-finite (dcrt_check_finite);
 * without it they return at once. */
#define DCRT_INIT_CHECK_FINITE 2

/* Joins the job: rank/world from MPI (mpirun) or the launcher's
 * environment; fails if the world size differs from expected_world_size.
 * Picks the backend, the device, creates the communicators (one per grid
 * axis) and allocates every planned pool once. */
void dcrt_init(const dcrt_init_options *options);
void dcrt_finalize(void);
int32_t dcrt_rank(void);
int32_t dcrt_world_size(void);
/* "host" or "cuda". */
const char *dcrt_backend_name(void);

/*--- Called by the artifact ------------------------------------------------*/

/* All-gathers `n` shards over grid axis `axis` as ONE group. Shard i holds
 * local_numel[i] elements of type src_dtype[i] (the rank's slice of a
 * flattened tensor of full_numel[i] elements, last slot padded); it is
 * converted to dst_dtype[i] before sending. The runtime allocates each full
 * tensor in its gather arena and writes its address to out_full[i] before
 * returning (valid to read only after dcrt_wait). */
dcrt_future dcrt_gather_start(int32_t axis, int32_t n, void *const *shards,
                              const int64_t *local_numel,
                              const int64_t *full_numel,
                              const int32_t *src_dtype,
                              const int32_t *dst_dtype, void **out_full);

/* Waits for any future; afterwards its output buffers hold their values
 * (for work enqueued on the compute stream after the wait). */
void dcrt_wait(dcrt_future future);

/* Returns a gathered tensor to the arena (an out_full of dcrt_gather_start).
 * Only after the buffer's wait, once; an unknown pointer (a reload's or an
 * upload's destination included: the caller's) or a second release is a
 * fatal error. The memory is reused only by operations started after the
 * release (which are ordered after the compute enqueued before it). */
void dcrt_release(void *full);

/* Reduce-scatters `n` full gradients over `axis` as ONE bucket (packed,
 * padded slots) with `op`. Gradient i has full_numel[i] elements of
 * grad_dtype[i]; the rank's reduced slice (local_numel[i] elements of
 * shard_dtype[i]) is written to a runtime buffer whose address goes to
 * out_shards[i]. The gradient buffers must stay untouched until the wait. */
dcrt_future
dcrt_reduce_scatter_start(int32_t axis, int32_t n, int32_t op,
                          void *const *grads, const int64_t *full_numel,
                          const int32_t *grad_dtype, const int64_t *local_numel,
                          const int32_t *shard_dtype, void **out_shards);

/* All-reduces `numel` elements of `dtype` with `op` over `axis` into a
 * runtime buffer whose address goes to *out. */
dcrt_future dcrt_all_reduce_start(int32_t axis, int32_t op, const void *input,
                                  int64_t numel, int32_t dtype, void **out);

/* All-to-all over `axis` (Ulysses): `input` has `rank` dims `shape`; it is
 * split evenly along split_dim, piece i goes to rank i of the axis, the
 * received pieces are concatenated along concat_dim into `output` (the
 * caller's buffer, written by the time the wait returns). */
dcrt_future dcrt_all_to_all_start(int32_t axis, const void *input, void *output,
                                  int32_t rank, const int64_t *shape,
                                  int64_t split_dim, int64_t concat_dim,
                                  int32_t dtype);

/* Copies `bytes` from device memory to a host-pool buffer (*out_host) on
 * the device-to-host copy stream. */
dcrt_future dcrt_offload_start(const void *device, int64_t bytes,
                               void **out_host);

/* Copies `bytes` from a host-pool buffer (an *out_host of
 * dcrt_offload_start) into `device_dst` on the host-to-device copy stream;
 * the host buffer returns to the pool when the copy completes. `device_dst`
 * is the caller's device buffer of at least `bytes` (compiled code passes a
 * temporary of the step arena, planned with the step's other temporaries):
 * like any start, the copy is ordered after the compute enqueued before it,
 * and the buffer holds the value for the compute enqueued after the wait.
 * The caller must not touch it in between; the runtime never frees it. */
dcrt_future dcrt_reload_into(void *host, int64_t bytes, void *device_dst);

/* Copies `bytes` from a caller-owned host buffer (a parameter shard kept in
 * host memory, "memory": "host" in the manifest) into `device_dst`, the
 * caller's device buffer, as dcrt_reload_into does. The host buffer stays
 * the caller's and unchanged (it must not be written until the wait). */
dcrt_future dcrt_upload_into(const void *host, int64_t bytes, void *device_dst);

/* Copies `bytes` from a device buffer into `host_dst`, a caller-owned host
 * buffer (optimizer state kept in host memory, "memory": "host"), on the
 * device-to-host copy stream (an addition: ABI unchanged). Like any start,
 * the copy is ordered after the compute enqueued before it; the caller must
 * not touch either buffer until the wait. */
dcrt_future dcrt_download_into(const void *device, int64_t bytes,
                               void *host_dst);

/* Profiling: drop cached gathered copies (of one shard, or all). */
void dcrt_invalidate_gathered(const void *shard);
void dcrt_clear_gathered(void);

/* The stream the artifact's compute runs on: a cudaStream_t on the cuda
 * backend, NULL on the host backend (compute runs on the calling thread). */
void *dcrt_compute_stream(void);

/* The base of the step arena: step_arena_bytes of device memory, 256-byte
 * aligned, allocated once at dcrt_init, where the artifact places its
 * temporaries at planned offsets. NULL when the plan has none. */
void *dcrt_step_arena(void);

/*--- Compute (additions: artifacts compiled with --target=h200 call them) ---*/

/* A matrix product on the compute stream, fp32 accumulation. All fields are
 * int64_t so compiled code builds the struct as an array. Row-major views:
 * op(A) is m x k and op(B) is k x n, where trans_a = 1 means A is stored
 * k x m (so op(A) = A^T), likewise trans_b (B stored n x k). lda, ldb, ldc
 * are the row strides of the stored matrices in elements (the inner stride
 * is 1); batch_stride_* the strides between the `batch` matrices (0 for a
 * matrix shared by every batch). accumulate = 1: C += op(A) op(B);
 * 0: C = op(A) op(B). a/b/c_dtype are dcrt_dtype codes (f32, bf16, f16;
 * A and B the same). The cuda backend uses cuBLASLt (heuristic chosen once
 * per descriptor and cached, workspace allocated at init); the host backend
 * loops, for tests. */
typedef struct dcrt_matmul_desc {
  int64_t batch, m, n, k;
  int64_t lda, ldb, ldc;
  int64_t batch_stride_a, batch_stride_b, batch_stride_c;
  int64_t trans_a, trans_b;
  int64_t a_dtype, b_dtype, c_dtype;
  int64_t accumulate;
} dcrt_matmul_desc;
void dcrt_matmul(const dcrt_matmul_desc *desc, const void *a, const void *b,
                 void *c);

/* Fused scaled-dot-product attention (flash attention) on the compute
 * stream, the semantics of dc.attention and dc.attention_grad. All fields
 * are int64_t so compiled code builds the struct as an array. Dense
 * row-major buffers: q, o, dO, dq are [batch, seq_q, head_dim]; k, v, dk,
 * dv [batch_kv, seq_k, head_dim], all of `dtype` (f32, bf16 or f16); lse is
 * f32 [batch, seq_q]. `batch` is the product of every leading dim of q
 * (batch times query heads), `batch_kv` that of k (batch times key/value
 * heads): grouped-query attention when smaller, with batch a multiple of
 * it; q's batch entry b reads k/v's entry b / (batch / batch_kv). 0 means
 * batch (no grouping). With z = scale q k^T (-inf where key j > query i
 * when causal = 1, which needs seq_q == seq_k):
 *   forward:  lse[i] = log sum_j exp(z[i, j]) (natural log),
 *             o[i] = sum_j exp(z[i, j] - lse[i]) v[j];
 *   backward: p = exp(z - lse), delta[i] = sum_d dO[i, d] o[i, d],
 *             dv = p^T dO, ds = scale p (dO v^T - delta),
 *             dq = ds k, dk = ds^T q (overwritten, not accumulated; with
 *             grouping, dk and dv of a k/v entry sum over the q entries
 *             that read it).
 * Strided layouts (heads > 0): the batch is [outer, heads] (batch = outer
 * x heads; k/v's batch_kv = outer x heads_kv) and each operand has its own
 * element strides {outer, head, seq} (the head_dim stride is 1): element
 * (n, i, d) of q is at q + (n / heads) q_strides[0] + (n % heads)
 * q_strides[1] + i q_strides[2] + d, and likewise k, v, dk, dv with
 * heads_kv. So [B, S, H, D] tensors (seq before heads, PyTorch's layout
 * after the q/k/v projection) and slices of one fused projection are read
 * and written in place, with no head transposes. lse stays dense. The
 * forward reads q, k, v and o's strides, the backward all eight. heads = 0
 * is the dense layout above, and the stride fields are ignored.
 * struct_size is sizeof(dcrt_attention_desc) as the caller was compiled
 * (272 today; 72 before heads, 64 before batch_kv: such a caller does not
 * have the later fields, read as 0); fields are only ever appended.
 * `scale_f32_bits` holds the IEEE-754 single-precision bits of the scale in its
 * low 32 bits (upper 32 zero), so that the struct stays integers. The cuda
 * backend runs bf16 and f16 through cuDNN's fused flash-attention graphs (built
 * once per descriptor and cached, workspace allocated once per graph); it has
 * no f32 flash kernel (dc-compile expands f32 attention into other kernels),
 * and takes strided layouts only without grouping (batch_kv == batch). The host
 * backend loops, accumulating in f32, for tests. */
typedef struct dcrt_attention_desc {
  int64_t struct_size;
  int64_t dtype;
  int64_t batch, seq_q, seq_k, head_dim;
  int64_t causal;
  int64_t scale_f32_bits;
  int64_t batch_kv; /* since struct_size 72 */
  int64_t heads;    /* since struct_size 272: 0 = dense */
  int64_t q_strides[3], k_strides[3], v_strides[3], o_strides[3];
  int64_t do_strides[3], dq_strides[3], dk_strides[3], dv_strides[3];
} dcrt_attention_desc;
void dcrt_attention_fwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, void *o, float *lse);
void dcrt_attention_bwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, const void *o,
                        const float *lse, const void *dO, void *dq, void *dk,
                        void *dv);

/*--- Mixture of experts (additions: the routing ops of dc's DCExpertOps.td,
 * called by artifacts in place of their linalg expansion) -----------------
 *
 * Every call enqueues on the compute stream and never reads device memory on
 * the host: the routing (ids, indices, ends) stays on the device, the launch
 * configuration depends only on the descriptor (the worst case: blocks that
 * find no work return), so a step that calls them can be captured in a CUDA
 * graph. As for dcrt_matmul, a descriptor's first call on the cuda backend
 * does host-side setup and may allocate a workspace kept for the process
 * (counted in MemoryStats::moeWorkspace): make it outside a capture.
 * All fields are int64_t so compiled code builds the structs as arrays;
 * struct_size is sizeof the struct as the caller was compiled (fields are
 * only ever appended; the runtime reads none past struct_size). Float
 * operands are f32, bf16 or f16, one dtype per call; index operands i32 or
 * i64, each with its own dtype field. Row strides (`*_ld`, in elements, at
 * least the row's length) let an operand be a column slice of a wider
 * tensor; index operands are dense. Outputs must not overlap inputs.
 * Results are reproducible: the same descriptor and inputs give
 * bit-identical outputs run to run, replayed in a graph or not (no
 * floating-point atomics; on the cuda backend for the same GPU model and
 * the same 16-byte alignment of the pointers, which may pick another
 * kernel). gather, scatter_add, top-k and group_by_expert give the same
 * bits on the host and cuda backends; the grouped products agree within
 * f32 accumulation of different orders. */

/* dc.topk: for each of `rows` rows of `experts` scores, the k largest and
 * their positions, in order: values[r, j] is the j-th largest score of row
 * r (its bits copied), indices[r, j] its position in [0, experts). Ties go
 * to the lower position. A NaN counts as larger than every number (as
 * torch.topk; NaNs among themselves by position). scores [rows, experts]
 * (row stride scores_ld), values [rows, k] (values_ld) of `dtype`; indices
 * [rows, k] (indices_ld) of index_dtype. 1 <= k <= experts. */
typedef struct dcrt_topk_desc {
  int64_t struct_size; /* 72 */
  int64_t dtype, index_dtype;
  int64_t rows, experts, k;
  int64_t scores_ld, values_ld, indices_ld;
} dcrt_topk_desc;
void dcrt_topk(const dcrt_topk_desc *desc, const void *scores, void *values,
               void *indices);

/* dc.group_by_expert: a stable counting sort of `assignments` expert ids
 * (ids, [assignments], ids_dtype; a multi-dim ids tensor read flat) by id.
 * order [assignments] (order_dtype): order[p] is the position in ids of the
 * assignment at sorted position p; ends [experts] (ends_dtype): ends[e] is
 * the end of expert e's rows, the inclusive cumulative count of ids <= e
 * (torch._grouped_mm's offsets): expert e's rows are [e == 0 ? 0 :
 * ends[e - 1], ends[e]). Within an expert, rows keep the order of ids. An
 * id outside [0, experts) (a dropped assignment) sorts after every expert,
 * at [ends[experts - 1], assignments), in its original order. On the cuda
 * backend experts <= 1024. */
typedef struct dcrt_group_by_expert_desc {
  int64_t struct_size; /* 48 */
  int64_t ids_dtype, order_dtype, ends_dtype;
  int64_t assignments, experts;
} dcrt_group_by_expert_desc;
void dcrt_group_by_expert(const dcrt_group_by_expert_desc *desc,
                          const void *ids, void *order, void *ends);

/* dc.gather_rows and dc.scatter_add_rows: rows of `width` elements (the
 * product of every dim after the first) of `dtype`; index [indexed_rows]
 * (index_dtype).
 *  gather:      source [table_rows, width], result [indexed_rows, width]:
 *               result[i] = source[index[i]], a row of zeros where index[i]
 *               is outside [0, table_rows).
 *  scatter_add: source [indexed_rows, width], result [table_rows, width]:
 *               result[m] = the sum of source[i] over i with index[i] == m,
 *               accumulated in f32 in increasing i and rounded once (zeros
 *               where no index names m; an index outside [0, table_rows)
 *               adds nowhere). Deterministic for any index, repeats
 *               included: no atomics on values (the cuda backend lists each
 *               result row's sources and sums them in order; a row named
 *               more than 16 times is slower, not different).
 * source_ld and result_ld are the row strides of source and result. */
typedef struct dcrt_row_map_desc {
  int64_t struct_size; /* 64 */
  int64_t dtype, index_dtype;
  int64_t indexed_rows, table_rows, width;
  int64_t source_ld, result_ld;
} dcrt_row_map_desc;
void dcrt_gather_rows(const dcrt_row_map_desc *desc, const void *source,
                      const void *index, void *result);
void dcrt_scatter_add_rows(const dcrt_row_map_desc *desc, const void *source,
                           const void *index, void *result);

/* dc.grouped_matmul and dc.grouped_weight_grad, f32 accumulation. `ends`
 * ([experts], ends_dtype) is dc.group_by_expert's: expert e owns rows
 * [e == 0 ? 0 : ends[e - 1], ends[e]) of the `rows` rows; it must be
 * nondecreasing with ends[experts - 1] <= rows (otherwise every access
 * still stays inside the buffers, each end clamped to [its predecessor,
 * rows], and the results are unspecified). lhs, rhs and out are of
 * `dtype`; accumulate = 1 adds the product to out (out += ...), 0
 * overwrites it.
 *  dcrt_grouped_matmul: lhs [rows, k] (lhs_ld); rhs [experts, k, p], or
 *    with transpose_rhs = 1 [experts, p, k] used transposed (row stride
 *    rhs_ld, rhs_expert_stride elements between experts' matrices); out
 *    [rows, p] (out_ld): out[i] = lhs[i] rhs[e] for each row i of expert
 *    e, and 0 for the rows past ends[experts - 1]. out_expert_stride is
 *    ignored.
 *  dcrt_grouped_weight_grad: lhs [rows, k] (lhs_ld), rhs [rows, p]
 *    (rhs_ld); out [experts, k, p] (row stride out_ld, out_expert_stride
 *    between experts): out[e] = lhs[rows of e]^T rhs[rows of e] (0 for an
 *    expert without rows); rows past ends[experts - 1] count nowhere.
 *    transpose_rhs must be 0 and rhs_expert_stride is ignored. (The
 *    gradient of a transposed [experts, p, k] weight is this call with lhs
 *    and rhs swapped.)
 * The cuda backend runs bf16 and f16 with 16-byte aligned operands (k, p,
 * row strides and expert strides multiples of 8 elements) on tensor cores
 * (on sm_90 GPUs wgmma, 128 x 256 tiles fed by TMA; elsewhere mma.sync,
 * 128 x 128, cp.async; multi-stage pipelines), f32 and other layouts on a
 * CUDA-core kernel. The tiles are the worst case for any routing (on sm_90
 * walked by one persistent block per SM): the forward's cover
 * ceil(rows / tile) + experts + 1 row tiles, each finding its expert from
 * `ends` on the device; the weight gradient's cover every
 * (k, p) tile of every expert, each looping over its expert's rows, and
 * when an expert's tiles are few for the GPU the rows are also split into
 * a fixed number of slices (by the descriptor and the GPU's SM count only)
 * whose f32 partial sums are added in slice order: one expert taking every
 * row still fills the GPU, and the result stays deterministic. */
typedef struct dcrt_grouped_matmul_desc {
  int64_t struct_size; /* 112 */
  int64_t dtype, ends_dtype;
  int64_t rows, experts, k, p;
  int64_t transpose_rhs, accumulate;
  int64_t lhs_ld, rhs_ld, out_ld;
  int64_t rhs_expert_stride, out_expert_stride;
} dcrt_grouped_matmul_desc;
void dcrt_grouped_matmul(const dcrt_grouped_matmul_desc *desc, const void *lhs,
                         const void *rhs, const void *ends, void *out);
void dcrt_grouped_weight_grad(const dcrt_grouped_matmul_desc *desc,
                              const void *lhs, const void *rhs,
                              const void *ends, void *out);

/* Launches GPU kernel `kernel` of the fatbin/cubin `binary` (binary_bytes
 * long, embedded in the artifact; loaded on first use and cached by its
 * address) on the compute stream: dims = {grid x, y, z, block x, y, z},
 * `args` one pointer per kernel parameter (as cudaLaunchKernel). The host
 * backend has no GPU: a fatal error naming the kernel. */
void dcrt_launch_kernel(const void *binary, int64_t binary_bytes,
                        const char *kernel, const int64_t *dims,
                        int32_t shared_bytes, void **args);
/* As dcrt_launch_kernel, for a kernel whose blocks wait for each other
 * (addition): its last `coresident_blocks` blocks wait until every block of
 * the launch has finished its first part, so that many must fit on the GPU
 * at once or the kernel never ends. The first launch of each kernel (and of
 * each block size and shared memory size) checks it with the occupancy API
 * times the SM count, which a MIG slice makes small: a GPU that cannot hold
 * them is a fatal error naming the kernel, never a hang. */
void dcrt_launch_kernel_coresident(const void *binary, int64_t binary_bytes,
                                   const char *kernel, const int64_t *dims,
                                   int32_t shared_bytes, void **args,
                                   int64_t coresident_blocks);

/*--- The optimizer inside the step (additions) -----------------------------
 *
 * AdamW over one parameter's local elements, as dc-run's trainer runs it
 * (torch.optim.AdamW: decoupled weight decay, bias-corrected moments),
 * with gradient clipping by the global norm. dc-optimizer-in-step calls
 * them at the end of a step: dcrt_grad_squares for each gradient, in the
 * parameters' order, into one f64 accumulator that the step all-reduces;
 * then dcrt_adamw for each parameter.
 *
 * `shard_axis` says which elements are this rank's: an axis of the grid or
 * DCRT_ALL_AXES (a shard, slot = this rank's coordinate on it, the last
 * slots' tails padding), or DCRT_NOT_SHARDED (the whole tensor, on every
 * rank). A slot is counted in the norm by one rank of the ranks that hold
 * it (coordinate 0 on every other axis), as dc-run's trainer does; ranks
 * that differ on an axis of `distinct_axes` hold different blocks of the
 * parameter (expert parallelism: each rank its own experts), so each counts
 * its own.
 *
 * With gradient accumulation the step sums each gradient over its
 * micro-batches in fp32 (dcrt_grad_accumulate) and the norm and the update
 * use the mean: the sum times 1 / micro_batches. */
#define DCRT_NOT_SHARDED (-2)

typedef struct dcrt_adamw_desc {
  int64_t struct_size; /* 120 (104: the first version, without the last
                          two fields) */
  int64_t full_numel;  /* elements of the whole parameter */
  int64_t local_numel; /* of each rank's buffers: a slot, or full_numel */
  int64_t shard_axis;  /* an axis, DCRT_ALL_AXES or DCRT_NOT_SHARDED */
  int64_t param_dtype, grad_dtype;
  /* DCRT_F32 for a separate fp32 master copy, -1 for none (the parameter
   * is its own master: f32, or bf16 with bf16 state). */
  int64_t master_dtype;
  int64_t moment_dtype; /* DCRT_F32 or DCRT_BF16 */
  double beta1, beta2, eps, weight_decay;
  /* Clip the gradients to this global L2 norm; 0: no clipping. */
  double max_grad_norm;
  /* Bit a set: ranks at different coordinates on grid axis a hold
   * different blocks of the parameter. 0: none. */
  int64_t distinct_axes;
  /* The gradient is the sum over this many micro-batches; the norm and the
   * update use its mean. 0 or 1: one. */
  int64_t micro_batches;
} dcrt_adamw_desc;

/* *squares_out = *squares_in + this rank's share of the squared L2 norm
 * of `grad` (the desc's grad_dtype and extent): its slot's real elements
 * summed in order in double (times 1 / micro_batches^2 where the gradient
 * is a sum over micro-batches) where it counts the slot, else 0 (NaN where
 * the slot is not finite, so that a replica's NaN still stops training).
 * f64 scalars; squares_out may be squares_in. */
void dcrt_grad_squares(const dcrt_adamw_desc *desc, const void *grad,
                       const double *squares_in, double *squares_out);

/* sum_out = sum_in + grad over the desc's local_numel elements (grad in
 * the desc's grad_dtype, converted to fp32; the sums fp32), as dc-run's
 * trainer sums a gradient shard over micro-batches. sum_out may be sum_in. */
void dcrt_grad_accumulate(const dcrt_adamw_desc *desc, const void *grad,
                          const float *sum_in, float *sum_out);

/* One AdamW step of the parameter: reads `param`, `grad`, `exp_avg`,
 * `exp_avg_sq` and `master` (null when the desc has none); writes the
 * updated values to the *_out buffers, which may be the same buffers (the
 * update is elementwise). `lr` (f64), `step` (i64, counting from 1) and
 * `squares` (f64, the all-reduced squared global norm) are scalars in the
 * backend's memory, read when the update runs (a captured step replays
 * with new values). A non-finite `squares` skips the update: the outputs
 * get the inputs unchanged. Padding past a slot's real elements is
 * copied. */
void dcrt_adamw(const dcrt_adamw_desc *desc, const void *param,
                const void *grad, const void *exp_avg, const void *exp_avg_sq,
                const void *master, const double *lr, const int64_t *step,
                const double *squares, void *param_out, void *exp_avg_out,
                void *exp_avg_sq_out, void *master_out);

/*--- Finite-value checks (additions: artifacts compiled with dc-compile
 * --check-finite call dcrt_check_finite; dc-run --check-finite calls
 * dcrt_first_nonfinite) ----------------------------------------------------*/

/* With flags & DCRT_FINITE_ALLOW_INF only NaN counts: the op writes
 * infinities on purpose (a mask's -inf, a maximum's identity). */
#define DCRT_FINITE_ALLOW_INF 1

/* Called after each compute op, in program order, on the compute stream:
 * `data` holds `numel` contiguous elements of `dtype` (DCRT_F32, DCRT_BF16
 * or DCRT_F16; device memory on the cuda backend) that the op wrote; `site`
 * names the op (a C string that lives as long as the artifact). Does
 * nothing unless dcrt_init got DCRT_INIT_CHECK_FINITE: an artifact compiled
 * with checks runs at full speed without it. Enqueues only (no host
 * synchronization), so a step that calls it can be captured. */
void dcrt_check_finite(const void *data, int64_t numel, int32_t dtype,
                       int32_t flags, const char *site);

/* The first check of the step (in the order the step called them) that
 * found a non-finite value, or NULL: returns its site, and sets *what to
 * "NaN" (the output holds a NaN) or "infinity" (infinities, no NaN) and
 * *count to the number of such elements in that output (NULL and 0 when
 * none; `what` and `count` may be NULL). Waits for the step's compute, then
 * resets for the next step. dc-run calls it after each entry call. */
const char *dcrt_first_nonfinite(const char **what, int64_t *count);

/* Marks the end of one step: buffers for reductions and gathers not
 * released yet (persistent ones) may be reused by the next. Called by the
 * artifact's entry, last. */
void dcrt_end_step(void);

/*--- Profiling hooks (optional) --------------------------------------------
 * Code compiled for a profiling run brackets each compute op with these:
 *   int64_t t = dcrt_op_begin(); <op>; dcrt_op_end("train_step:7", t);
 * The key is the cost model's "<function>:<ordinal>" (dc::getProfileKey); it
 * must stay valid while the artifact is loaded. On the host backend `t` is a
 * clock reading; a device backend records events on the compute stream and
 * resolves them when the step's work is done. dc-run writes the mean time
 * per key to --profile-out and shows each op on the trace's compute track. */
int64_t dcrt_op_begin(void);
void dcrt_op_end(const char *op_key, int64_t begin);

#ifdef __cplusplus
}
#endif

/*--- What an artifact exports (compiled by dc-compile) ---------------------
 *
 *   int32_t dc_artifact_abi_version(void);   // DCRT_ABI_VERSION it targets
 *   const char *dc_artifact_manifest(void);  // JSON, below
 *   void dc_entry_<step>(void **buffers);    // one per step function
 *
 * dc_entry_<step> takes the step's arguments then its results, in order, as
 * buffer pointers (results are written in place: caller-allocated, in device
 * memory). A result with "arena_offset" N has bytes of its own in the step
 * arena from where the step first writes it to its end: a caller passing
 * (char *)dcrt_step_arena() + N spends no memory on it before then (the
 * memory dc plans), and must read it before the next entry call.
 *
 * Manifest JSON:
 *   {"abi": 4, "target": "host", "world_size": 2, "grid": "world",
 *    "grid_shape": [2],
 *    "plan": {"gather_arena_bytes": N, "host_pool_bytes": N,
 *             "step_arena_bytes": N, "step_buffer_bytes": N,
 *             "staging_bytes": N},
 *    "steps": [{"name": "train_step", "entry": "dc_entry_train_step",
 *      "flops": 1.2e9,
 *      "args": [{"kind": "param", "id": 0, "name": "fc1.weight",
 *                "shape": [16, 32], "dtype": "f32", "local": 256},
 *               {"kind": "data", "name": "x", "shape": [8, 16],
 *                "dtype": "f32"}],
 *      "results": [{"kind": "loss", "shape": [], "dtype": "f32",
 *                   "arena_offset": 512},
 *                  {"kind": "grad", "param": 0, "shape": [16, 32],
 *                   "dtype": "f32", "local": 256, "arena_offset": 0}]}],
 *    "checksum": "3f2a..."}
 * "checksum" is the last member, written exactly as ,"checksum":"<16
 * lowercase hex digits>"} : the FNV-1a 64-bit hash of every byte of the
 * text before that comma. dc-run refuses a manifest without it or whose
 * text does not hash to it (one edited after it was compiled).
 * "target" picks the backend ("host": host, "cuda_sm90": cuda; "cpu" and
 * "h200", their spellings before, likewise) unless
 * DCRT_BACKEND overrides it; plan fields may be absent (0). "local" is
 * present for sharded tensors (the buffer holds `local` elements); a
 * replicated parameter or gradient has no "local"; "shard_axes" (optional,
 * beside "local", e.g. [0]) lists the grid axes a shard is split over
 * (absent: all of them), so `local` = ceil(numel / product of their sizes)
 * and ranks differing only on other axes hold the same slot; slots are
 * numbered over the listed axes in their order, the first varying slowest (a
 * block of experts, dc-expert-parallel, lists its expert axis first: the
 * block, then its shard). "flops" (optional)
 * is one rank's floating-point work per step as the compiler counts it. A
 * parameter argument may carry "memory": "host": the step keeps it in host
 * memory and brings it to the device with dcrt_upload_into, so the caller
 * allocates it in host memory (pinned, on a device backend); without "memory"
 * it is "device". "check_finite": true (optional, default false) marks an
 * artifact compiled with dc-compile --check-finite: its steps call
 * dcrt_check_finite after each compute op (dc-run --check-finite needs it).
 *-------------------------------------------------------------------------*/

#endif /* DCRT_DCRT_H */
