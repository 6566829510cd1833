//===- TargetDescription.cpp - presets and the JSON form ------------------===//
#include "dc/Target/TargetDescription.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace dc;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;

static Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {
/// A field holding a double; `mayBeZero` for latencies.
struct NumberField {
  llvm::StringLiteral name;
  double TargetDescription::*member;
  bool mayBeZero;
};
struct CurveField {
  llvm::StringLiteral name;
  std::vector<BandwidthPoint> TargetDescription::*member;
};
} // namespace

static const NumberField kNumberFields[] = {
    {"matmulFlops16", &TargetDescription::matmulFlops16, false},
    {"matmulFlops32", &TargetDescription::matmulFlops32, false},
    {"attentionFlops16", &TargetDescription::attentionFlops16, true},
    {"vectorFlops", &TargetDescription::vectorFlops, false},
    {"memoryBandwidth", &TargetDescription::memoryBandwidth, false},
    {"opLaunchLatency", &TargetDescription::opLaunchLatency, true},
    {"collectiveLatency", &TargetDescription::collectiveLatency, true},
    {"collectiveBusBandwidth", &TargetDescription::collectiveBusBandwidth,
     false},
    {"hostLinkBandwidth", &TargetDescription::hostLinkBandwidth, false},
    {"hostLinkLatency", &TargetDescription::hostLinkLatency, true},
    {"hostLinkDuplexBandwidth", &TargetDescription::hostLinkDuplexBandwidth,
     true},
    {"hostLinkPlanningBandwidth", &TargetDescription::hostLinkPlanningBandwidth,
     true},
    {"copyComputeSlowdown", &TargetDescription::copyComputeSlowdown, true},
    {"networkBandwidth", &TargetDescription::networkBandwidth, true},
    {"networkLatency", &TargetDescription::networkLatency, true},
};
/// Fields a description without "base" may leave out: their zero means
/// "none" (no separate rate, no slowdown, no network).
static bool isOptionalField(double TargetDescription::*member) {
  return member == &TargetDescription::hostLinkDuplexBandwidth ||
         member == &TargetDescription::hostLinkPlanningBandwidth ||
         member == &TargetDescription::copyComputeSlowdown ||
         member == &TargetDescription::attentionFlops16 ||
         member == &TargetDescription::networkBandwidth ||
         member == &TargetDescription::networkLatency;
}
static const CurveField kCurveFields[] = {
    {"allGatherCurve", &TargetDescription::allGatherCurve},
    {"reduceScatterCurve", &TargetDescription::reduceScatterCurve},
};
static constexpr llvm::StringLiteral kDeviceMemoryField = "deviceMemoryBytes";
static constexpr llvm::StringLiteral kLoweringField = "lowering";
/// The GPU's shape: optional, 0 on the host.
struct CountField {
  llvm::StringLiteral name;
  int64_t TargetDescription::*member;
  /// What 0 means.
  llvm::StringLiteral zero;
};
static const CountField kCountFields[] = {
    {"gpusPerNode", &TargetDescription::gpusPerNode, "one node"},
    {"multiprocessors", &TargetDescription::multiprocessors, "no GPU"},
    {"sharedMemoryPerBlock", &TargetDescription::sharedMemoryPerBlock,
     "no GPU"},
};
/// What the target's lowering folds away: true or false in JSON.
struct BoolField {
  llvm::StringLiteral name;
  bool TargetDescription::*member;
};
static const BoolField kBoolFields[] = {
    {"foldsFills", &TargetDescription::foldsFills},
    {"foldsHeadTransposes", &TargetDescription::foldsHeadTransposes},
};
static constexpr llvm::StringLiteral kPresetNames =
    "h100, h200, h100-cluster, h200-cluster, cpu";

StringRef dc::stringifyLowering(Lowering lowering) {
  switch (lowering) {
  case Lowering::Host:
    return "host";
  case Lowering::CudaSm90:
    return "cuda_sm90";
  }
  llvm_unreachable("a Lowering without a spelling");
}

std::optional<Lowering> dc::symbolizeLowering(StringRef text) {
  if (text == "host")
    return Lowering::Host;
  if (text == "cuda_sm90")
    return Lowering::CudaSm90;
  return std::nullopt;
}

static constexpr int64_t kMiB = int64_t(1) << 20;
static constexpr int64_t kGiB = int64_t(1) << 30;

/// One HGX node of H200s (NVLink NV18); docs/cost-model.md explains each
/// number (the h200 preset; "Where the presets' numbers come from" records
/// the measurements).
static TargetDescription makeH200() {
  TargetDescription target;
  target.name = "h200";
  target.lowering = Lowering::CudaSm90;
  target.matmulFlops16 = 750e12;
  target.matmulFlops32 = 60e12;
  target.attentionFlops16 = 350e12;
  target.vectorFlops = 60e12;
  target.memoryBandwidth = 4.0e12;
  target.opLaunchLatency = 2e-6;
  target.collectiveLatency = 20e-6;
  target.collectiveBusBandwidth = 268e9;
  target.allGatherCurve = {{1 * kMiB, 12e9},
                           {16 * kMiB, 146e9},
                           {128 * kMiB, 227e9},
                           {1 * kGiB, 268e9}};
  // Reduce-scatter runs at about the all-gather numbers (nccl-tests;
  // docs/cost-model.md, the h200 preset).
  target.reduceScatterCurve = target.allGatherCurve;
  target.hostLinkBandwidth = 55e9;
  target.hostLinkLatency = 10e-6;
  // Each way while the other direction copies too: the slower of the two
  // directions, for both (bench/copy_bench.cu; docs/cost-model.md, the h200
  // preset).
  target.hostLinkDuplexBandwidth = 49.4e9;
  // About 10% under the median reload rate (hostLinkBandwidth), single
  // copies running slower: planned at the median, back-to-back backward
  // reloads stall on some machine starts; planned at the slowest rate
  // for every copy, the plan is worse again. The margin, not the worst
  // case (docs/cost-model.md, the h200 preset).
  target.hostLinkPlanningBandwidth = 50e9;
  // How much longer a kernel runs per direction of host copies running
  // beside it: a matrix product runs about 3% longer while copies run both
  // ways (bench/copy_bench.cu; docs/cost-model.md, the h200 preset).
  target.copyComputeSlowdown = 0.015;
  // dc-map-to-gpu folds a product's zero fill and a reduction's identity
  // fill into the kernel after them, so they take next to none of a step's
  // time, far less than pricing them as kernels of their own would say
  // (docs/cost-model.md, the h200 preset).
  target.foldsFills = true;
  // dc-fold-head-transposes: cuDNN's attention reads q/k/v and writes its
  // output in the projections' [B, S, H, D] layout, so the GPU never runs
  // the head transposes (docs/cost-model.md, the h200 preset).
  target.foldsHeadTransposes = true;
  target.deviceMemoryBytes = 139 * kGiB;
  // GH100 as sold in the SXM parts: 132 SMs, 48 KiB of static shared memory
  // a block (more only through dynamic shared memory).
  target.multiprocessors = 132;
  target.sharedMemoryPerBlock = 48 * 1024;
  // One HGX node; without a network a larger grid is costed as one NVLink
  // domain (use h200-cluster for more than 8 ranks).
  target.gpusPerNode = 8;
  return target;
}

/// The network of an HGX cluster: one 400 Gb/s NIC per GPU (50 GB/s line
/// rate; NCCL's inter-node bus bandwidth reaches about 92% of it, an
/// estimate) and about 10 us per inter-node step
/// (InfiniBand hop plus NCCL's proxy).
static void addClusterNetwork(TargetDescription &target) {
  target.networkBandwidth = 46e9;
  target.networkLatency = 10e-6;
}

/// Nodes of 8 H200s joined by 400 Gb/s per GPU.
static TargetDescription makeH200Cluster() {
  TargetDescription target = makeH200();
  target.name = "h200-cluster";
  addClusterNetwork(target);
  return target;
}

/// One HGX node of H100 SXM 80 GB: the H200's compute and NVLink (the same
/// GH100 chip and NV18 links), its memory bandwidth scaled by the data
/// sheets' 3.35 / 4.8 TB/s, 80 GB of HBM3 (79 GiB usable). Estimates
/// (docs/cost-model.md, the h100 presets).
static TargetDescription makeH100() {
  TargetDescription target = makeH200();
  target.name = "h100";
  target.memoryBandwidth = 2.8e12;
  target.deviceMemoryBytes = 79 * kGiB;
  return target;
}

/// Nodes of 8 H100s joined by 400 Gb/s per GPU.
static TargetDescription makeH100Cluster() {
  TargetDescription target = makeH100();
  target.name = "h100-cluster";
  addClusterNetwork(target);
  return target;
}

/// The host (MPI) backend: order-of-magnitude numbers for one CPU socket.
static TargetDescription makeCPU() {
  TargetDescription target;
  target.name = "cpu";
  target.lowering = Lowering::Host;
  target.matmulFlops16 = 100e9;
  target.matmulFlops32 = 100e9;
  target.vectorFlops = 20e9;
  target.memoryBandwidth = 20e9;
  target.opLaunchLatency = 1e-6;
  target.collectiveLatency = 20e-6;
  target.collectiveBusBandwidth = 5e9;
  target.hostLinkBandwidth = 10e9;
  target.hostLinkLatency = 1e-6;
  target.deviceMemoryBytes = 16 * kGiB;
  return target;
}

Expected<TargetDescription> TargetDescription::getPreset(StringRef name) {
  if (name == "h100")
    return makeH100();
  if (name == "h200")
    return makeH200();
  if (name == "h200-cluster")
    return makeH200Cluster();
  if (name == "h100-cluster")
    return makeH100Cluster();
  if (name == "cpu")
    return makeCPU();
  return makeError("unknown target preset '" + name +
                   "' (presets: " + kPresetNames + ")");
}

static Error parseCurve(StringRef field, const json::Value &value,
                        std::vector<BandwidthPoint> &curve) {
  const json::Array *points = value.getAsArray();
  if (!points)
    return makeError("field \"" + field +
                     "\" must be an array of {\"bytes\", \"busBandwidth\"}");
  curve.clear();
  for (auto [i, pointValue] : llvm::enumerate(*points)) {
    std::string where = llvm::formatv("{0}[{1}]", field, i).str();
    const json::Object *point = pointValue.getAsObject();
    if (!point)
      return makeError(where + " must be an object {\"bytes\", "
                               "\"busBandwidth\"}");
    for (const auto &[key, unused] : *point)
      if (key != "bytes" && key != "busBandwidth")
        return makeError("unknown field \"" + StringRef(key) + "\" in " +
                         where);
    std::optional<int64_t> bytes = point->getInteger("bytes");
    std::optional<double> bandwidth = point->getNumber("busBandwidth");
    if (!bytes || *bytes <= 0)
      return makeError(where + ".bytes must be a positive integer");
    if (!bandwidth || !(*bandwidth > 0))
      return makeError(where + ".busBandwidth must be a positive number");
    if (!curve.empty() && *bytes <= curve.back().bytes)
      return makeError(where + ".bytes must be larger than the previous "
                               "point's (points in increasing size)");
    curve.push_back({*bytes, *bandwidth});
  }
  return Error::success();
}

Expected<TargetDescription> TargetDescription::fromJSON(StringRef text) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return makeError("invalid JSON: " + llvm::toString(parsed.takeError()));
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return makeError("a target description must be a JSON object");

  // Reject typos before anything else: a misspelt field would otherwise
  // silently keep the base preset's value.
  llvm::SmallVector<std::string> unknown;
  for (const auto &[key, unused] : *object) {
    StringRef name = key;
    bool known =
        name == "base" || name == "name" || name == kDeviceMemoryField ||
        name == kLoweringField ||
        llvm::any_of(kCountFields, [&](auto &f) { return f.name == name; }) ||
        llvm::any_of(kBoolFields, [&](auto &f) { return f.name == name; }) ||
        llvm::any_of(kNumberFields, [&](auto &f) { return f.name == name; }) ||
        llvm::any_of(kCurveFields, [&](auto &f) { return f.name == name; });
    if (!known)
      unknown.push_back(("\"" + name + "\"").str());
  }
  if (!unknown.empty()) {
    llvm::sort(unknown);
    return makeError("unknown field" +
                     StringRef(unknown.size() > 1 ? "s" : "") + " " +
                     llvm::join(unknown, ", ") + " in target description");
  }

  TargetDescription target;
  bool hasBase = false;
  if (const json::Value *base = object->get("base")) {
    std::optional<StringRef> baseName = base->getAsString();
    if (!baseName)
      return makeError("field \"base\" must be a preset name (" + kPresetNames +
                       ")");
    Expected<TargetDescription> preset = getPreset(*baseName);
    if (!preset)
      return preset.takeError();
    target = std::move(*preset);
    hasBase = true;
  } else {
    target.name = "custom";
  }

  llvm::SmallVector<StringRef> missing;
  if (const json::Value *name = object->get("name")) {
    std::optional<StringRef> nameString = name->getAsString();
    if (!nameString)
      return makeError("field \"name\" must be a string");
    target.name = nameString->str();
  }
  for (const NumberField &field : kNumberFields) {
    const json::Value *value = object->get(field.name);
    if (!value) {
      if (!isOptionalField(field.member))
        missing.push_back(field.name);
      continue;
    }
    std::optional<double> number = value->getAsNumber();
    if (!number)
      return makeError("field \"" + field.name + "\" must be a number");
    target.*field.member = *number;
  }
  if (const json::Value *value = object->get(kDeviceMemoryField)) {
    std::optional<int64_t> bytes = value->getAsInteger();
    if (!bytes)
      return makeError("field \"" + kDeviceMemoryField +
                       "\" must be an integer (bytes)");
    target.deviceMemoryBytes = *bytes;
  } else {
    missing.push_back(kDeviceMemoryField);
  }
  if (const json::Value *value = object->get(kLoweringField)) {
    std::optional<StringRef> text = value->getAsString();
    std::optional<Lowering> lowering =
        text ? symbolizeLowering(*text) : std::nullopt;
    if (!lowering)
      return makeError("field \"" + kLoweringField +
                       "\" must be \"host\" or \"cuda_sm90\"");
    target.lowering = *lowering;
  }
  for (const CountField &field : kCountFields) {
    if (const json::Value *value = object->get(field.name)) {
      std::optional<int64_t> count = value->getAsInteger();
      if (!count || *count < 0)
        return makeError("field \"" + field.name +
                         "\" must be a non-negative integer (0: " + field.zero +
                         ")");
      target.*field.member = *count;
    }
  }
  for (const BoolField &field : kBoolFields) {
    if (const json::Value *value = object->get(field.name)) {
      std::optional<bool> folds = value->getAsBoolean();
      if (!folds)
        return makeError("field \"" + field.name + "\" must be true or false");
      target.*field.member = *folds;
    }
  }
  for (const CurveField &field : kCurveFields)
    if (const json::Value *value = object->get(field.name))
      if (Error error = parseCurve(field.name, *value, target.*field.member))
        return error;

  if (!hasBase && !missing.empty())
    return makeError("missing field" +
                     StringRef(missing.size() > 1 ? "s" : "") + " \"" +
                     llvm::join(missing, "\", \"") +
                     "\" in target description (give them, or \"base\": a "
                     "preset to start from)");

  for (const NumberField &field : kNumberFields) {
    double value = target.*field.member;
    if (field.mayBeZero ? !(value >= 0) : !(value > 0))
      return makeError("field \"" + field.name + "\" must be " +
                       (field.mayBeZero ? "non-negative" : "positive"));
  }
  if (!(target.copyComputeSlowdown < 1))
    return makeError("field \"copyComputeSlowdown\" must be a fraction below "
                     "1 (0.015: compute 1.5% slower per copy direction)");
  if (target.deviceMemoryBytes <= 0)
    return makeError("field \"" + kDeviceMemoryField + "\" must be positive");
  return target;
}

Expected<TargetDescription> TargetDescription::load(StringRef presetOrPath) {
  Expected<TargetDescription> preset = getPreset(presetOrPath);
  if (preset)
    return preset;
  llvm::consumeError(preset.takeError());
  if (!llvm::sys::fs::exists(presetOrPath))
    return makeError("unknown target '" + presetOrPath +
                     "': neither a preset (" + kPresetNames +
                     ") nor an existing file");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(presetOrPath);
  if (!file)
    return makeError("cannot read target file '" + presetOrPath +
                     "': " + file.getError().message());
  Expected<TargetDescription> target = fromJSON((*file)->getBuffer());
  if (!target)
    return makeError(presetOrPath + ": " + llvm::toString(target.takeError()));
  return target;
}

std::string TargetDescription::toJSON() const {
  json::Object object;
  object["name"] = name;
  for (const NumberField &field : kNumberFields)
    object[field.name] = this->*field.member;
  object[kDeviceMemoryField] = deviceMemoryBytes;
  for (const CountField &field : kCountFields)
    object[field.name] = this->*field.member;
  object[kLoweringField] = stringifyLowering(lowering);
  for (const BoolField &field : kBoolFields)
    object[field.name] = this->*field.member;
  for (const CurveField &field : kCurveFields) {
    json::Array points;
    for (const BandwidthPoint &point : this->*field.member)
      points.push_back(json::Object{{"bytes", point.bytes},
                                    {"busBandwidth", point.busBandwidth}});
    object[field.name] = std::move(points);
  }
  return llvm::formatv("{0:2}", json::Value(std::move(object))).str();
}

bool TargetDescription::isIntegerField(StringRef name) {
  return name == kDeviceMemoryField || name == "bytes" ||
         llvm::any_of(kCountFields, [&](const CountField &field) {
           return field.name == name;
         });
}

TargetDescription TargetDescription::forPlanning() const {
  TargetDescription planning = *this;
  // A description that lowers hostLinkBandwidth below a base preset's
  // planning rate plans at its own rate.
  if (hostLinkPlanningBandwidth <= 0 ||
      hostLinkPlanningBandwidth >= hostLinkBandwidth)
    return planning;
  double scale = hostLinkPlanningBandwidth / hostLinkBandwidth;
  planning.hostLinkBandwidth = hostLinkPlanningBandwidth;
  planning.hostLinkDuplexBandwidth *= scale;
  planning.hostLinkPlanningBandwidth = 0;
  return planning;
}

int64_t TargetDescription::membersPerNode(int64_t groupSize,
                                          int64_t rankStride) const {
  // Row-major grids put a group's members `rankStride` apart from a base
  // that is a multiple of groupSize * rankStride: a node holds gpusPerNode
  // / rankStride of them (exact when the sizes divide, as they do for
  // nodes x GPUs-per-node grids).
  if (gpusPerNode <= 0 || rankStride <= 0)
    return groupSize;
  if (rankStride >= gpusPerNode)
    return 1;
  return std::min(groupSize, gpusPerNode / rankStride);
}
