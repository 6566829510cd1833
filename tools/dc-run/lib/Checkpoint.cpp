//===- Checkpoint.cpp - safetensors checkpoints of full tensors -----------===//
//
// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({"__metadata__": {string: string}, "<tensor>": {"dtype", "shape",
// "data_offsets": [begin, end)}}), then the tensor bytes, offsets counted
// from the end of the header.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"

#include "HostAccess.h"

#include "ParseJson.h"

#include "dcrt/checksum.h"
#include "dcrt/core.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

using namespace dcrt;
using namespace dcrun;

namespace {
/// A header longer than this is corruption, not a checkpoint.
constexpr uint64_t maxHeaderBytes = uint64_t(100) << 20;

const char *safetensorsDType(int32_t dtype) {
  switch (dtype) {
  case DCRT_F32:
    return "F32";
  case DCRT_BF16:
    return "BF16";
  case DCRT_F16:
    return "F16";
  case DCRT_I32:
    return "I32";
  case DCRT_I64:
    return "I64";
  }
  return "?";
}

std::optional<dcrt_dtype> parseSafetensorsDType(const std::string &name) {
  for (dcrt_dtype dtype : {DCRT_F32, DCRT_BF16, DCRT_F16, DCRT_I32, DCRT_I64})
    if (name == safetensorsDType(dtype))
      return dtype;
  return std::nullopt;
}

using nlohmann::json;

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// What a checkpoint stores about one parameter.
enum class Part { Value, Master, ExpAvg, ExpAvgSq, Grad };

const char *partSuffix(Part part) {
  switch (part) {
  case Part::Value:
    return "";
  case Part::Master:
    return ".master";
  case Part::ExpAvg:
    return ".exp_avg";
  case Part::ExpAvgSq:
    return ".exp_avg_sq";
  case Part::Grad:
    return "";
  }
  return "";
}

struct SavedTensor {
  const Param *param;
  Part part;
  int32_t dtype;
  int64_t begin, end;
  uint64_t checksum = kChecksumSeed;
};
} // namespace

uint64_t dcrun::checksumBytes(uint64_t checksum, const void *data,
                              size_t bytes) {
  return dcrt_fnv1a64(checksum, data, bytes);
}

namespace {
/// The metadata key of a tensor's checksum, and its value: 16 hex digits,
/// a fixed width so that the header can be rewritten in place once the
/// data (and so the checksum) is known.
std::string checksumKey(const std::string &tensor) {
  return "fnv1a64:" + tensor;
}

} // namespace

std::string dcrun::checksumText(uint64_t checksum) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(checksum));
  return text;
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

/// This rank's padded slot of `part` (what the gather moves), in host
/// memory.
static AlignedBuffer slotOf(const Param &param, Part part, int32_t dtype) {
  int64_t elementSize = dtypeSize(dtype);
  int64_t validBytes = param.validNumel * elementSize;
  AlignedBuffer slot(param.localNumel * elementSize, "a checkpoint slot");
  const float *state = part == Part::Master   ? param.master.data()
                       : part == Part::ExpAvg ? param.expAvg.data()
                                              : param.expAvgSq.data();
  if (part == Part::Value || part == Part::Grad)
    readToHost(
        part == Part::Value ? param.data : param.grad, validBytes,
        [&](const void *host) { std::memcpy(slot.data(), host, validBytes); });
  else
    std::memcpy(slot.data(), state, validBytes);
  return slot;
}

/// Ends the job over a checkpoint write that failed: the partial file at
/// `temporary` goes first (the previous checkpoint, if any, is untouched:
/// it is replaced only by the rename of a complete file).
[[noreturn]] static void failWrite(FILE *file, const std::string &temporary,
                                   const char *what) {
  int error = errno;
  if (file)
    std::fclose(file);
  std::remove(temporary.c_str());
  fatal("cannot %s checkpoint '%s': %s", what, temporary.c_str(),
        std::strerror(error));
}

static void writeAll(FILE *file, const void *data, size_t bytes,
                     const std::string &temporary) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, file) != bytes)
    failWrite(file, temporary, "write");
}

static void writeTensors(const std::string &path, const ParamRegistry &registry,
                         std::vector<SavedTensor> &tensors,
                         const nlohmann::ordered_json &baseMetadata);

void dcrun::saveCheckpoint(const std::string &path,
                           const ParamRegistry &registry, int64_t step,
                           bool allowNonFinite) {
  // Non-finite weights would be saved silently otherwise: training stops
  // at a non-finite loss or gradient norm, but an update can still make a
  // weight non-finite (from loaded optimizer state, say) and the loss
  // shows it only a step later. Each rank checks its shard (fatal ends
  // every rank). --allow-nonfinite saves what there is.
  for (const Param &param : registry.params())
    for (int64_t i = 0; i < param.validNumel && !allowNonFinite; ++i)
      if (!std::isfinite(param.master[i]))
        fatal("not saving checkpoint '%s' at step %lld: parameter '%s' is "
              "not finite at element %lld (its update made it so; "
              "--allow-nonfinite saves it anyway)",
              path.c_str(), static_cast<long long>(step),
              param.spec.name.c_str(),
              static_cast<long long>(param.offset + i));
  std::vector<SavedTensor> tensors;
  int64_t offset = 0;
  for (const Param &param : registry.params()) {
    auto add = [&](Part part, int32_t dtype) {
      int64_t bytes = param.fullNumel * dtypeSize(dtype);
      tensors.push_back({&param, part, dtype, offset, offset + bytes});
      offset += bytes;
    };
    add(Part::Value, param.spec.dtype);
    if (param.spec.dtype != DCRT_F32)
      add(Part::Master, DCRT_F32);
    add(Part::ExpAvg, DCRT_F32);
    add(Part::ExpAvgSq, DCRT_F32);
  }

  nlohmann::ordered_json metadata = {
      {"format", "dc"},
      {"optimizer", "adamw"},
      {"step", std::to_string(step)},
      {"world_size", std::to_string(registry.worldSize())}};
  writeTensors(path, registry, tensors, metadata);
}

/// Writes `tensors` (full tensors gathered from every rank's slots) and
/// `metadata` plus their checksums; collective, rank 0 writes.
static void writeTensors(const std::string &path, const ParamRegistry &registry,
                         std::vector<SavedTensor> &tensors,
                         const nlohmann::ordered_json &baseMetadata) {
  bool writer = registry.rank() == 0;
  FILE *file = nullptr;
  std::string temporary = path + ".tmp";
  // In file order: the metadata, then the tensors as their data follows.
  // The checksums are known only once the data is written: the header is
  // written twice, first with placeholders of the same width.
  auto makeHeader = [&] {
    nlohmann::ordered_json metadata = baseMetadata;
    for (const SavedTensor &tensor : tensors)
      metadata[checksumKey(tensor.param->spec.name + partSuffix(tensor.part))] =
          checksumText(tensor.checksum);
    nlohmann::ordered_json entries = {{"__metadata__", metadata}};
    for (const SavedTensor &tensor : tensors)
      entries[tensor.param->spec.name + partSuffix(tensor.part)] = {
          {"dtype", safetensorsDType(tensor.dtype)},
          {"shape", tensor.param->spec.shape},
          {"data_offsets", {tensor.begin, tensor.end}}};
    std::string header = entries.dump();
    // Pad so the tensor data starts 8-byte aligned, as the format suggests.
    header.append((8 - header.size() % 8) % 8, ' ');
    return header;
  };
  std::string header;
  if (writer) {
    header = makeHeader();
    file = std::fopen(temporary.c_str(), "wb");
    if (!file)
      fatal("cannot create checkpoint '%s': %s", temporary.c_str(),
            std::strerror(errno));
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] =
          static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));
    writeAll(file, length, 8, temporary);
    writeAll(file, header.data(), header.size(), temporary);
  }

  for (SavedTensor &tensor : tensors) {
    const Param &param = *tensor.param;
    AlignedBuffer slot = slotOf(param, tensor.part, tensor.dtype);
    int64_t fullBytes = param.fullNumel * dtypeSize(tensor.dtype);
    if (!param.spec.sharded || registry.worldSize() == 1) {
      if (writer) {
        writeAll(file, slot.data(), fullBytes, temporary);
        tensor.checksum = checksumBytes(kChecksumSeed, slot.data(), fullBytes);
      }
      continue;
    }
    // Slots are padded to equal sizes, so one gather collects every rank's.
    // The file takes each slot once, from its owner, in slot order: ranks
    // that differ only on axes the parameter is not split over hold
    // replicas (on a 1-D grid the owners are the ranks in order).
    AlignedBuffer full(writer ? registry.worldSize() * slot.size() : 0,
                       "a gathered checkpoint tensor", /*zeroed=*/false);
    gatherToRoot(slot.data(), slot.size(), full.data(), 0);
    if (writer) {
      uint64_t checksum = kChecksumSeed;
      int64_t left = fullBytes;
      for (int64_t index = 0; left > 0; ++index) {
        int64_t bytes = std::min<int64_t>(left, slot.size());
        const char *owned = static_cast<const char *>(full.data()) +
                            registry.ownerOfSlot(param, index) * slot.size();
        writeAll(file, owned, bytes, temporary);
        checksum = checksumBytes(checksum, owned, bytes);
        left -= bytes;
      }
      tensor.checksum = checksum;
    }
  }

  if (writer) {
    std::string final = makeHeader();
    if (final.size() != header.size())
      fatal("internal: the checkpoint header changed size (%zu to %zu bytes)",
            header.size(), final.size());
    if (std::fseek(file, 8, SEEK_SET) != 0)
      failWrite(file, temporary, "write");
    writeAll(file, final.data(), final.size(), temporary);
    if (std::fclose(file) != 0)
      failWrite(nullptr, temporary, "write");
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      int error = errno;
      std::remove(temporary.c_str());
      fatal("cannot rename '%s' to '%s': %s (the checkpoint is not saved)",
            temporary.c_str(), path.c_str(), std::strerror(error));
    }
  }
  if (registry.worldSize() > 1)
    barrier(); // every rank returns once the file is complete
}

void dcrun::saveGradients(const std::string &path,
                          const ParamRegistry &registry, int64_t step) {
  std::vector<SavedTensor> tensors;
  int64_t offset = 0;
  for (const Param &param : registry.params()) {
    if (!param.spec.hasGrad)
      continue;
    int64_t bytes = param.fullNumel * dtypeSize(param.spec.gradDtype);
    tensors.push_back(
        {&param, Part::Grad, param.spec.gradDtype, offset, offset + bytes});
    offset += bytes;
  }
  nlohmann::ordered_json metadata = {
      {"format", "dc-gradients"},
      {"step", std::to_string(step)},
      {"world_size", std::to_string(registry.worldSize())}};
  writeTensors(path, registry, tensors, metadata);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {
struct StoredTensor {
  dcrt_dtype dtype;
  std::vector<int64_t> shape;
  int64_t begin, end; // absolute file offsets
};

class CheckpointReader {
public:
  /// `kind` names the file in messages: "checkpoint" or "weights file".
  CheckpointReader(const std::string &path, const char *kind)
      : path(path), kind(kind) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fatal("cannot open %s '%s': %s", kind, path.c_str(),
            std::strerror(errno));
    // Closed also when a check below ends in fatal() and a harness's abort
    // hook throws (dc-fuzz-checkpoint ran out of descriptors).
    try {
      readFile();
    } catch (...) {
      ::close(fd);
      throw;
    }
  }

  ~CheckpointReader() { ::close(fd); }
  CheckpointReader(const CheckpointReader &) = delete;
  CheckpointReader &operator=(const CheckpointReader &) = delete;

  /// The tensor `name`, marked as used, or null.
  const StoredTensor *find(const std::string &name) {
    auto found = tensors.find(name);
    if (found == tensors.end())
      return nullptr;
    used.insert(name);
    return &found->second;
  }

  /// Fatal on a stored tensor no parameter took: a checkpoint of another
  /// model, or state of an optimizer dc-run does not have.
  void checkAllUsed() const {
    for (const auto &[name, tensor] : tensors)
      if (!used.count(name))
        fatal("%s '%s' has tensor '%s', which is neither a parameter "
              "of the model nor its optimizer state",
              kind, path.c_str(), name.c_str());
  }

  /// Verifies the checksums of tensors rank, rank + worldSize, ... (in name
  /// order), reading each in full; every tensor of a dc checkpoint has one.
  void verifyChecksums(int rank, int worldSize) {
    if (!isDcFormat)
      return;
    // dc checkpoints written before checksums existed have none at all.
    if (checksums.empty()) {
      if (rank == 0)
        warn("%s '%s' has no checksums (written by an older dc-run): "
             "its bytes are not verified",
             kind, path.c_str());
      return;
    }
    size_t i = 0;
    for (const auto &[name, tensor] : tensors) {
      if (i++ % worldSize != static_cast<size_t>(rank))
        continue;
      auto expected = checksums.find(name);
      if (expected == checksums.end())
        corrupt("tensor '" + name + "' has no checksum (metadata \"" +
                checksumKey(name) + "\")");
      uint64_t checksum = kChecksumSeed;
      constexpr int64_t chunk = 1 << 20;
      for (int64_t at = tensor.begin; at < tensor.end; at += chunk) {
        int64_t bytes = std::min(chunk, tensor.end - at);
        readBytes(at, bytes);
        checksum = checksumBytes(checksum, buffer.data(), bytes);
      }
      if (checksumText(checksum) != expected->second)
        corrupt("tensor '" + name + "' has checksum " + checksumText(checksum) +
                ", but the metadata says " + expected->second +
                " (its bytes changed since it was saved)");
    }
  }

  /// The tensor `name` with the parameter's shape, or a fatal error.
  const StoredTensor &require(const std::string &name, const Param &param) {
    const StoredTensor *tensor = find(name);
    if (!tensor)
      fatal("%s '%s' has no tensor '%s' (parameter %d of the model)", kind,
            path.c_str(), name.c_str(), param.spec.id);
    if (tensor->shape != param.spec.shape)
      fatal("%s '%s': tensor '%s' has shape %s, but the model's "
            "parameter has shape %s",
            kind, path.c_str(), name.c_str(), shapeText(tensor->shape).c_str(),
            shapeText(param.spec.shape).c_str());
    return *tensor;
  }

  /// `tensor`, the checkpoint's `name`, as dc-run saves it: in `dtype`. A
  /// checkpoint resumes the run exactly, so nothing is converted (a weight
  /// saved as F32 and stored as BF16 since was converted silently).
  void requireDType(const StoredTensor &tensor, const std::string &name,
                    int32_t dtype) {
    if (tensor.dtype != dtype)
      fatal("%s '%s': tensor '%s' is stored as %s, but this model keeps it "
            "as %s: a checkpoint resumes a run as it was saved, without "
            "conversion (--init loads weights converting them)",
            kind, path.c_str(), name.c_str(), safetensorsDType(tensor.dtype),
            safetensorsDType(dtype));
  }

  /// Elements [first, first + count) of `tensor`, converted to `dtype`.
  void readElements(const StoredTensor &tensor, int64_t first, int64_t count,
                    int32_t dtype, void *out) {
    int64_t elementSize = dtypeSize(tensor.dtype);
    readBytes(tensor.begin + first * elementSize, count * elementSize);
    if (isFloatDType(tensor.dtype) != isFloatDType(dtype))
      fatal("%s '%s': a tensor stored as %s cannot be loaded as %s", kind,
            path.c_str(), dtypeName(tensor.dtype), dtypeName(dtype));
    convert(buffer.data(), tensor.dtype, out, dtype, count);
  }

  int64_t step = 0;
  bool hasOptimizerState = false;

private:
  void readFile() {
    struct stat info;
    if (fstat(fd, &info) != 0)
      fatal("cannot read %s '%s': %s", kind, path.c_str(),
            std::strerror(errno));
    fileSize = info.st_size;
    readHeader();
  }

  /// `bytes` bytes at `position` into `buffer`.
  void readBytes(int64_t position, int64_t bytes) {
    buffer.resize(bytes);
    for (int64_t done = 0; done < bytes;) {
      ssize_t got =
          ::pread(fd, buffer.data() + done, bytes - done, position + done);
      if (got <= 0)
        fatal("cannot read %s '%s' at byte %lld: %s", kind, path.c_str(),
              static_cast<long long>(position + done),
              got == 0 ? "unexpected end of file" : std::strerror(errno));
      done += got;
    }
  }

  [[noreturn]] void corrupt(const std::string &why) {
    fatal("corrupt %s '%s': %s", kind, path.c_str(), why.c_str());
  }

  void readHeader() {
    unsigned char length[8];
    if (fileSize < 8 || ::pread(fd, length, 8, 0) != 8)
      corrupt("the file (" + std::to_string(fileSize) +
              " bytes) is too short for a safetensors header");
    uint64_t headerBytes = 0;
    for (int i = 0; i < 8; ++i)
      headerBytes |= uint64_t(length[i]) << (8 * i);
    if (headerBytes > maxHeaderBytes || headerBytes > uint64_t(fileSize - 8))
      corrupt("the header length " + std::to_string(headerBytes) +
              " does not fit the file (" + std::to_string(fileSize) +
              " bytes)");
    std::string text(headerBytes, '\0');
    if (::pread(fd, text.data(), headerBytes, 8) !=
        static_cast<ssize_t>(headerBytes))
      corrupt("cannot read the header");
    std::string error;
    std::optional<json> header = parseJson(text, error);
    if (!header)
      corrupt("the header is not valid JSON (" + error + ")");
    if (!header->is_object())
      corrupt("the header is not a JSON object");
    int64_t dataStart = 8 + static_cast<int64_t>(headerBytes);
    auto metadata = header->find("__metadata__");
    readMetadata(metadata == header->end() ? json::object() : *metadata);
    for (const auto &[name, entry] : header->items())
      if (name != "__metadata__")
        tensors[name] = readEntry(name, entry, dataStart);
    checkNoOverlap();
  }

  /// No two tensors share bytes: else one would load another's data.
  void checkNoOverlap() {
    std::vector<std::pair<const std::string *, const StoredTensor *>> order;
    for (const auto &[name, tensor] : tensors)
      if (tensor.end > tensor.begin)
        order.push_back({&name, &tensor});
    std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
      return a.second->begin < b.second->begin;
    });
    for (size_t i = 1; i < order.size(); ++i)
      if (order[i].second->begin < order[i - 1].second->end)
        corrupt("tensors '" + *order[i - 1].first + "' and '" +
                *order[i].first + "' overlap in the file (data_offsets)");
  }

  /// A dc checkpoint ("format": "dc") names its step and optimizer; any
  /// other file is plain weights (step 0, no optimizer state) unless it
  /// names an optimizer, which must then be adamw.
  void readMetadata(const json &metadata) {
    if (!metadata.is_object())
      corrupt("__metadata__ is not an object");
    auto text = [&](const char *key) -> std::optional<std::string> {
      auto value = metadata.find(key);
      if (value == metadata.end())
        return std::nullopt;
      if (!value->is_string())
        corrupt(std::string("metadata \"") + key + "\" is not a string");
      return value->get<std::string>();
    };
    isDcFormat = text("format") == "dc";
    if (std::optional<std::string> value = text("step")) {
      char *end = nullptr;
      errno = 0;
      step = std::strtoll(value->c_str(), &end, 10);
      if (value->empty() || *end || errno || step < 0)
        corrupt("metadata \"step\" is \"" + *value +
                "\", not a step count (0 to " + std::to_string(INT64_MAX) +
                ")");
    } else if (isDcFormat) {
      corrupt("a dc checkpoint without metadata \"step\"");
    }
    std::optional<std::string> optimizer = text("optimizer");
    if (optimizer && *optimizer != "adamw")
      corrupt("its optimizer state is \"" + *optimizer +
              "\"'s, but dc-run has only adamw");
    if (!optimizer && isDcFormat)
      corrupt("a dc checkpoint without metadata \"optimizer\"");
    hasOptimizerState = optimizer.has_value();
    for (const auto &[key, value] : metadata.items())
      if (key.rfind("fnv1a64:", 0) == 0) {
        if (!value.is_string() || value.get<std::string>().size() != 16)
          corrupt("metadata \"" + key + "\" is not 16 hex digits");
        checksums[key.substr(8)] = value.get<std::string>();
      }
  }

  /// A 64-bit integer (offsets need all 64 bits), or nullopt.
  static std::optional<int64_t> integerOf(const json &value) {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<uint64_t>() > uint64_t(INT64_MAX)))
      return std::nullopt;
    return value.get<int64_t>();
  }

  StoredTensor readEntry(const std::string &name, const json &entry,
                         int64_t dataStart) {
    auto bad = [&](const char *why) {
      corrupt("tensor '" + name + "': " + why);
    };
    if (!entry.is_object())
      bad("its entry is not an object");
    auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string())
      bad("no \"dtype\"");
    std::optional<dcrt_dtype> parsed =
        parseSafetensorsDType(dtype->get<std::string>());
    if (!parsed)
      bad("unsupported dtype (F32, BF16, F16, I32 and I64 are known)");
    StoredTensor tensor{*parsed, {}, 0, 0};
    auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array())
      bad("no \"shape\" array");
    int64_t numel = 1;
    for (const json &dim : *shape) {
      std::optional<int64_t> size = integerOf(dim);
      if (!size || *size < 0)
        bad("a dimension is not a non-negative integer");
      // No tensor of 2^60 elements fits a file: bail before overflowing.
      if (*size > 0 && numel > (int64_t(1) << 60) / *size)
        bad("its shape has too many elements");
      tensor.shape.push_back(*size);
      numel *= *size;
    }
    auto offsets = entry.find("data_offsets");
    std::optional<int64_t> first, last;
    if (offsets != entry.end() && offsets->is_array() && offsets->size() == 2) {
      first = integerOf((*offsets)[0]);
      last = integerOf((*offsets)[1]);
    }
    if (!first || !last)
      bad("no \"data_offsets\" pair");
    int64_t begin = *first;
    int64_t end = *last;
    if (begin < 0 || end < begin || end > fileSize - dataStart)
      bad("its data lies outside the file");
    if (end - begin != numel * dtypeSize(tensor.dtype))
      bad("its data size does not match its shape and dtype");
    tensor.begin = dataStart + begin;
    tensor.end = dataStart + end;
    return tensor;
  }

  std::string path;
  const char *kind;
  int fd = -1;
  int64_t fileSize = 0;
  std::map<std::string, StoredTensor> tensors;
  std::set<std::string> used;
  bool isDcFormat = false;
  std::map<std::string, std::string> checksums; // tensor -> 16 hex digits
  std::vector<char> buffer;
};
} // namespace

/// AdamW's moments as loaded: the first finite, the second finite and not
/// negative (a mean of squares). Anything else turns the weights to NaN
/// at the next update, a step after the load that caused it.
static void checkMoments(const std::string &path, const Param &param) {
  for (int64_t i = 0; i < param.validNumel; ++i) {
    float m = param.expAvg[i], v = param.expAvgSq[i];
    const char *bad = !std::isfinite(m)   ? "exp_avg is not finite"
                      : !std::isfinite(v) ? "exp_avg_sq is not finite"
                      : v < 0 ? "exp_avg_sq is negative (a mean of squares)"
                              : nullptr;
    if (bad)
      fatal("corrupt checkpoint '%s': tensor '%s' at element %lld: %s (%g, "
            "%g)",
            path.c_str(), param.spec.name.c_str(),
            static_cast<long long>(param.offset + i), bad, m, v);
  }
}

int64_t dcrun::loadCheckpoint(const std::string &path,
                              ParamRegistry &registry) {
  CheckpointReader reader(path, "checkpoint");
  for (Param &param : registry.params()) {
    const std::string &name = param.spec.name;
    // A dc checkpoint (with optimizer state) resumes exactly: its tensors
    // in the dtypes dc-run saves them in. Plain weights convert.
    const StoredTensor &value = reader.require(name, param);
    if (reader.hasOptimizerState)
      reader.requireDType(value, name, param.spec.dtype);
    const StoredTensor *master = reader.find(name + ".master");
    if (master) {
      master = &reader.require(name + ".master", param);
      if (reader.hasOptimizerState)
        reader.requireDType(*master, name + ".master", DCRT_F32);
    }
    reader.readElements(master ? *master : value, param.offset,
                        param.validNumel, DCRT_F32, param.master.data());
    if (reader.hasOptimizerState) {
      for (const char *moment : {".exp_avg", ".exp_avg_sq"})
        reader.requireDType(reader.require(name + moment, param), name + moment,
                            DCRT_F32);
      reader.readElements(reader.require(name + ".exp_avg", param),
                          param.offset, param.validNumel, DCRT_F32,
                          param.expAvg.data());
      reader.readElements(reader.require(name + ".exp_avg_sq", param),
                          param.offset, param.validNumel, DCRT_F32,
                          param.expAvgSq.data());
      checkMoments(path, param);
    } else {
      std::fill(param.expAvg.begin(), param.expAvg.end(), 0.0f);
      std::fill(param.expAvgSq.begin(), param.expAvgSq.end(), 0.0f);
    }
  }
  reader.checkAllUsed();
  reader.verifyChecksums(registry.rank(), registry.worldSize());
  registry.refreshData();
  return reader.step;
}

void dcrun::loadInitialWeights(const std::string &path,
                               ParamRegistry &registry) {
  CheckpointReader reader(path, "weights file");
  for (Param &param : registry.params()) {
    const std::string &name = param.spec.name;
    const StoredTensor *master = reader.find(name + ".master");
    const StoredTensor &value = master ? reader.require(name + ".master", param)
                                       : reader.require(name, param);
    // A dc checkpoint's value and optimizer state are not needed here.
    for (const char *part : {"", ".exp_avg", ".exp_avg_sq"})
      reader.find(name + part);
    reader.readElements(value, param.offset, param.validNumel, DCRT_F32,
                        param.master.data());
    std::fill(param.expAvg.begin(), param.expAvg.end(), 0.0f);
    std::fill(param.expAvgSq.begin(), param.expAvgSq.end(), 0.0f);
  }
  reader.checkAllUsed();
  reader.verifyChecksums(registry.rank(), registry.worldSize());
  registry.refreshData();
}

std::string dcrun::periodicCheckpoint(const std::string &dir, int64_t step) {
  return dir + "/step-" + std::to_string(step) + ".safetensors";
}

namespace {
/// The files of `dir` named step-<middle><suffix>, as (middle, path).
std::vector<std::pair<std::string, std::filesystem::path>>
stepFiles(const std::string &dir, std::string_view suffix) {
  std::vector<std::pair<std::string, std::filesystem::path>> found;
  std::error_code error;
  std::filesystem::directory_iterator entries(dir, error);
  if (error)
    return found;
  constexpr std::string_view prefix = "step-";
  for (const std::filesystem::directory_entry &entry : entries) {
    std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() &&
        name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      found.emplace_back(
          name.substr(prefix.size(),
                      name.size() - prefix.size() - suffix.size()),
          entry.path());
  }
  return found;
}
} // namespace

std::string dcrun::latestCheckpoint(const std::string &dir) {
  int64_t latest = -1;
  for (const auto &[digits, path] : stepFiles(dir, ".safetensors"))
    if (digits.size() <= 18 &&
        digits.find_first_not_of("0123456789") == std::string::npos)
      latest = std::max<int64_t>(latest, std::stoll(digits));
  return latest < 0 ? "" : periodicCheckpoint(dir, latest);
}

void dcrun::removeUnfinishedCheckpoints(const std::string &dir) {
  std::error_code error;
  for (const auto &[digits, path] : stepFiles(dir, ".safetensors.tmp"))
    std::filesystem::remove(path, error);
}
