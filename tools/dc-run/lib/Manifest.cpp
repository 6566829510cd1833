//===- Manifest.cpp - the artifact's manifest, read and checked -----------===//
#include "Manifest.h"

#include "Checkpoint.h"
#include "Params.h"
#include "ParseJson.h"

#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace dcrun;
using nlohmann::json;

int64_t TensorSpec::numel() const {
  int64_t result = 1;
  for (int64_t dim : shape)
    result *= dim;
  return result;
}

const TensorSpec *StepSpec::findParam(int32_t id) const {
  for (const TensorSpec &arg : args)
    if (arg.kind == TensorKind::Param && arg.id == id)
      return &arg;
  return nullptr;
}

const TensorSpec *StepSpec::findGrad(int32_t param) const {
  for (const TensorSpec &result : results)
    if (result.kind == TensorKind::Grad && result.param == param)
      return &result;
  return nullptr;
}

const TensorSpec *StepSpec::findAccumulator(int32_t param) const {
  for (const TensorSpec &arg : args)
    if (arg.kind == TensorKind::GradAccum && arg.param == param)
      return &arg;
  return nullptr;
}

static const TensorSpec *findTensor(const std::vector<TensorSpec> &tensors,
                                    TensorKind kind, int32_t param,
                                    std::string_view state) {
  for (const TensorSpec &tensor : tensors)
    if (tensor.kind == kind && (param < 0 || tensor.param == param) &&
        (state.empty() || tensor.state == state))
      return &tensor;
  return nullptr;
}

const TensorSpec *StepSpec::findArg(TensorKind kind, int32_t param,
                                    std::string_view state) const {
  return findTensor(args, kind, param, state);
}

const TensorSpec *StepSpec::findResult(TensorKind kind, int32_t param,
                                       std::string_view state) const {
  return findTensor(results, kind, param, state);
}

const StepSpec *Manifest::findStep(std::string_view name) const {
  for (const StepSpec &step : steps)
    if (step.name == name)
      return &step;
  return nullptr;
}

namespace {
/// Reads fields and remembers the first problem, with where it was found.
class Reader {
public:
  explicit Reader(std::string &error) : error(error) {}

  bool failed() const { return !error.empty(); }

  void fail(const std::string &where, const std::string &what) {
    if (error.empty())
      error = where + ": " + what;
  }

  std::optional<int64_t> integer(const json &object, const char *key,
                                 const std::string &where, bool required) {
    auto value = object.find(key);
    if (value == object.end()) {
      if (required)
        fail(where, std::string("missing \"") + key + "\"");
      return std::nullopt;
    }
    std::optional<int64_t> parsed = asInteger(*value);
    if (!parsed)
      fail(where, std::string("\"") + key + "\" is not an integer");
    return parsed;
  }

  /// An optional boolean: `fallback` when absent.
  bool boolean(const json &object, const char *key, const std::string &where,
               bool fallback) {
    auto value = object.find(key);
    if (value == object.end())
      return fallback;
    if (!value->is_boolean()) {
      fail(where, std::string("\"") + key + "\" is not a boolean");
      return fallback;
    }
    return value->get<bool>();
  }

  std::string string(const json &object, const char *key,
                     const std::string &where, bool required) {
    auto value = object.find(key);
    if (value == object.end() || !value->is_string()) {
      if (required || value != object.end())
        fail(where, std::string("\"") + key + "\" is not a string");
      return {};
    }
    return value->get<std::string>();
  }

  /// A shape: an array of non-negative integers.
  std::optional<std::vector<int64_t>> shape(const json &object, const char *key,
                                            const std::string &where) {
    auto value = object.find(key);
    if (value == object.end() || !value->is_array()) {
      fail(where, std::string("missing \"") + key + "\" array");
      return std::nullopt;
    }
    std::vector<int64_t> dims;
    for (const json &dim : *value) {
      std::optional<int64_t> parsed = asInteger(dim);
      if (!parsed || *parsed < 0) {
        fail(where, "a dimension is not a non-negative integer");
        return std::nullopt;
      }
      dims.push_back(*parsed);
    }
    return dims;
  }

  std::optional<TensorSpec> tensor(const json &entry,
                                   const std::string &where) {
    if (!entry.is_object()) {
      fail(where, "not an object");
      return std::nullopt;
    }
    TensorSpec spec;
    spec.kindName = string(entry, "kind", where, true);
    if (spec.kindName == "param")
      spec.kind = TensorKind::Param;
    else if (spec.kindName == "data")
      spec.kind = TensorKind::Data;
    else if (spec.kindName == "loss")
      spec.kind = TensorKind::Loss;
    else if (spec.kindName == "grad")
      spec.kind = TensorKind::Grad;
    else if (spec.kindName == "grad_accum")
      spec.kind = TensorKind::GradAccum;
    else if (spec.kindName == "opt_state")
      spec.kind = TensorKind::OptState;
    else if (spec.kindName == "learning_rate")
      spec.kind = TensorKind::LearningRate;
    else if (spec.kindName == "step_count")
      spec.kind = TensorKind::StepCount;
    else if (spec.kindName == "param_update")
      spec.kind = TensorKind::ParamUpdate;
    else if (spec.kindName == "grad_squares")
      spec.kind = TensorKind::GradSquares;
    spec.name = string(entry, "name", where, false);
    std::optional<std::vector<int64_t>> dims = shape(entry, "shape", where);
    if (!dims)
      return std::nullopt;
    spec.shape = std::move(*dims);
    std::string dtype = string(entry, "dtype", where, true);
    std::optional<dcrt_dtype> parsed = dcrt::parseDType(dtype);
    if (!parsed && !failed())
      fail(where, "unknown dtype \"" + dtype + "\"");
    spec.dtype = parsed.value_or(DCRT_F32);
    spec.local = integer(entry, "local", where, false);
    if (entry.contains("shard_axes")) {
      if (!spec.local)
        fail(where, "\"shard_axes\" without \"local\"");
      spec.shardAxes =
          shape(entry, "shard_axes", where).value_or(std::vector<int64_t>{});
      if (spec.shardAxes.empty() && !failed())
        fail(where, "\"shard_axes\" is empty");
    }
    spec.vocab = integer(entry, "vocab", where, false);
    spec.seqDim = integer(entry, "seq_dim", where, false);
    spec.seqAxis = integer(entry, "seq_axis", where, false);
    if (spec.seqDim.has_value() != spec.seqAxis.has_value() ||
        (spec.seqDim &&
         (spec.kind != TensorKind::Data || *spec.seqDim < 0 ||
          *spec.seqDim >= int64_t(spec.shape.size()) || *spec.seqAxis < 0)))
      fail(where, "\"seq_dim\" and \"seq_axis\" go together, on a data "
                  "tensor, naming one of its dims");
    std::string memory = string(entry, "memory", where, false);
    if (!memory.empty() && memory != "host" && memory != "device")
      fail(where, "\"memory\" is \"" + memory +
                      "\" (expected \"host\" or \"device\")");
    spec.onHost = memory == "host";
    // Parameters (dc-offload-params) and optimizer state
    // (dc-offload-optimizer-state), which the step uploads and writes back.
    if (spec.onHost && spec.kind != TensorKind::Param &&
        spec.kind != TensorKind::OptState)
      fail(where, "\"memory\": \"host\" on a " + spec.kindName +
                      " tensor; only parameters and optimizer state are kept "
                      "in host memory");
    if (std::optional<int64_t> offset =
            integer(entry, "arena_offset", where, false);
        offset && *offset != -1) {
      if (*offset < 0)
        fail(where, "\"arena_offset\" is negative");
      spec.arenaOffset = offset;
    }
    if (spec.kind == TensorKind::Param)
      spec.id =
          static_cast<int32_t>(integer(entry, "id", where, true).value_or(-1));
    if (spec.kind == TensorKind::Grad || spec.kind == TensorKind::GradAccum ||
        spec.kind == TensorKind::OptState ||
        spec.kind == TensorKind::ParamUpdate)
      spec.param = static_cast<int32_t>(
          integer(entry, "param", where, true).value_or(-1));
    if (spec.kind == TensorKind::OptState) {
      spec.state = string(entry, "state", where, true);
      if (spec.state != "exp_avg" && spec.state != "exp_avg_sq" &&
          spec.state != "master" && !failed())
        fail(where, "\"state\" is \"" + spec.state +
                        "\" (expected exp_avg, exp_avg_sq or master)");
    }
    if (failed())
      return std::nullopt;
    return spec;
  }

private:
  /// An integer literal that fits 64 bits (byte counts need all of them).
  static std::optional<int64_t> asInteger(const json &value) {
    if (value.is_number_unsigned())
      return value.get<uint64_t>() <=
                     uint64_t(std::numeric_limits<int64_t>::max())
                 ? std::optional<int64_t>(value.get<int64_t>())
                 : std::nullopt;
    if (value.is_number_integer())
      return value.get<int64_t>();
    return std::nullopt;
  }

  std::string &error;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// " (sharded over axes [a, b])" or " (replicated)".
std::string shardingText(const TensorSpec &spec) {
  return spec.local ? " (sharded over axes " + shapeText(spec.shardAxes) + ")"
                    : " (replicated)";
}

/// Fills in and checks the shard axes of a sharded `spec` on a grid of
/// `gridShape` (empty: one axis of `worldSize`); returns the ranks of its
/// shard group.
int64_t checkShardAxes(TensorSpec &spec, const std::vector<int64_t> &gridShape,
                       int32_t worldSize, const std::string &where,
                       Reader &reader) {
  std::vector<int64_t> shape = gridShape;
  if (shape.empty())
    shape = {worldSize};
  if (spec.shardAxes.empty())
    for (size_t axis = 0; axis < shape.size(); ++axis)
      spec.shardAxes.push_back(static_cast<int64_t>(axis));
  int64_t ranks = 1;
  for (size_t i = 0; i < spec.shardAxes.size(); ++i) {
    int64_t axis = spec.shardAxes[i];
    if (axis < 0 || axis >= int64_t(shape.size()) ||
        std::count(spec.shardAxes.begin(), spec.shardAxes.begin() + i, axis)) {
      reader.fail(where, "'" + spec.name + "' has \"shard_axes\" " +
                             shapeText(spec.shardAxes) +
                             ", which are not distinct axes of the " +
                             std::to_string(shape.size()) + "-axis grid");
      return 1;
    }
    ranks *= shape[axis];
  }
  return ranks;
}

/// A step that runs the optimizer: one learning rate, step count and
/// squared norm; for each parameter it updates, the update and both
/// moments (arguments and results), and a master where its state says so,
/// each of the parameter's shape and sharding; no gradient results. A step
/// without "optimizer" has none of these.
void checkOptimizer(const StepSpec &step, const std::string &where,
                    Reader &reader) {
  bool any = false;
  for (const auto *tensors : {&step.args, &step.results})
    for (const TensorSpec &tensor : *tensors)
      any |= tensor.kind == TensorKind::OptState ||
             tensor.kind == TensorKind::LearningRate ||
             tensor.kind == TensorKind::StepCount ||
             tensor.kind == TensorKind::ParamUpdate ||
             tensor.kind == TensorKind::GradSquares;
  if (!step.optimizer) {
    if (any)
      reader.fail(where, "has optimizer state, updates or a learning rate "
                         "but no \"optimizer\"");
    return;
  }
  auto scalar = [&](const TensorSpec *tensor, dcrt_dtype dtype,
                    const char *what) {
    if (!tensor || !tensor->shape.empty() || tensor->dtype != dtype)
      reader.fail(where, std::string("runs the optimizer but has no ") + what +
                             " (a " + dcrt::dtypeName(dtype) + " scalar)");
  };
  scalar(step.findArg(TensorKind::LearningRate), DCRT_F64,
         "learning_rate argument");
  scalar(step.findArg(TensorKind::StepCount), DCRT_I64, "step_count argument");
  scalar(step.findResult(TensorKind::GradSquares), DCRT_F64,
         "grad_squares result");
  for (const TensorSpec &result : step.results)
    if (result.kind == TensorKind::Grad)
      reader.fail(where, "runs the optimizer but returns a gradient");
  auto sameAs = [](const TensorSpec &tensor, const TensorSpec &param) {
    return tensor.shape == param.shape && tensor.local == param.local &&
           tensor.shardAxes == param.shardAxes;
  };
  for (const TensorSpec &update : step.results) {
    if (update.kind != TensorKind::ParamUpdate)
      continue;
    const TensorSpec *param = step.findParam(update.param);
    if (!param || !sameAs(update, *param) || update.dtype != param->dtype) {
      reader.fail(where, "an update of parameter " +
                             std::to_string(update.param) +
                             " is not of an argument's shape, sharding and "
                             "dtype");
      continue;
    }
    bool master =
        step.optimizer->masterDtype == DCRT_F32 && param->dtype != DCRT_F32;
    for (const char *state : {"exp_avg", "exp_avg_sq", "master"}) {
      bool wanted = std::string_view(state) != "master" || master;
      dcrt_dtype dtype = std::string_view(state) == "master"
                             ? DCRT_F32
                             : step.optimizer->momentDtype;
      // State in host memory is written back into its argument by the
      // step: it has no result.
      const TensorSpec *arg =
          step.findArg(TensorKind::OptState, update.param, state);
      const TensorSpec *result =
          step.findResult(TensorKind::OptState, update.param, state);
      bool onHost = arg && arg->onHost;
      if (onHost && result)
        reader.fail(where, "parameter '" + param->name + "' has its " + state +
                               " in host memory and as a result: the step "
                               "writes host state back into its argument");
      for (const TensorSpec *tensor : {arg, onHost ? arg : result}) {
        if (!wanted) {
          if (tensor)
            reader.fail(where, "parameter '" + param->name + "' has a " +
                                   state + " it does not need");
          continue;
        }
        if (!tensor || !sameAs(*tensor, *param) || tensor->dtype != dtype)
          reader.fail(where, "parameter '" + param->name + "' needs its " +
                                 state +
                                 " as an argument and a result of its "
                                 "shape and sharding, in " +
                                 dcrt::dtypeName(dtype));
      }
    }
  }
  for (const TensorSpec &state : step.args)
    if (state.kind == TensorKind::OptState &&
        !step.findResult(TensorKind::ParamUpdate, state.param))
      reader.fail(where, "has optimizer state of parameter " +
                             std::to_string(state.param) +
                             ", which it does not update");
}

/// What must hold between the tensors of one step.
void checkStep(StepSpec &step, int32_t worldSize,
               const std::vector<int64_t> &gridShape, Reader &reader) {
  std::string where = "step '" + step.name + "'";
  // f64 is for the optimizer's scalars alone.
  for (const auto *tensors : {&step.args, &step.results})
    for (const TensorSpec &tensor : *tensors)
      if (tensor.dtype == DCRT_F64 && tensor.kind != TensorKind::LearningRate &&
          tensor.kind != TensorKind::GradSquares)
        reader.fail(where, "'" + tensor.name + "' (" + tensor.kindName +
                               ") is f64, which only the optimizer's "
                               "learning_rate and grad_squares are");
  for (TensorSpec &result : step.results)
    if (result.local)
      checkShardAxes(result, gridShape, worldSize, where, reader);
  for (TensorSpec &arg : step.args) {
    if (arg.kind == TensorKind::Loss || arg.kind == TensorKind::Grad ||
        arg.kind == TensorKind::ParamUpdate ||
        arg.kind == TensorKind::GradSquares || arg.kind == TensorKind::Other)
      reader.fail(where, "argument '" + arg.name + "' has kind \"" +
                             arg.kindName +
                             "\" (expected param, data, grad_accum, "
                             "opt_state, learning_rate or step_count)");
    if ((arg.kind == TensorKind::OptState ||
         arg.kind == TensorKind::GradAccum) &&
        arg.local)
      checkShardAxes(arg, gridShape, worldSize, where, reader);
    if (arg.kind != TensorKind::Param)
      continue;
    if (arg.name.empty())
      arg.name = "param" + std::to_string(arg.id);
    for (const TensorSpec &other : step.args)
      if (&other != &arg && other.kind == TensorKind::Param &&
          other.id == arg.id)
        reader.fail(where, "parameter id " + std::to_string(arg.id) +
                               " appears twice");
    if (!arg.local)
      continue;
    int64_t group = checkShardAxes(arg, gridShape, worldSize, where, reader);
    int64_t expected = dcrun::shardNumel(arg.numel(), group);
    if (*arg.local != expected)
      reader.fail(where, "parameter '" + arg.name +
                             "' has \"local\": " + std::to_string(*arg.local) +
                             ", but " + std::to_string(group) + " ranks need " +
                             std::to_string(expected));
  }
  // Accumulators: fp32, the full shape of a parameter of the step, one per
  // parameter; an accumulating result updates an accumulator argument.
  auto checkAccumulator = [&](const TensorSpec &accumulator, const char *what) {
    const TensorSpec *param = step.findParam(accumulator.param);
    if (!param) {
      reader.fail(where, std::string(what) + " names parameter " +
                             std::to_string(accumulator.param) +
                             ", which is not an argument");
      return;
    }
    // Whole on every rank (summed before the reduction), or sharded (a
    // step that runs its optimizer sums the reduced shards itself).
    if (accumulator.shape != param->shape || accumulator.dtype != DCRT_F32)
      reader.fail(where, std::string(what) + " of '" + param->name +
                             "' is not an fp32 tensor of its shape " +
                             shapeText(param->shape));
  };
  for (const TensorSpec &arg : step.args)
    if (arg.kind == TensorKind::GradAccum) {
      checkAccumulator(arg, "a gradient accumulator");
      if (step.findAccumulator(arg.param) != &arg)
        reader.fail(where, "parameter " + std::to_string(arg.param) +
                               " has two gradient accumulators");
    }
  for (const TensorSpec &result : step.results)
    if (result.kind == TensorKind::GradAccum) {
      checkAccumulator(result, "an accumulating result");
      if (!step.findAccumulator(result.param))
        reader.fail(where, "an accumulating result of parameter " +
                               std::to_string(result.param) +
                               " has no accumulator argument");
    }
  int losses = 0;
  for (const TensorSpec &result : step.results) {
    if (result.kind == TensorKind::Data || result.kind == TensorKind::Param ||
        result.kind == TensorKind::LearningRate ||
        result.kind == TensorKind::StepCount ||
        result.kind == TensorKind::Other)
      reader.fail(where, "a result has kind \"" + result.kindName + "\"");
    if (result.kind == TensorKind::Loss) {
      ++losses;
      if (result.numel() != 1)
        reader.fail(where, "the loss has shape " + shapeText(result.shape) +
                               " (expected a scalar)");
    }
    if (result.kind != TensorKind::Grad)
      continue;
    const TensorSpec *param = step.findParam(result.param);
    if (!param) {
      reader.fail(where, "a gradient names parameter " +
                             std::to_string(result.param) +
                             ", which is not an argument");
      continue;
    }
    if (result.shape != param->shape || result.local != param->local ||
        result.shardAxes != param->shardAxes)
      reader.fail(where, "the gradient of '" + param->name + "' has shape " +
                             shapeText(result.shape) + shardingText(result) +
                             ", the parameter " + shapeText(param->shape) +
                             shardingText(*param));
    if (!dcrt::isFloatDType(result.dtype) || !dcrt::isFloatDType(param->dtype))
      reader.fail(where, "parameter '" + param->name +
                             "' or its gradient is not floating point");
  }
  if (losses != 1)
    reader.fail(where, "has " + std::to_string(losses) +
                           " loss results (expected one)");
  checkOptimizer(step, where, reader);
}
/// A final form and its accumulating form: each names the other; they take
/// the same parameters, data and accumulators; the accumulating form
/// returns every accumulator updated and the gradients of the other
/// parameters, and the final form a gradient of every accumulated one.
void checkAccumulatingPair(const Manifest &manifest, const StepSpec &step,
                           Reader &reader) {
  std::string where = "step '" + step.name + "'";
  if (!step.accumulatesFor.empty()) {
    const StepSpec *final = manifest.findStep(step.accumulatesFor);
    if (!final || final->accumulatingStep != step.name)
      reader.fail(where, "accumulates for '" + step.accumulatesFor +
                             "', which does not name it as its "
                             "\"accumulating_step\"");
    return;
  }
  // A step that runs its optimizer returns the sums it updates with into
  // the accumulators, in its final form too.
  if (!step.optimizer)
    for (const TensorSpec &result : step.results)
      if (result.kind == TensorKind::GradAccum)
        reader.fail(where, "returns an accumulator but is not an "
                           "accumulating form (no \"accumulates_for\")");
  if (step.accumulatingStep.empty())
    return;
  const StepSpec *accumulating = manifest.findStep(step.accumulatingStep);
  if (!accumulating || accumulating->accumulatesFor != step.name) {
    reader.fail(where, "its accumulating step '" + step.accumulatingStep +
                           "' is not in the manifest, or does not name it");
    return;
  }
  auto signature = [](const std::vector<TensorSpec> &tensors) {
    std::string text;
    for (const TensorSpec &tensor : tensors)
      text += tensor.kindName + ":" + tensor.name + ":" +
              std::to_string(tensor.id) + ":" + std::to_string(tensor.param) +
              shapeText(tensor.shape) + dcrt::dtypeName(tensor.dtype) + ";";
    return text;
  };
  // The final form of a step that runs its optimizer takes the optimizer's
  // arguments too (the state, the learning rate and the step count).
  std::vector<TensorSpec> finalArgs;
  for (const TensorSpec &arg : step.args)
    if (arg.kind != TensorKind::OptState &&
        arg.kind != TensorKind::LearningRate &&
        arg.kind != TensorKind::StepCount)
      finalArgs.push_back(arg);
  if (signature(finalArgs) != signature(accumulating->args))
    reader.fail(where, "and its accumulating step '" + accumulating->name +
                           "' take different arguments");
  if (accumulating->optimizer)
    reader.fail(where, "its accumulating step '" + accumulating->name +
                           "' runs the optimizer");
  // With the optimizer inside, the final form returns the update of every
  // parameter, and each is accumulated by the step.
  auto returnsGradient = [&](int32_t param) {
    return step.optimizer ? step.findResult(TensorKind::ParamUpdate, param)
                          : step.findGrad(param);
  };
  for (const TensorSpec &arg : step.args) {
    if (arg.kind == TensorKind::GradAccum) {
      bool updated = false;
      for (const TensorSpec &result : accumulating->results)
        updated |=
            result.kind == TensorKind::GradAccum && result.param == arg.param;
      if (!updated || !returnsGradient(arg.param) ||
          accumulating->findGrad(arg.param))
        reader.fail(where, "parameter " + std::to_string(arg.param) +
                               " is accumulated by the step: the final form "
                               "must return its gradient (or update) and the "
                               "accumulating form its accumulator, not its "
                               "gradient");
    }
    if (arg.kind == TensorKind::Param && step.optimizer &&
        returnsGradient(arg.id) && !step.findAccumulator(arg.id))
      reader.fail(where, "runs its optimizer over micro-batches but does not "
                         "accumulate the gradient of '" +
                             arg.name + "'");
    if (arg.kind == TensorKind::Param && !step.optimizer &&
        !step.findAccumulator(arg.id) &&
        (step.findGrad(arg.id) != nullptr) !=
            (accumulating->findGrad(arg.id) != nullptr))
      reader.fail(where, "and its accumulating step '" + accumulating->name +
                             "' differ in the gradient of '" + arg.name + "'");
  }
}
} // namespace

std::optional<Manifest> dcrun::parseManifest(std::string_view text,
                                             std::string &error) {
  error.clear();
  std::string parseError;
  std::optional<json> parsed = parseJson(text, parseError);
  if (!parsed) {
    error = "not valid JSON (" + parseError + ")";
    return std::nullopt;
  }
  const json &root = *parsed;
  if (!root.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  Reader reader(error);
  Manifest manifest;
  manifest.abi = static_cast<int32_t>(
      reader.integer(root, "abi", "manifest", true).value_or(0));
  manifest.worldSize = static_cast<int32_t>(
      reader.integer(root, "world_size", "manifest", true).value_or(1));
  if (manifest.worldSize < 1)
    reader.fail("manifest", "\"world_size\" must be at least 1");
  manifest.grid = reader.string(root, "grid", "manifest", false);
  manifest.target = reader.string(root, "target", "manifest", false);
  if (root.contains("grid_shape")) {
    std::optional<std::vector<int64_t>> gridShape =
        reader.shape(root, "grid_shape", "manifest");
    int64_t ranks = 1;
    for (int64_t axis : gridShape.value_or(std::vector<int64_t>{}))
      ranks *= axis;
    if (gridShape && (gridShape->empty() || ranks != manifest.worldSize))
      reader.fail("manifest", "\"grid_shape\" " + shapeText(*gridShape) +
                                  " has " + std::to_string(ranks) +
                                  " ranks, but \"world_size\" is " +
                                  std::to_string(manifest.worldSize));
    manifest.gridShape = gridShape.value_or(std::vector<int64_t>{});
  }
  manifest.vocab = reader.integer(root, "vocab", "manifest", false);
  manifest.checkFinite =
      reader.boolean(root, "check_finite", "manifest", false);
  if (auto plan = root.find("plan"); plan != root.end()) {
    if (!plan->is_object())
      reader.fail("plan", "not an object");
    auto bytes = [&](const char *key) {
      int64_t value =
          plan->is_object()
              ? reader.integer(*plan, key, "plan", false).value_or(0)
              : 0;
      if (value < 0)
        reader.fail("plan", "negative byte counts");
      return value;
    };
    manifest.gatherArenaBytes = bytes("gather_arena_bytes");
    manifest.hostPoolBytes = bytes("host_pool_bytes");
    manifest.stepArenaBytes = bytes("step_arena_bytes");
    manifest.stepBufferBytes = bytes("step_buffer_bytes");
    manifest.stagingBytes = bytes("staging_bytes");
  }
  auto steps = root.find("steps");
  if (steps == root.end() || !steps->is_array() || steps->empty())
    reader.fail("manifest", "\"steps\" must be a non-empty array");
  if (reader.failed())
    return std::nullopt;

  for (const json &entry : *steps) {
    if (!entry.is_object()) {
      reader.fail("a step", "not an object");
      return std::nullopt;
    }
    StepSpec step;
    step.name = reader.string(entry, "name", "a step", true);
    std::string where = "step '" + step.name + "'";
    step.entry = reader.string(entry, "entry", where, true);
    if (auto flops = entry.find("flops"); flops != entry.end()) {
      if (!flops->is_number() || !(flops->get<double>() >= 0) ||
          !std::isfinite(flops->get<double>()))
        reader.fail(where, "\"flops\" is not a non-negative number");
      else
        step.flops = flops->get<double>();
    }
    step.plannedPeakBytes =
        reader.integer(entry, "planned_peak_bytes", where, false);
    if (step.plannedPeakBytes && *step.plannedPeakBytes < 0)
      reader.fail(where, "\"planned_peak_bytes\" is negative");
    if (auto optimizer = entry.find("optimizer"); optimizer != entry.end()) {
      CompiledOptimizer config;
      auto number = [&](const char *key, double &value) {
        auto field = optimizer->find(key);
        if (field == optimizer->end() || !field->is_number() ||
            !std::isfinite(field->get<double>()))
          reader.fail(where, std::string("\"optimizer\" has no number \"") +
                                 key + "\"");
        else
          value = field->get<double>();
      };
      auto dtype = [&](const char *key, dcrt_dtype &value) {
        auto field = optimizer->find(key);
        std::optional<dcrt_dtype> parsed;
        if (field != optimizer->end() && field->is_string())
          parsed = dcrt::parseDType(field->get<std::string>());
        if (!parsed || (*parsed != DCRT_F32 && *parsed != DCRT_BF16))
          reader.fail(where, std::string("\"optimizer\" has no \"") + key +
                                 "\" of f32 or bf16");
        else
          value = *parsed;
      };
      if (!optimizer->is_object() ||
          reader.string(*optimizer, "name", where, true) != "adamw") {
        reader.fail(where, "\"optimizer\" is not {\"name\": \"adamw\", ...}");
      } else {
        number("beta1", config.beta1);
        number("beta2", config.beta2);
        number("eps", config.eps);
        number("weight_decay", config.weightDecay);
        number("max_grad_norm", config.maxGradNorm);
        dtype("master_dtype", config.masterDtype);
        dtype("moment_dtype", config.momentDtype);
        config.microBatches =
            reader.integer(*optimizer, "micro_batches", where, false)
                .value_or(1);
        if (config.microBatches < 1)
          reader.fail(where, "\"optimizer\" has \"micro_batches\" below 1");
      }
      step.optimizer = config;
    }
    step.accumulatingStep =
        reader.string(entry, "accumulating_step", where, false);
    step.accumulatesFor = reader.string(entry, "accumulates_for", where, false);
    step.microBatches =
        reader.integer(entry, "micro_batches", where, false).value_or(0);
    if (step.microBatches < 0)
      reader.fail(where, "\"micro_batches\" is negative");
    for (const char *list : {"args", "results"}) {
      auto tensors = entry.find(list);
      if (tensors == entry.end() || !tensors->is_array()) {
        reader.fail(where, std::string("missing \"") + list + "\" array");
        break;
      }
      for (size_t i = 0; i < tensors->size(); ++i) {
        std::string tensorWhere =
            where + ", " + list + "[" + std::to_string(i) + "]";
        std::optional<TensorSpec> spec =
            reader.tensor((*tensors)[i], tensorWhere);
        if (!spec)
          return std::nullopt;
        (std::string(list) == "args" ? step.args : step.results)
            .push_back(std::move(*spec));
      }
    }
    if (reader.failed())
      return std::nullopt;
    checkStep(step, manifest.worldSize, manifest.gridShape, reader);
    if (reader.failed())
      return std::nullopt;
    manifest.steps.push_back(std::move(step));
  }
  for (const StepSpec &step : manifest.steps) {
    checkAccumulatingPair(manifest, step, reader);
    for (const TensorSpec &arg : step.args)
      if (arg.arenaOffset)
        reader.fail("step '" + step.name + "'",
                    "argument '" + arg.name +
                        "' has an \"arena_offset\" (only results do)");
    for (const TensorSpec &result : step.results)
      if (result.arenaOffset &&
          *result.arenaOffset >
              manifest.stepArenaBytes -
                  result.bufferNumel() * int64_t(dcrt::dtypeSize(result.dtype)))
        reader.fail("step '" + step.name + "'",
                    "a " + result.kindName + " result at \"arena_offset\" " +
                        std::to_string(*result.arenaOffset) +
                        " ends past the step arena (" +
                        std::to_string(manifest.stepArenaBytes) + " bytes)");
  }
  size_t axes = std::max<size_t>(manifest.gridShape.size(), 1);
  for (const StepSpec &step : manifest.steps)
    for (const TensorSpec &arg : step.args)
      if (arg.seqAxis && *arg.seqAxis >= int64_t(axes))
        reader.fail("manifest", "'" + arg.name + "' has \"seq_axis\" " +
                                    std::to_string(*arg.seqAxis) +
                                    ", but the grid has " +
                                    std::to_string(axes) + " axes");
  if (reader.failed())
    return std::nullopt;
  return manifest;
}

std::string dcrun::checkManifestSeal(std::string_view text) {
  constexpr std::string_view key = ",\"checksum\":\"";
  constexpr size_t digits = 16, member = key.size() + digits + 2;
  if (text.size() < member ||
      text.substr(text.size() - member, key.size()) != key ||
      text.substr(text.size() - 2) != "\"}")
    return "it has no checksum (its last member must be \"checksum\", as "
           "dc-compile writes it: recompile the artifact)";
  std::string_view sealed = text.substr(text.size() - digits - 2, digits);
  std::string_view body = text.substr(0, text.size() - member);
  std::string actual =
      checksumText(checksumBytes(kChecksumSeed, body.data(), body.size()));
  if (sealed != actual)
    return "it was changed after dc-compile wrote it (its checksum is " +
           std::string(sealed) + ", its text's " + actual +
           "): recompile the artifact instead of editing it";
  return "";
}
