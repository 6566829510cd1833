/*===- tiny_linear.c - a hand-written artifact for testing dc-run ---------===*
 *
 * What dc-compile will emit for a tiny linear classifier, written by hand:
 *   logits = x W + b,  loss = mean over rows of cross-entropy(logits, label)
 * with x: [B, 4] f32, labels: [B] i32 in [0, 3), W: [4, 3], b: [3], both
 * ZeRO-3 sharded. The global batch is 6 rows, so the artifact compiled for
 * TINY_WORLD ranks takes B = 6 / TINY_WORLD rows per rank: every world size
 * trains on the same global batch and must print the same losses.
 *
 * The entry calls the runtime exactly as compiled code would: one fused
 * gather of both shards, offload of the input while the gather is in
 * flight, release after the forward, reload for the backward (released
 * after its last use), one reduce-scatter bucket (avg) for both gradients,
 * dcrt_end_step. The forward and backward are bracketed with the profiling
 * hooks. Built with TINY_HOST_BIAS=1, the bias shard is kept in host memory
 * ("memory": "host", as dc-offload-params makes it), uploaded before the
 * gather and released once the gather is waited. Built with
 * TINY_CHECK_FINITE=1, the manifest says "check_finite": true and each op's
 * outputs are checked with dcrt_check_finite after it, as dc-compile
 * --check-finite makes them: the probabilities of the forward, the loss,
 * then (in the backward) dW and db.
 *
 * Test hooks (environment): DC_TEST_EXIT_RANK=r with DC_TEST_EXIT_STEP=s
 * makes rank r die (_exit(3), or the signal DC_TEST_EXIT_SIGNAL when set)
 * when step s starts, mid-job;
 * DC_TEST_NAN_GRAD_STEP=s makes rank DC_TEST_NAN_GRAD_RANK (default 0)
 * write a NaN into its first weight gradient element at step s (the loss
 * stays finite);
 * DC_TEST_INF_PROBS_STEP=s writes an infinity into the first probability at
 * step s (every rank; the loss stays finite, the gradients do not);
 * DC_TEST_SKIP_END_STEP=1 leaves out dcrt_end_step; DC_TEST_MEMORY=a=v puts
 * "memory": "v" on argument a (fc.weight, fc.bias, x or labels) of the
 * manifest.
 *===----------------------------------------------------------------------===*/
#include "dcrt/dcrt.h"
#include "seal_manifest.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TINY_WORLD
#error "define TINY_WORLD, the world size this artifact is compiled for"
#endif
#ifndef TINY_ABI
#define TINY_ABI DCRT_ABI_VERSION
#endif
#ifndef TINY_HOST_BIAS
#define TINY_HOST_BIAS 0
#endif
#ifndef TINY_CHECK_FINITE
#define TINY_CHECK_FINITE 0
#endif

enum {
  IN = 4,
  CLASSES = 3,
  GLOBAL_BATCH = 6,
  BATCH = GLOBAL_BATCH / TINY_WORLD,
  W_NUMEL = IN * CLASSES,
  B_NUMEL = CLASSES,
  /* ceil(numel / world): each rank's padded slot */
  W_LOCAL = (W_NUMEL + TINY_WORLD - 1) / TINY_WORLD,
  B_LOCAL = (B_NUMEL + TINY_WORLD - 1) / TINY_WORLD,
  X_BYTES = BATCH * IN * 4,
};

int32_t dc_artifact_abi_version(void) { return TINY_ABI; }

/* The "memory" field of argument `name`: the bias's in a TINY_HOST_BIAS
 * build, or what DC_TEST_MEMORY asks for. */
static const char *memory_of(const char *name) {
  static char fields[4][64];
  static int used;
  const char *test = getenv("DC_TEST_MEMORY");
  size_t length = strlen(name);
  char *field = fields[used++ % 4];
  field[0] = '\0';
  if (test && strncmp(test, name, length) == 0 && test[length] == '=')
    snprintf(field, sizeof(fields[0]), ", \"memory\": \"%s\"",
             test + length + 1);
  else if (TINY_HOST_BIAS && strcmp(name, "fc.bias") == 0)
    snprintf(field, sizeof(fields[0]), ", \"memory\": \"host\"");
  return field;
}

const char *dc_artifact_manifest(void) {
  static char manifest[2048];
  /* The plan: both gathered tensors at once (the arena's exact need), and
   * the offloaded input. */
  snprintf(
      manifest, sizeof(manifest),
      "{\"abi\": %d, \"world_size\": %d, \"grid\": \"world\", \"vocab\": %d,"
      "%s \"plan\": {\"gather_arena_bytes\": %d, \"host_pool_bytes\": %d},"
      " \"steps\": [{\"name\": \"train_step\","
      " \"entry\": \"dc_entry_train_step\", \"args\": ["
      "{\"kind\": \"param\", \"id\": 0, \"name\": \"fc.weight\","
      " \"shape\": [%d, %d], \"dtype\": \"f32\", \"local\": %d%s},"
      " {\"kind\": \"param\", \"id\": 1, \"name\": \"fc.bias\","
      " \"shape\": [%d], \"dtype\": \"f32\", \"local\": %d%s},"
      " {\"kind\": \"data\", \"name\": \"x\", \"shape\": [%d, %d],"
      " \"dtype\": \"f32\"%s},"
      " {\"kind\": \"data\", \"name\": \"labels\", \"shape\": [%d],"
      " \"dtype\": \"i32\"%s}],"
      " \"results\": [{\"kind\": \"loss\", \"shape\": [], \"dtype\": \"f32\"},"
      " {\"kind\": \"grad\", \"param\": 0, \"shape\": [%d, %d],"
      " \"dtype\": \"f32\", \"local\": %d},"
      " {\"kind\": \"grad\", \"param\": 1, \"shape\": [%d],"
      " \"dtype\": \"f32\", \"local\": %d}]}]}",
      TINY_ABI, TINY_WORLD, CLASSES,
      TINY_CHECK_FINITE ? " \"check_finite\": true," : "",
      (W_NUMEL + B_NUMEL) * 4, X_BYTES, IN, CLASSES, W_LOCAL,
      memory_of("fc.weight"), CLASSES, B_LOCAL, memory_of("fc.bias"), BATCH, IN,
      memory_of("x"), BATCH, memory_of("labels"), IN, CLASSES, W_LOCAL, CLASSES,
      B_LOCAL);
  sealManifest(manifest, sizeof(manifest));
  return manifest;
}

static int steps_started;

/* The step (entry call) an environment variable names, or -1. */
static int step_of(const char *name) {
  const char *value = getenv(name);
  return value ? atoi(value) : -1;
}

/* After an op, in a TINY_CHECK_FINITE build: what dc-compile --check-finite
 * emits for each f32 output. */
static void check(const float *data, int64_t numel, const char *site) {
  if (TINY_CHECK_FINITE)
    dcrt_check_finite(data, numel, DCRT_F32, 0, site);
}

/* The test hook: this rank dies when the chosen step starts. */
static void maybe_die(void) {
  const char *rank = getenv("DC_TEST_EXIT_RANK");
  const char *step = getenv("DC_TEST_EXIT_STEP");
  const char *signal_number = getenv("DC_TEST_EXIT_SIGNAL");
  if (rank && step && atoi(rank) == dcrt_rank() &&
      atoi(step) == steps_started) {
    if (signal_number)
      raise(atoi(signal_number));
    _exit(3);
  }
}

/* buffers: W shard, b shard, x, labels, then loss, dW shard, db shard. */
void dc_entry_train_step(void **buffers) {
  ++steps_started;
  maybe_die();
  const int32_t *labels = (const int32_t *)buffers[3];
  float *loss = (float *)buffers[4];

  /* The bias shard in host memory: upload it into a temporary of the step
   * (the caller's buffer stays; on the host backend device memory is host
   * memory, so a local array serves). */
  void *bias_shard = buffers[1];
  float bias_device[B_LOCAL];
  if (TINY_HOST_BIAS) {
    dcrt_future upload =
        dcrt_upload_into(buffers[1], B_LOCAL * sizeof(float), bias_device);
    dcrt_wait(upload);
    bias_shard = bias_device;
  }

  /* Prefetch both parameters as one group. */
  void *shards[2] = {buffers[0], bias_shard};
  int64_t local[2] = {W_LOCAL, B_LOCAL}, full[2] = {W_NUMEL, B_NUMEL};
  int32_t f32[2] = {DCRT_F32, DCRT_F32};
  void *gathered[2];
  dcrt_future gather =
      dcrt_gather_start(0, 2, shards, local, full, f32, f32, gathered);
  /* x is not needed again until the backward: offload it meanwhile. */
  void *x_host;
  dcrt_future offload = dcrt_offload_start(buffers[2], X_BYTES, &x_host);
  dcrt_wait(gather); /* the gather no longer reads the uploaded shard */
  const float *w = (const float *)gathered[0];
  const float *b = (const float *)gathered[1];
  const float *x = (const float *)buffers[2];

  int64_t t = dcrt_op_begin();
  float probs[BATCH][CLASSES];
  double total = 0;
  for (int r = 0; r < BATCH; ++r) {
    float logits[CLASSES], max = -INFINITY, sum = 0;
    for (int c = 0; c < CLASSES; ++c) {
      logits[c] = b[c];
      for (int k = 0; k < IN; ++k)
        logits[c] += x[r * IN + k] * w[k * CLASSES + c];
      if (logits[c] > max)
        max = logits[c];
    }
    for (int c = 0; c < CLASSES; ++c)
      sum += expf(logits[c] - max);
    for (int c = 0; c < CLASSES; ++c)
      probs[r][c] = expf(logits[c] - max) / sum;
    total += logf(sum) + max - logits[labels[r]];
  }
  *loss = (float)(total / BATCH);
  dcrt_op_end("train_step:0", t);
  if (step_of("DC_TEST_INF_PROBS_STEP") == steps_started)
    probs[0][0] = INFINITY;
  check(&probs[0][0], BATCH * CLASSES,
        "train_step: forward (softmax) at tiny_linear.c");
  check(loss, 1, "train_step: forward (loss) at tiny_linear.c");
  dcrt_release(gathered[0]);
  dcrt_release(gathered[1]);

  dcrt_wait(offload);
  float x_back[BATCH * IN]; /* the step's temporary the reload writes */
  dcrt_future reload = dcrt_reload_into(x_host, X_BYTES, x_back);
  dcrt_wait(reload);
  x = x_back;

  t = dcrt_op_begin();
  /* dlogits = (softmax - onehot) / B; dW = x^T dlogits; db = sum dlogits */
  float dw[W_NUMEL] = {0}, db[B_NUMEL] = {0};
  for (int r = 0; r < BATCH; ++r)
    for (int c = 0; c < CLASSES; ++c) {
      float d = (probs[r][c] - (labels[r] == c ? 1.0f : 0.0f)) / BATCH;
      db[c] += d;
      for (int k = 0; k < IN; ++k)
        dw[k * CLASSES + c] += x[r * IN + k] * d;
    }
  dcrt_op_end("train_step:1", t);

  const char *nan_step = getenv("DC_TEST_NAN_GRAD_STEP");
  const char *nan_rank = getenv("DC_TEST_NAN_GRAD_RANK");
  if (nan_step && atoi(nan_step) == steps_started &&
      (nan_rank ? atoi(nan_rank) : 0) == dcrt_rank())
    dw[0] = NAN;
  check(dw, W_NUMEL, "train_step: backward (dW) at tiny_linear.c");
  check(db, B_NUMEL, "train_step: backward (db) at tiny_linear.c");

  void *grads[2] = {dw, db};
  void *reduced[2];
  dcrt_future reduce = dcrt_reduce_scatter_start(0, 2, DCRT_AVG, grads, full,
                                                 f32, local, f32, reduced);
  dcrt_wait(reduce);
  memcpy(buffers[5], reduced[0], W_LOCAL * sizeof(float));
  memcpy(buffers[6], reduced[1], B_LOCAL * sizeof(float));
  if (!getenv("DC_TEST_SKIP_END_STEP"))
    dcrt_end_step();
}
