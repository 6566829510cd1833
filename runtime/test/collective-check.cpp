//===- collective-check.cpp - every collective, on any backend ------------===//
//
// `collective-check OUT_PREFIX` runs each operation of the ABI once on
// deterministic inputs, in the backend's device memory, and writes every
// output to OUT_PREFIX.rank<R>.bin (a sequence of named records). Run once
// with DCRT_BACKEND=host and once with DCRT_BACKEND=cuda on the same number
// of ranks, then compare-collectives.py checks the cuda results against the
// host backend's: bit-exact for gathers, all-to-all and copies; sums within
// fp32 rounding. It also checks on its own what it can (each gathered
// tensor is the full tensor), so a run on one backend is a test too.
//
// `collective-check OUT_PREFIX --fault=die` makes the last rank exit before
// the first gather, `--fault=bad-argument` makes it pass a null buffer: the
// job must end on every rank with a message, within the timeout.
//
//===----------------------------------------------------------------------===//
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace dcrt;

namespace {
int world() { return dcrt_world_size(); }
int rank() { return dcrt_rank(); }
int64_t slotOf(int64_t full) { return (full + world() - 1) / world(); }

/// A value of element `i` of tensor `id`, the same on every rank: exact in
/// bf16 for small integers, fractional otherwise.
float valueOf(int id, int64_t i) {
  return static_cast<float>((i * 7 + id * 13) % 251) * 0.25f - 31.0f;
}

/// Host data copied into a fresh device buffer.
Buffer toDevice(const void *host, int64_t bytes, const char *what) {
  Buffer buffer(bytes, MemoryKind::Device, what);
  copy(buffer.data(), host, bytes);
  return buffer;
}

std::vector<char> toHost(const void *device, int64_t bytes) {
  std::vector<char> host(bytes);
  copy(host.data(), device, bytes);
  return host;
}

/// Records "name\0" + int64 size + bytes.
class Recorder {
public:
  explicit Recorder(const std::string &path)
      : file(std::fopen(path.c_str(), "wb")) {
    if (!file)
      fatal("cannot write %s", path.c_str());
  }
  ~Recorder() { std::fclose(file); }
  void add(const std::string &name, const std::vector<char> &bytes) {
    std::fwrite(name.c_str(), 1, name.size() + 1, file);
    int64_t size = static_cast<int64_t>(bytes.size());
    std::fwrite(&size, sizeof(size), 1, file);
    std::fwrite(bytes.data(), 1, bytes.size(), file);
  }

private:
  FILE *file;
};

int failures = 0;
std::string fault;

/// The injected failure, on the last rank only.
void maybeFail(void **buffer) {
  if (rank() != world() - 1 || fault.empty())
    return;
  if (fault == "die") {
    std::fprintf(stderr, "collective-check: rank %d exits on purpose\n",
                 rank());
    std::fflush(stderr);
    std::_Exit(3);
  }
  if (fault == "bad-argument")
    *buffer = nullptr;
}
void expect(bool condition, const char *what, int64_t index) {
  if (!condition && failures++ < 10)
    std::fprintf(stderr, "collective-check: rank %d: %s wrong at %lld\n",
                 rank(), what, static_cast<long long>(index));
}

/// A grouped gather of three tensors (f32 master shards to bf16, f32 to
/// f32, and one whose last slot is padded), twice: once fused, once alone.
void checkGathers(Recorder &out) {
  const int64_t fulls[3] = {4096 * 3 + 5, 33, 1000003};
  const int32_t src[3] = {DCRT_F32, DCRT_F32, DCRT_BF16};
  const int32_t dst[3] = {DCRT_BF16, DCRT_F32, DCRT_BF16};
  std::vector<Buffer> shards;
  void *shardPointers[3];
  int64_t local[3];
  for (int t = 0; t < 3; ++t) {
    local[t] = slotOf(fulls[t]);
    std::vector<float> slot(local[t], 0.0f);
    for (int64_t j = 0; j < local[t]; ++j) {
      int64_t i = rank() * local[t] + j;
      slot[j] = i < fulls[t] ? valueOf(t, i) : 0.0f;
    }
    std::vector<char> typed(local[t] * dtypeSize(src[t]));
    convert(slot.data(), DCRT_F32, typed.data(), src[t], local[t]);
    shards.push_back(toDevice(typed.data(), typed.size(), "a shard"));
    shardPointers[t] = shards.back().data();
  }
  void *full[3];
  maybeFail(&shardPointers[1]); // f32 -> f32: straight to NCCL
  dcrt_wait(
      dcrt_gather_start(0, 3, shardPointers, local, fulls, src, dst, full));
  for (int t = 0; t < 3; ++t) {
    std::vector<char> bytes = toHost(full[t], fulls[t] * dtypeSize(dst[t]));
    for (int64_t i = 0; i < fulls[t]; ++i) {
      float expected = valueOf(t, i);
      if (dst[t] == DCRT_BF16)
        expected = bf16ToFloat(floatToBF16(expected));
      expect(loadAsDouble(bytes.data(), dst[t], i) == expected, "a gather", i);
    }
    out.add("gather" + std::to_string(t), bytes);
    dcrt_release(full[t]);
  }
  dcrt_end_step();
}

/// One bucket of three gradients reduced with `op`: `mixed` casts (bf16 ->
/// f32, f32 -> bf16: an fp32 bucket), else bf16 gradients into bf16 shards
/// (reduced in bf16 on the cuda backend); one size the ranks do not divide.
void checkReduceScatter(Recorder &out, int32_t op, bool mixed) {
  const int64_t fulls[3] = {1000, 4096 * 5 + 3, 7};
  const int32_t mixedGrads[3] = {DCRT_BF16, DCRT_F32, DCRT_F32};
  const int32_t mixedShards[3] = {DCRT_F32, DCRT_F32, DCRT_BF16};
  const int32_t sameTypes[3] = {DCRT_BF16, DCRT_BF16, DCRT_BF16};
  const int32_t *gradType = mixed ? mixedGrads : sameTypes;
  const int32_t *shardType = mixed ? mixedShards : sameTypes;
  std::vector<Buffer> grads;
  void *gradPointers[3];
  int64_t local[3];
  for (int t = 0; t < 3; ++t) {
    local[t] = slotOf(fulls[t]);
    std::vector<float> values(fulls[t]);
    for (int64_t i = 0; i < fulls[t]; ++i)
      values[i] = valueOf(t + 10, i) * float(rank() + 1);
    std::vector<char> typed(fulls[t] * dtypeSize(gradType[t]));
    convert(values.data(), DCRT_F32, typed.data(), gradType[t], fulls[t]);
    grads.push_back(toDevice(typed.data(), typed.size(), "a gradient"));
    gradPointers[t] = grads.back().data();
  }
  void *shards[3];
  dcrt_wait(dcrt_reduce_scatter_start(0, 3, op, gradPointers, fulls, gradType,
                                      local, shardType, shards));
  for (int t = 0; t < 3; ++t)
    out.add(std::string(op == DCRT_AVG ? "avg" : "sum") + "-scatter" +
                std::to_string(t) + (mixed ? "" : "-bf16"),
            toHost(shards[t], local[t] * dtypeSize(shardType[t])));
  dcrt_end_step();
}

void checkAllReduce(Recorder &out) {
  const int64_t n = 12345;
  const int32_t types[3] = {DCRT_F32, DCRT_BF16, DCRT_I32};
  for (int32_t type : types) {
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = std::floor(valueOf(20, i)) + rank();
    std::vector<char> typed(n * dtypeSize(type));
    if (type == DCRT_I32)
      for (int64_t i = 0; i < n; ++i)
        reinterpret_cast<int32_t *>(typed.data())[i] =
            static_cast<int32_t>(values[i]);
    else
      convert(values.data(), DCRT_F32, typed.data(), type, n);
    Buffer input = toDevice(typed.data(), typed.size(), "an all-reduce input");
    void *result;
    int32_t op = type == DCRT_I32 ? DCRT_SUM : DCRT_AVG;
    dcrt_wait(dcrt_all_reduce_start(0, op, input.data(), n, type, &result));
    out.add(std::string("all-reduce-") + dtypeName(type),
            toHost(result, n * dtypeSize(type)));
    dcrt_end_step();
  }
}

void checkAllToAll(Recorder &out) {
  // [2 * world, 3, 4 * world, 5] bf16: split dim 2, concat dim 0.
  std::vector<int64_t> shape = {2 * world(), 3, 4 * world(), 5};
  int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = valueOf(30 + rank(), i);
  std::vector<char> typed(n * 2);
  convert(values.data(), DCRT_F32, typed.data(), DCRT_BF16, n);
  Buffer input = toDevice(typed.data(), typed.size(), "an all-to-all input");
  Buffer output(n * 2, MemoryKind::Device, "an all-to-all output");
  dcrt_wait(dcrt_all_to_all_start(0, input.data(), output.data(), 4,
                                  shape.data(), 2, 0, DCRT_BF16));
  out.add("all-to-all", toHost(output.data(), n * 2));
  dcrt_end_step();
}

void checkCopies(Recorder &out) {
  const int64_t bytes = (int64_t(1) << 20) + 12;
  std::vector<char> pattern(bytes);
  for (int64_t i = 0; i < bytes; ++i)
    pattern[i] = static_cast<char>((i * 31 + rank()) & 0xff);
  Buffer activation = toDevice(pattern.data(), bytes, "an activation");
  void *host;
  dcrt_future offload = dcrt_offload_start(activation.data(), bytes, &host);
  dcrt_wait(offload);
  Buffer back(bytes, MemoryKind::Device, "a reload destination");
  dcrt_wait(dcrt_reload_into(host, bytes, back.data()));
  std::vector<char> reloaded = toHost(back.data(), bytes);
  expect(reloaded == pattern, "an offload/reload round trip", 0);
  out.add("reload", reloaded);

  Buffer pinned(bytes, MemoryKind::Host, "a host-resident shard");
  std::memcpy(pinned.data(), pattern.data(), bytes);
  Buffer uploaded(bytes, MemoryKind::Device, "an upload destination");
  dcrt_wait(dcrt_upload_into(pinned.data(), bytes, uploaded.data()));
  std::vector<char> copied = toHost(uploaded.data(), bytes);
  expect(copied == pattern, "an upload", 0);
  out.add("upload", copied);
  dcrt_end_step();
}
} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strncmp(argv[2], "--fault=", 8) == 0)
    fault = argv[2] + 8;
  else if (argc != 2) {
    std::fprintf(stderr, "usage: collective-check OUT_PREFIX "
                         "[--fault=die|bad-argument]\n");
    return 2;
  }
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.device = -1;
  dcrt_init(&options);
  {
    Recorder out(std::string(argv[1]) + ".rank" + std::to_string(rank()) +
                 ".bin");
    checkGathers(out);
    if (!fault.empty()) // the job should have ended in the gather
      fatal("the injected fault '%s' did not end the job", fault.c_str());
    for (bool mixed : {true, false}) {
      checkReduceScatter(out, DCRT_SUM, mixed);
      checkReduceScatter(out, DCRT_AVG, mixed);
    }
    checkAllReduce(out);
    checkAllToAll(out);
    checkCopies(out);
    synchronize();
  }
  if (rank() == 0)
    std::printf("collective-check: %s backend, %d ranks: %s\n",
                dcrt_backend_name(), world(), failures ? "FAILED" : "ok");
  dcrt_finalize();
  return failures ? 1 : 0;
}
