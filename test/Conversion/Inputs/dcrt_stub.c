/* A one-rank dcrt for tests: every collective is a local copy (with the
 * dtype conversion the ABI asks for), and the stub checks the protocol the
 * artifact must follow: each future waited exactly once, each gathered
 * buffer released once, nothing gathered left at the end of a step; reload
 * and upload destinations may be released before the step ends.
 * dcrt_stub_stats() prints the counts. */
#include "dcrt/dcrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dcrt_future_impl {
  int waited;
};

enum { MAX_BUFFERS = 4096 };

static long starts, waits, gathers, releases, live_gathered, peak_gathered,
    copy_releases;
static void *step_buffers[MAX_BUFFERS];
static int num_step_buffers;

static void fail(const char *what) {
  fprintf(stderr, "dcrt stub: %s\n", what);
  abort();
}

static size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
  case DCRT_F32:
  case DCRT_I32:
    return 4;
  case DCRT_BF16:
  case DCRT_F16:
    return 2;
  case DCRT_I64:
    return 8;
  }
  fail("unknown dtype");
  return 0;
}

static float bf16_to_f32(uint16_t x) {
  uint32_t bits = (uint32_t)x << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/* Copies n elements, converting between f32 and bf16 where asked. */
static void convert(void *dst, int32_t dst_dtype, const void *src,
                    int32_t src_dtype, int64_t n) {
  if (dst_dtype == src_dtype) {
    memcpy(dst, src, (size_t)n * dtype_bytes(src_dtype));
  } else if (src_dtype == DCRT_F32 && dst_dtype == DCRT_BF16) {
    for (int64_t i = 0; i < n; ++i)
      ((uint16_t *)dst)[i] = f32_to_bf16(((const float *)src)[i]);
  } else if (src_dtype == DCRT_BF16 && dst_dtype == DCRT_F32) {
    for (int64_t i = 0; i < n; ++i)
      ((float *)dst)[i] = bf16_to_f32(((const uint16_t *)src)[i]);
  } else {
    fail("unsupported dtype conversion");
  }
}

/* A buffer the runtime owns until the step ends. */
static void *step_buffer(size_t bytes) {
  if (num_step_buffers == MAX_BUFFERS)
    fail("too many buffers in one step");
  return step_buffers[num_step_buffers++] = malloc(bytes ? bytes : 1);
}

static dcrt_future start(void) {
  ++starts;
  dcrt_future future = step_buffer(sizeof(struct dcrt_future_impl));
  future->waited = 0;
  return future;
}

dcrt_future dcrt_gather_start(int32_t axis, int32_t n, void *const *shards,
                              const int64_t *local_numel,
                              const int64_t *full_numel,
                              const int32_t *src_dtype,
                              const int32_t *dst_dtype, void **out_full) {
  for (int32_t i = 0; i < n; ++i) {
    if (local_numel[i] != full_numel[i])
      fail("gather: one rank holds whole tensors");
    out_full[i] = malloc((size_t)full_numel[i] * dtype_bytes(dst_dtype[i]));
    convert(out_full[i], dst_dtype[i], shards[i], src_dtype[i], full_numel[i]);
    ++gathers;
    if (++live_gathered > peak_gathered)
      peak_gathered = live_gathered;
  }
  return start();
}

void dcrt_wait(dcrt_future future) {
  if (!future || future->waited)
    fail("a future waited twice");
  future->waited = 1;
  ++waits;
}

/* Reload and upload destinations in use (released or freed at the end of
 * the step); gathered buffers are the other pointers dcrt_release takes. */
static void *copies[MAX_BUFFERS];
static int num_copies;

static void *copy_buffer(size_t bytes) {
  if (num_copies == MAX_BUFFERS)
    fail("too many reloads in one step");
  return copies[num_copies++] = malloc(bytes ? bytes : 1);
}

void dcrt_release(void *full) {
  for (int i = 0; i < num_copies; ++i)
    if (copies[i] == full) {
      ++copy_releases;
      free(full);
      copies[i] = copies[--num_copies];
      return;
    }
  if (!full || live_gathered == 0)
    fail("dcrt_release of a buffer that is neither gathered nor a reload in "
         "use (released twice?)");
  ++releases;
  --live_gathered;
  free(full);
}

dcrt_future
dcrt_reduce_scatter_start(int32_t axis, int32_t n, int32_t op,
                          void *const *grads, const int64_t *full_numel,
                          const int32_t *grad_dtype, const int64_t *local_numel,
                          const int32_t *shard_dtype, void **out_shards) {
  for (int32_t i = 0; i < n; ++i) {
    if (local_numel[i] != full_numel[i])
      fail("reduce-scatter: one rank holds whole tensors");
    out_shards[i] =
        step_buffer((size_t)local_numel[i] * dtype_bytes(shard_dtype[i]));
    convert(out_shards[i], shard_dtype[i], grads[i], grad_dtype[i],
            full_numel[i]);
  }
  return start();
}

dcrt_future dcrt_all_reduce_start(int32_t axis, int32_t op, const void *input,
                                  int64_t numel, int32_t dtype, void **out) {
  *out = step_buffer((size_t)numel * dtype_bytes(dtype));
  memcpy(*out, input, (size_t)numel * dtype_bytes(dtype));
  return start();
}

dcrt_future dcrt_offload_start(const void *device, int64_t bytes,
                               void **out_host) {
  *out_host = step_buffer((size_t)bytes);
  memcpy(*out_host, device, (size_t)bytes);
  return start();
}

dcrt_future dcrt_reload_start(void *host, int64_t bytes, void **out_device) {
  *out_device = copy_buffer((size_t)bytes);
  memcpy(*out_device, host, (size_t)bytes);
  return start();
}

dcrt_future dcrt_upload_start(const void *host, int64_t bytes,
                              void **out_device) {
  *out_device = copy_buffer((size_t)bytes);
  memcpy(*out_device, host, (size_t)bytes);
  return start();
}

dcrt_future dcrt_all_to_all_start(int32_t axis, const void *input, void *output,
                                  int32_t rank, const int64_t *shape,
                                  int64_t split_dim, int64_t concat_dim,
                                  int32_t dtype) {
  int64_t numel = 1;
  for (int32_t i = 0; i < rank; ++i)
    numel *= shape[i];
  memcpy(output, input, (size_t)numel * dtype_bytes(dtype));
  return start();
}

void *dcrt_compute_stream(void) { return NULL; }
/* The step arena: as large as the largest plan of the artifacts loaded
 * (the test driver reserves each manifest's step_arena_bytes). */
static void *arena;
static int64_t arena_bytes;
void dcrt_stub_reserve_arena(int64_t bytes) {
  if (bytes <= arena_bytes)
    return;
  free(arena);
  arena = malloc((size_t)bytes);
  if (!arena)
    fail("cannot allocate the step arena");
  arena_bytes = bytes;
}
void *dcrt_step_arena(void) { return arena; }

/* CPU artifacts expand attention into loops; a call here means an artifact
 * for the GPU target was linked against the stub. */
void dcrt_attention_fwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, void *o, float *lse) {
  fail("dcrt_attention_fwd: the stub has no attention (a GPU artifact?)");
}

void dcrt_attention_bwd(const dcrt_attention_desc *desc, const void *q,
                        const void *k, const void *v, const void *o,
                        const float *lse, const void *dO, void *dq, void *dk,
                        void *dv) {
  fail("dcrt_attention_bwd: the stub has no attention (a GPU artifact?)");
}

void dcrt_invalidate_gathered(const void *shard) {}
void dcrt_clear_gathered(void) {}

void dcrt_end_step(void) {
  if (live_gathered != 0)
    fail("gathered buffers left at the end of the step");
  if (waits != starts)
    fail("a future was never waited");
  while (num_step_buffers > 0)
    free(step_buffers[--num_step_buffers]);
  while (num_copies > 0) /* reloads never released live until here */
    free(copies[--num_copies]);
}

void dcrt_stub_stats(void) {
  printf("starts %ld waits %ld gathers %ld releases %ld peak-gathered %ld "
         "copy-releases %ld\n",
         starts, waits, gathers, releases, peak_gathered, copy_releases);
  fflush(stdout);
}
