//===- CheckpointTest.cpp - safetensors save, load and errors -------------===//
//
// A 1-rank registry saves without MPI; registries of other world sizes then
// load their slices in this one process, as the ranks of a job would.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "HostAccess.h"

#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <unistd.h>

using namespace dcrt;
using namespace dcrun;

namespace {
ParamSpec spec(int32_t id, std::string name, std::vector<int64_t> shape,
               dcrt_dtype dtype = DCRT_F32) {
  ParamSpec result;
  result.id = id;
  result.name = std::move(name);
  result.shape = std::move(shape);
  result.dtype = dtype;
  return result;
}

std::vector<ParamSpec> modelSpecs() {
  return {spec(0, "fc.weight", {4, 5}), spec(1, "fc.bias", {5}),
          spec(2, "emb", {7}, DCRT_BF16)};
}

void addAll(ParamRegistry &registry, const std::vector<ParamSpec> &specs) {
  for (const ParamSpec &s : specs)
    registry.add(s);
}

std::string tempPath(const char *name) {
  return testing::TempDir() + "dcrt-" + std::to_string(getpid()) + "-" + name;
}

/// A trained-looking 1-rank registry saved at step 7.
std::string savedCheckpoint(ParamRegistry &trained, const char *name) {
  addAll(trained, modelSpecs());
  InitOptions options;
  options.seed = 5;
  trained.initialize(options);
  for (Param &param : trained.params())
    for (int64_t i = 0; i < param.validNumel; ++i) {
      param.master[i] += 0.001f * i; // off the bf16 grid for "emb"
      param.expAvg[i] = 0.5f * i;
      param.expAvgSq[i] = 0.25f + i;
    }
  trained.refreshData();
  std::string path = tempPath(name);
  saveCheckpoint(path, trained, 7);
  return path;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string withHeader(const std::string &header) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(uint64_t(header.size()) >> (8 * i));
  return bytes + header;
}
} // namespace

TEST(Checkpoint, LoadsOntoAnyWorldSize) {
  ParamRegistry trained(0, 1);
  std::string path = savedCheckpoint(trained, "any-world.safetensors");
  for (int32_t world : {1, 2, 3}) {
    for (int32_t rank = 0; rank < world; ++rank) {
      ParamRegistry restored(rank, world);
      addAll(restored, modelSpecs());
      EXPECT_EQ(loadCheckpoint(path, restored), 7);
      for (size_t p = 0; p < restored.params().size(); ++p) {
        const Param &slice = restored.params()[p];
        const Param &full = trained.params()[p];
        for (int64_t i = 0; i < slice.validNumel; ++i) {
          int64_t at = slice.offset + i;
          // Bit-exact: the bf16 parameter comes back from its fp32 master.
          ASSERT_EQ(slice.master[i], full.master[at]) << p << " " << at;
          ASSERT_EQ(slice.expAvg[i], full.expAvg[at]);
          ASSERT_EQ(slice.expAvgSq[i], full.expAvgSq[at]);
        }
        // The artifact's view too (bf16 "emb" rounded from its master).
        int64_t elementSize = dtypeSize(slice.spec.dtype);
        EXPECT_EQ(std::memcmp(slice.data.data(),
                              full.data.as<char>() + slice.offset * elementSize,
                              slice.validNumel * elementSize),
                  0);
      }
    }
  }
}

TEST(Checkpoint, WritesStandardSafetensors) {
  ParamRegistry trained(0, 1);
  std::string bytes = readFile(savedCheckpoint(trained, "format.safetensors"));
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(headerBytes % 8, 0u);
  std::string header = bytes.substr(8, headerBytes);
  EXPECT_NE(header.find(R"("step":"7")"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("fc.weight":{"dtype":"F32","shape":[4,5],)"
                        R"("data_offsets":[0,80]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("emb":{"dtype":"BF16","shape":[7])"),
            std::string::npos);
  EXPECT_NE(header.find(R"("emb.master":{"dtype":"F32")"), std::string::npos);
  EXPECT_NE(header.find(R"("fc.bias.exp_avg_sq")"), std::string::npos);
  EXPECT_EQ(header.find("fc.weight.master"), std::string::npos);
  // fc.weight: 3 x 80 bytes, fc.bias: 3 x 20, emb: 14 + 3 x 28.
  EXPECT_EQ(bytes.size(), 8 + headerBytes + 240 + 60 + 14 + 84);
}

TEST(Checkpoint, PlainWeightsStartTheMomentsAtZero) {
  std::string path = tempPath("weights.safetensors");
  std::string header =
      R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  // 1.0 and -2.0 in half precision.
  writeFile(path, withHeader(header) + std::string("\x00\x3c\x00\xc0", 4));
  ParamRegistry registry(0, 1);
  registry.add(spec(0, "w", {2}));
  EXPECT_EQ(loadCheckpoint(path, registry), 0);
  EXPECT_EQ(registry.params()[0].master[1], -2.0f);
  EXPECT_EQ(registry.params()[0].expAvg[0], 0.0f);
}

class CheckpointErrors : public testing::Test {
protected:
  void expectLoadFails(const std::string &bytes, const std::string &message,
                       std::vector<ParamSpec> specs = modelSpecs()) {
    std::string path = tempPath("bad.safetensors");
    writeFile(path, bytes);
    ParamRegistry registry(0, 1);
    addAll(registry, specs);
    EXPECT_EXIT(loadCheckpoint(path, registry), testing::ExitedWithCode(1),
                message);
  }
};

TEST_F(CheckpointErrors, RefusesToSaveNonFiniteWeights) {
  ParamRegistry registry(0, 1);
  addAll(registry, modelSpecs());
  registry.initialize(InitOptions());
  Param &last = registry.params().back();
  last.master[1] = std::numeric_limits<float>::quiet_NaN();
  std::string path = tempPath("nan.safetensors");
  EXPECT_EXIT(saveCheckpoint(path, registry, 3), testing::ExitedWithCode(1),
              "not saving checkpoint '.*nan.safetensors' at step 3: parameter "
              "'" +
                  last.spec.name + "' is not finite at element 1");
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST_F(CheckpointErrors, MissingFile) {
  ParamRegistry registry(0, 1);
  addAll(registry, modelSpecs());
  EXPECT_EXIT(loadCheckpoint("/nonexistent/ckpt.safetensors", registry),
              testing::ExitedWithCode(1),
              "cannot open checkpoint '/nonexistent/ckpt.safetensors': No "
              "such file or directory");
}

TEST_F(CheckpointErrors, CorruptHeaders) {
  expectLoadFails("abc", "too short for a safetensors header");
  expectLoadFails(withHeader("{}").substr(0, 8) + "{",
                  "header length 2 does not fit the file");
  expectLoadFails(withHeader("{\"a\": [1,"), "header is not valid JSON");
  expectLoadFails(withHeader("[]"), "header is not a JSON object");
  expectLoadFails(withHeader(R"({"w":{"dtype":"F32","shape":[1e999]}})"),
                  "header is not valid JSON \\(.*number overflow");
  expectLoadFails(withHeader(R"({"w":{"dtype":"F64","shape":[1],)"
                             R"("data_offsets":[0,8]}})"),
                  "tensor 'w': unsupported dtype");
  expectLoadFails(withHeader(R"({"w":{"dtype":"F32","shape":[4],)"
                             R"("data_offsets":[0,16]}})"),
                  "tensor 'w': its data lies outside the file");
  expectLoadFails(withHeader(R"({"w":{"dtype":"F32","shape":[4],)"
                             R"("data_offsets":[0,12]}})") +
                      std::string(12, '\0'),
                  "tensor 'w': its data size does not match");
}

TEST_F(CheckpointErrors, MissingTensorAndShapeMismatch) {
  ParamRegistry trained(0, 1);
  std::string bytes = readFile(savedCheckpoint(trained, "good.safetensors"));
  std::vector<ParamSpec> extra = modelSpecs();
  extra.push_back(spec(3, "head", {2}));
  expectLoadFails(bytes,
                  "checkpoint '.*' has no tensor 'head' \\(parameter 3 of "
                  "the model\\)",
                  extra);
  std::vector<ParamSpec> reshaped = modelSpecs();
  reshaped[0].shape = {5, 4};
  expectLoadFails(bytes,
                  "tensor 'fc.weight' has shape \\[4,5\\], but the model's "
                  "parameter has shape \\[5,4\\]",
                  reshaped);
}

namespace {
/// `bytes` (a checkpoint) with `from` replaced by `to` in its header.
std::string rewriteHeader(const std::string &bytes, const std::string &from,
                          const std::string &to) {
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  std::string header = bytes.substr(8, headerBytes);
  size_t at = header.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << header;
  if (at != std::string::npos)
    header.replace(at, from.size(), to);
  return withHeader(header) + bytes.substr(8 + headerBytes);
}
} // namespace

// Every tensor's checksum is in the metadata; a flipped bit anywhere in the
// data is caught, by whichever rank verifies that tensor.
TEST_F(CheckpointErrors, FlippedBytesFailTheChecksum) {
  ParamRegistry trained(0, 1);
  std::string bytes = readFile(savedCheckpoint(trained, "flip.safetensors"));
  EXPECT_NE(bytes.find(R"("fnv1a64:fc.weight":")"), std::string::npos);
  std::string flipped = bytes;
  flipped.back() ^= 1; // the last byte of emb.exp_avg_sq
  expectLoadFails(flipped,
                  "corrupt checkpoint '.*': tensor 'emb.exp_avg_sq' has "
                  "checksum [0-9a-f]{16}, but the metadata says [0-9a-f]{16} "
                  "\\(its bytes changed since it was saved\\)");
  // Rank 2 of 3 verifies the third tensor in name order (emb, emb.exp_avg,
  // emb.exp_avg_sq, ...); ranks 0 and 1 read their slices of it unharmed.
  std::string path = tempPath("flip-ranks.safetensors");
  writeFile(path, flipped);
  for (int rank = 0; rank < 3; ++rank) {
    ParamRegistry registry(rank, 3);
    addAll(registry, modelSpecs());
    if (rank == 2)
      EXPECT_EXIT(loadCheckpoint(path, registry), testing::ExitedWithCode(1),
                  "tensor 'emb.exp_avg_sq' has checksum");
    else
      EXPECT_EQ(loadCheckpoint(path, registry), 7);
  }
}

TEST_F(CheckpointErrors, OverlappingTensors) {
  ParamRegistry trained(0, 1);
  std::string bytes = readFile(savedCheckpoint(trained, "overlap.safetensors"));
  // fc.weight.exp_avg read from fc.weight's own bytes.
  expectLoadFails(rewriteHeader(bytes, "[80,160]", "[0,80]"),
                  "corrupt checkpoint '.*': tensors 'fc.weight' and "
                  "'fc.weight.exp_avg' overlap in the file \\(data_offsets\\)");
}

TEST_F(CheckpointErrors, UnknownTensorsAndMetadata) {
  ParamRegistry trained(0, 1);
  std::string bytes = readFile(savedCheckpoint(trained, "meta.safetensors"));
  // A tensor no parameter takes: a checkpoint of another model.
  std::vector<ParamSpec> fewer = modelSpecs();
  fewer.pop_back();
  expectLoadFails(bytes,
                  "checkpoint '.*' has tensor 'emb', which is neither a "
                  "parameter of the model nor its optimizer state",
                  fewer);
  expectLoadFails(
      rewriteHeader(bytes, R"("optimizer":"adamw")", R"("optimizer":"sgd")"),
      "corrupt checkpoint '.*': its optimizer state is \"sgd\"'s, "
      "but dc-run has only adamw");
  expectLoadFails(rewriteHeader(bytes, R"("step":"7",)", ""),
                  "a dc checkpoint without metadata \"step\"");
  expectLoadFails(
      rewriteHeader(bytes, R"("step":"7")", R"("step":"99999999999999999999")"),
      "metadata \"step\" is \"99999999999999999999\", not a step "
      "count \\(0 to 9223372036854775807\\)");
  expectLoadFails(rewriteHeader(bytes, R"("step":"7")", R"("step":"-1")"),
                  "metadata \"step\" is \"-1\", not a step count");
}

// --init: a dc checkpoint's weights load onto any world size, its step and
// AdamW moments do not (training starts over from those weights).
TEST(Checkpoint, InitialWeightsTakeOnlyTheWeights) {
  ParamRegistry trained(0, 1);
  std::string path = savedCheckpoint(trained, "init.safetensors");
  for (int32_t rank = 0; rank < 2; ++rank) {
    ParamRegistry restored(rank, 2);
    addAll(restored, modelSpecs());
    loadInitialWeights(path, restored);
    for (size_t p = 0; p < restored.params().size(); ++p) {
      const Param &slice = restored.params()[p];
      const Param &full = trained.params()[p];
      for (int64_t i = 0; i < slice.validNumel; ++i) {
        ASSERT_EQ(slice.master[i], full.master[slice.offset + i]);
        ASSERT_EQ(slice.expAvg[i], 0.0f);
        ASSERT_EQ(slice.expAvgSq[i], 0.0f);
      }
    }
  }
  ParamRegistry other(0, 1);
  addAll(other, {spec(0, "fc.weight", {5, 4})});
  EXPECT_EXIT(loadInitialWeights(path, other), testing::ExitedWithCode(1),
              "weights file '.*init.safetensors': tensor 'fc.weight' has "
              "shape \\[4,5\\]");
}

// --save-grads writes each gradient in its dtype under the parameter's name:
// read back as weights, the values are the gradients.
TEST(Checkpoint, SavesTheGradients) {
  std::vector<ParamSpec> specs = modelSpecs();
  for (ParamSpec &s : specs) {
    s.hasGrad = true;
    s.gradDtype = s.dtype;
  }
  ParamRegistry registry(0, 1);
  addAll(registry, specs);
  for (Param &param : registry.params()) {
    std::vector<float> values(param.validNumel);
    for (int64_t i = 0; i < param.validNumel; ++i)
      values[i] = 0.25f * static_cast<float>(i) - 1.0f; // exact in bf16
    writeFromHost(param.grad,
                  param.validNumel * dtypeSize(param.spec.gradDtype),
                  [&](void *host) {
                    convert(values.data(), DCRT_F32, host, param.spec.gradDtype,
                            param.validNumel);
                  });
  }
  std::string path = tempPath("grads.safetensors");
  saveGradients(path, registry, 1);
  EXPECT_NE(readFile(path).find("\"format\":\"dc-gradients\""),
            std::string::npos);
  ParamRegistry loaded(0, 1);
  addAll(loaded, modelSpecs());
  loadInitialWeights(path, loaded);
  for (const Param &param : loaded.params())
    for (int64_t i = 0; i < param.validNumel; ++i)
      ASSERT_EQ(param.master[i], 0.25f * static_cast<float>(i) - 1.0f)
          << param.spec.name << " " << i;
}
