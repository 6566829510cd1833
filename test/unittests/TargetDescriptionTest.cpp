//===- TargetDescriptionTest.cpp - presets, JSON targets ------------------===//
#include "AnalysisTestUtils.h"

#include "dc/Target/TargetDescription.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

//===----------------------------------------------------------------------===//
// Target descriptions
//===----------------------------------------------------------------------===//

void expectSameTarget(const TargetDescription &a, const TargetDescription &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.lowering, b.lowering);
  EXPECT_EQ(a.matmulFlops16, b.matmulFlops16);
  EXPECT_EQ(a.matmulFlops32, b.matmulFlops32);
  EXPECT_EQ(a.attentionFlops16, b.attentionFlops16);
  EXPECT_EQ(a.vectorFlops, b.vectorFlops);
  EXPECT_EQ(a.memoryBandwidth, b.memoryBandwidth);
  EXPECT_EQ(a.opLaunchLatency, b.opLaunchLatency);
  EXPECT_EQ(a.collectiveLatency, b.collectiveLatency);
  EXPECT_EQ(a.collectiveBusBandwidth, b.collectiveBusBandwidth);
  EXPECT_EQ(a.hostLinkBandwidth, b.hostLinkBandwidth);
  EXPECT_EQ(a.hostLinkDuplexBandwidth, b.hostLinkDuplexBandwidth);
  EXPECT_EQ(a.hostLinkPlanningBandwidth, b.hostLinkPlanningBandwidth);
  EXPECT_EQ(a.copyComputeSlowdown, b.copyComputeSlowdown);
  EXPECT_EQ(a.hostLinkLatency, b.hostLinkLatency);
  EXPECT_EQ(a.deviceMemoryBytes, b.deviceMemoryBytes);
  EXPECT_EQ(a.gpusPerNode, b.gpusPerNode);
  EXPECT_EQ(a.multiprocessors, b.multiprocessors);
  EXPECT_EQ(a.sharedMemoryPerBlock, b.sharedMemoryPerBlock);
  EXPECT_EQ(a.foldsFills, b.foldsFills);
  EXPECT_EQ(a.foldsHeadTransposes, b.foldsHeadTransposes);
  EXPECT_EQ(a.networkBandwidth, b.networkBandwidth);
  EXPECT_EQ(a.networkLatency, b.networkLatency);
  auto sameCurve = [](const std::vector<BandwidthPoint> &x,
                      const std::vector<BandwidthPoint> &y) {
    return x.size() == y.size() &&
           std::equal(x.begin(), x.end(), y.begin(), [](auto &p, auto &q) {
             return p.bytes == q.bytes && p.busBandwidth == q.busBandwidth;
           });
  };
  EXPECT_TRUE(sameCurve(a.allGatherCurve, b.allGatherCurve));
  EXPECT_TRUE(sameCurve(a.reduceScatterCurve, b.reduceScatterCurve));
}

TEST(TargetDescriptionTest, PresetsHoldTheMeasuredNumbers) {
  TargetDescription h200 = cantFail(TargetDescription::getPreset("h200"));
  EXPECT_EQ(h200.matmulFlops16, 750e12);
  EXPECT_EQ(h200.attentionFlops16, 350e12);
  EXPECT_EQ(h200.memoryBandwidth, 4.0e12);
  EXPECT_EQ(h200.deviceMemoryBytes, 139 * kGiB);
  ASSERT_EQ(h200.allGatherCurve.size(), 4u);
  EXPECT_EQ(h200.allGatherCurve[1].bytes, 16 * kMiB);
  EXPECT_EQ(h200.allGatherCurve[1].busBandwidth, 146e9);
  EXPECT_EQ(h200.reduceScatterCurve.size(), 4u);
  EXPECT_EQ(h200.hostLinkBandwidth, 55e9);
  EXPECT_EQ(h200.hostLinkDuplexBandwidth, 49.4e9);
  // One HGX node: 8 GPUs, no network.
  EXPECT_EQ(h200.gpusPerNode, 8);
  EXPECT_EQ(h200.networkBandwidth, 0.0);
  // dc-map-to-gpu folds fills into the kernels after them; the CPU backend
  // runs each.
  EXPECT_TRUE(h200.foldsFills);
  // cuDNN's attention reads and writes [B, S, H, D] in place; the CPU
  // backend expands attention over [B, H, S, D].
  EXPECT_TRUE(h200.foldsHeadTransposes);
  EXPECT_EQ(h200.lowering, Lowering::CudaSm90);
  EXPECT_EQ(h200.multiprocessors, 132);
  EXPECT_EQ(h200.sharedMemoryPerBlock, 48 * 1024);
  TargetDescription cpu = cantFail(TargetDescription::getPreset("cpu"));
  EXPECT_EQ(cpu.lowering, Lowering::Host);
  EXPECT_EQ(cpu.multiprocessors, 0);
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_TRUE(cpu.allGatherCurve.empty());
  EXPECT_EQ(cpu.gpusPerNode, 0);
  EXPECT_FALSE(cpu.foldsFills);
  EXPECT_FALSE(cpu.foldsHeadTransposes);

  // Clusters: the node's numbers plus 400 Gb/s per GPU between nodes.
  TargetDescription h200Cluster =
      cantFail(TargetDescription::getPreset("h200-cluster"));
  EXPECT_EQ(h200Cluster.name, "h200-cluster");
  EXPECT_EQ(h200Cluster.matmulFlops16, 750e12);
  EXPECT_EQ(h200Cluster.gpusPerNode, 8);
  EXPECT_EQ(h200Cluster.networkBandwidth, 46e9);
  EXPECT_EQ(h200Cluster.networkLatency, 10e-6);
  TargetDescription h100 =
      cantFail(TargetDescription::getPreset("h100-cluster"));
  EXPECT_EQ(h100.memoryBandwidth, 2.8e12);
  EXPECT_EQ(h100.deviceMemoryBytes, 79 * kGiB);
  EXPECT_EQ(h100.networkBandwidth, 46e9);
  // One node of H100s: the cluster's GPU without the network.
  TargetDescription h100Node = cantFail(TargetDescription::getPreset("h100"));
  EXPECT_EQ(h100Node.name, "h100");
  EXPECT_EQ(h100Node.memoryBandwidth, 2.8e12);
  EXPECT_EQ(h100Node.deviceMemoryBytes, 79 * kGiB);
  EXPECT_EQ(h100Node.gpusPerNode, 8);
  EXPECT_EQ(h100Node.networkBandwidth, 0.0);
  // The same sm_90 GPU in nodes of 8.
  EXPECT_EQ(h200Cluster.lowering, Lowering::CudaSm90);
  EXPECT_EQ(h100.lowering, Lowering::CudaSm90);
  EXPECT_EQ(h100Node.lowering, Lowering::CudaSm90);
  EXPECT_EQ(h100Node.multiprocessors, 132);

  // Members of a group per node: a 4 x 8 grid on 8-GPU nodes.
  EXPECT_EQ(h200Cluster.membersPerNode(8, 1), 8);  // axis 1: one node
  EXPECT_EQ(h200Cluster.membersPerNode(4, 8), 1);  // axis 0: across nodes
  EXPECT_EQ(h200Cluster.membersPerNode(32, 1), 8); // 1-D over 4 nodes
  EXPECT_EQ(h200Cluster.membersPerNode(4, 2), 4);  // 16 x 4 x 2, axis 1
  EXPECT_EQ(cpu.membersPerNode(64, 1), 64);

  EXPECT_EQ(errorText(TargetDescription::getPreset("tpu").takeError()),
            "unknown target preset 'tpu' (presets: h100, h200, h100-cluster, "
            "h200-cluster, cpu)");
}

TEST(TargetDescriptionTest, JSONRoundTripsAndStartsFromABase) {
  for (llvm::StringRef preset :
       {"h100", "h200", "h200-cluster", "h100-cluster", "cpu"}) {
    TargetDescription original = cantFail(TargetDescription::getPreset(preset));
    llvm::Expected<TargetDescription> parsed =
        TargetDescription::fromJSON(original.toJSON());
    ASSERT_TRUE(bool(parsed)) << errorText(parsed.takeError());
    expectSameTarget(*parsed, original);
  }

  llvm::Expected<TargetDescription> slower = TargetDescription::fromJSON(R"({
    "base": "h200", "name": "h200-slow", "matmulFlops16": 5e14,
    "allGatherCurve": [{"bytes": 1024, "busBandwidth": 1e9}]
  })");
  ASSERT_TRUE(bool(slower)) << errorText(slower.takeError());
  EXPECT_EQ(slower->name, "h200-slow");
  EXPECT_EQ(slower->matmulFlops16, 5e14);
  EXPECT_EQ(slower->matmulFlops32, 60e12); // from the base
  ASSERT_EQ(slower->allGatherCurve.size(), 1u);
  EXPECT_EQ(slower->reduceScatterCurve.size(), 4u); // from the base

  llvm::Expected<TargetDescription> cluster = TargetDescription::fromJSON(R"({
    "base": "h200", "name": "h200-x4", "gpusPerNode": 4,
    "networkBandwidth": 25e9, "networkLatency": 5e-6
  })");
  ASSERT_TRUE(bool(cluster)) << errorText(cluster.takeError());
  EXPECT_EQ(cluster->gpusPerNode, 4);
  EXPECT_EQ(cluster->networkBandwidth, 25e9);
  EXPECT_EQ(cluster->networkLatency, 5e-6);
  EXPECT_TRUE(cluster->foldsFills); // from the base
  EXPECT_EQ(cluster->lowering, Lowering::CudaSm90);
  EXPECT_TRUE(cluster->foldsHeadTransposes);

  llvm::Expected<TargetDescription> unfolded =
      TargetDescription::fromJSON(R"({"base": "h200", "foldsFills": false,
                                      "foldsHeadTransposes": false})");
  ASSERT_TRUE(bool(unfolded)) << errorText(unfolded.takeError());
  EXPECT_FALSE(unfolded->foldsFills);
  EXPECT_FALSE(unfolded->foldsHeadTransposes);
}

TEST(TargetDescriptionTest, PlannersCostCopiesAtThePlanningRate) {
  TargetDescription h200 = cantFail(TargetDescription::getPreset("h200"));
  EXPECT_EQ(h200.hostLinkPlanningBandwidth, 50e9);
  TargetDescription planning = h200.forPlanning();
  EXPECT_EQ(planning.hostLinkBandwidth, 50e9);
  // Both directions at once slow down by the same factor.
  EXPECT_DOUBLE_EQ(planning.hostLinkDuplexBandwidth, 49.4e9 * 50.0 / 55.0);
  EXPECT_EQ(planning.hostLinkPlanningBandwidth, 0.0);
  // Nothing else changes.
  planning.hostLinkBandwidth = h200.hostLinkBandwidth;
  planning.hostLinkDuplexBandwidth = h200.hostLinkDuplexBandwidth;
  planning.hostLinkPlanningBandwidth = h200.hostLinkPlanningBandwidth;
  expectSameTarget(planning, h200);

  // Unset (the CPU preset), or not slower than the typical rate (a JSON
  // target that lowers hostLinkBandwidth below its base's planning rate):
  // the planners use the typical rate.
  TargetDescription cpu = cantFail(TargetDescription::getPreset("cpu"));
  EXPECT_EQ(cpu.forPlanning().hostLinkBandwidth, cpu.hostLinkBandwidth);
  TargetDescription slowLink = cantFail(TargetDescription::fromJSON(
      R"({"base": "h200", "hostLinkBandwidth": 20e9})"));
  EXPECT_EQ(slowLink.forPlanning().hostLinkBandwidth, 20e9);
  EXPECT_EQ(slowLink.forPlanning().hostLinkDuplexBandwidth, 49.4e9);
  TargetDescription typical = cantFail(TargetDescription::fromJSON(
      R"({"base": "h200", "hostLinkPlanningBandwidth": 0})"));
  EXPECT_EQ(typical.forPlanning().hostLinkBandwidth, 55e9);
}

TEST(TargetDescriptionTest, CopiesSlowComputeOnTheGPUPresets) {
  // Measured on the H200 (1.5% per direction); the host backend's copies
  // are memcpy on the CPU that computes, not priced.
  EXPECT_EQ(cantFail(TargetDescription::getPreset("h200")).copyComputeSlowdown,
            0.015);
  EXPECT_EQ(cantFail(TargetDescription::getPreset("cpu")).copyComputeSlowdown,
            0.0);
  TargetDescription off = cantFail(TargetDescription::fromJSON(
      R"({"base": "h200", "copyComputeSlowdown": 0})"));
  EXPECT_EQ(off.copyComputeSlowdown, 0.0);
  // Planning keeps it (only the link rate has a planning value).
  EXPECT_EQ(cantFail(TargetDescription::getPreset("h200"))
                .forPlanning()
                .copyComputeSlowdown,
            0.015);
}

TEST(TargetDescriptionTest, JSONErrorsSayWhatIsWrong) {
  auto errorOf = [](llvm::StringRef text) {
    llvm::Expected<TargetDescription> target =
        TargetDescription::fromJSON(text);
    return target ? std::string("(no error)") : errorText(target.takeError());
  };
  EXPECT_EQ(errorOf(R"({"base": "h200", "matmulFlop16": 1, "zzz": 2})"),
            "unknown fields \"matmulFlop16\", \"zzz\" in target description");
  EXPECT_EQ(errorOf(R"({"base": "gpu"})"),
            "unknown target preset 'gpu' (presets: h100, h200, h100-cluster, "
            "h200-cluster, cpu)");
  std::string missing = errorOf(R"({"name": "x", "matmulFlops16": 1e12})");
  EXPECT_NE(missing.find("missing fields \"matmulFlops32\", \"vectorFlops\""),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("\"deviceMemoryBytes\""), std::string::npos)
      << missing;
  EXPECT_EQ(errorOf(R"({"base": "cpu", "memoryBandwidth": "fast"})"),
            "field \"memoryBandwidth\" must be a number");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "memoryBandwidth": -1})"),
            "field \"memoryBandwidth\" must be positive");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "hostLinkLatency": -1e-6})"),
            "field \"hostLinkLatency\" must be non-negative");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "allGatherCurve": [
              {"bytes": 2048, "busBandwidth": 1e9},
              {"bytes": 1024, "busBandwidth": 2e9}]})"),
            "allGatherCurve[1].bytes must be larger than the previous "
            "point's (points in increasing size)");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "reduceScatterCurve": [
              {"bytes": 2048, "bw": 1e9}]})"),
            "unknown field \"bw\" in reduceScatterCurve[0]");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "foldsFills": 1})"),
            "field \"foldsFills\" must be true or false");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "foldsHeadTransposes": "yes"})"),
            "field \"foldsHeadTransposes\" must be true or false");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "gpusPerNode": -8})"),
            "field \"gpusPerNode\" must be a non-negative integer (0: one "
            "node)");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "gpusPerNode": 7.5})"),
            "field \"gpusPerNode\" must be a non-negative integer (0: one "
            "node)");
  EXPECT_EQ(errorOf(R"({"base": "h200", "lowering": "tpu"})"),
            "field \"lowering\" must be \"host\" or \"cuda_sm90\"");
  EXPECT_EQ(errorOf(R"({"base": "h200", "multiprocessors": -1})"),
            "field \"multiprocessors\" must be a non-negative integer (0: no "
            "GPU)");
  EXPECT_EQ(errorOf(R"({"base": "h200", "hostLinkPlanningBandwidth": -1})"),
            "field \"hostLinkPlanningBandwidth\" must be non-negative");
  EXPECT_EQ(errorOf(R"({"base": "h200", "networkBandwidth": -1})"),
            "field \"networkBandwidth\" must be non-negative");
  EXPECT_EQ(errorOf(R"({"base": "h200", "copyComputeSlowdown": -0.1})"),
            "field \"copyComputeSlowdown\" must be non-negative");
  EXPECT_EQ(errorOf(R"({"base": "h200", "copyComputeSlowdown": 1.5})"),
            "field \"copyComputeSlowdown\" must be a fraction below 1 "
            "(0.015: compute 1.5% slower per copy direction)");
  EXPECT_EQ(errorOf("[1, 2]"), "a target description must be a JSON object");
  EXPECT_EQ(errorOf("{").rfind("invalid JSON: ", 0), 0u);
}

TEST(TargetDescriptionTest, LoadTakesAPresetOrAFile) {
  EXPECT_EQ(cantFail(TargetDescription::load("cpu")).name, "cpu");
  std::string missing =
      errorText(TargetDescription::load("/no/such/target.json").takeError());
  EXPECT_EQ(missing, "unknown target '/no/such/target.json': neither a "
                     "preset (h100, h200, h100-cluster, h200-cluster, cpu) "
                     "nor an existing file");

  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("dc-target", "json", path));
  llvm::FileRemover remover(path);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << R"({"base": "h200", "name": "mine", "deviceMemoryBytes": 1073741824})";
  }
  llvm::Expected<TargetDescription> mine = TargetDescription::load(path);
  ASSERT_TRUE(bool(mine)) << errorText(mine.takeError());
  EXPECT_EQ(mine->name, "mine");
  EXPECT_EQ(mine->deviceMemoryBytes, kGiB);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"base": "h200", "typo": 1})";
  }
  EXPECT_EQ(errorText(TargetDescription::load(path).takeError()),
            (path + ": unknown field \"typo\" in target description").str());
}

} // namespace
