//===- dc-run.cpp - run a training step compiled by dc --------------------===//
//
// Loads the artifact (a shared library dc-compile wrote), checks it against
// this libdcrt, starts or joins the ranks, owns the parameters (shards, fp32
// masters, AdamW state), feeds data, steps, logs, traces and checkpoints.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "Data.h"
#include "ElfCheck.h"
#include "HostAccess.h"
#include "Launcher.h"
#include "Manifest.h"
#include "Options.h"
#include "Params.h"

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

using namespace dcrun;

namespace {
using EntryFunction = void (*)(void **);

struct Artifact {
  void *handle = nullptr;
  Manifest manifest;

  void *symbol(const std::string &name, const std::string &path) const {
    void *address = dlsym(handle, name.c_str());
    if (!address)
      dcrt::fatal("artifact '%s' does not export '%s'", path.c_str(),
                  name.c_str());
    return address;
  }
};

/// Opens the artifact and checks that this runtime can run it.
Artifact openArtifact(const std::string &path) {
  Artifact artifact;
  // A name without a slash would make dlopen search the library path, not
  // the current directory.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  // A truncated file would be a SIGBUS inside dlopen, without a word.
  std::string damage = checkSharedLibraryFile(file);
  if (!damage.empty())
    dcrt::fatal("cannot load artifact '%s': %s", path.c_str(), damage.c_str());
  artifact.handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!artifact.handle)
    dcrt::fatal("cannot load artifact '%s': %s", path.c_str(), dlerror());
  auto version = reinterpret_cast<int32_t (*)()>(
      artifact.symbol("dc_artifact_abi_version", path));
  if (version() != dcrt_abi_version())
    dcrt::fatal("artifact '%s' was compiled for dcrt ABI version %d, but "
                "this libdcrt implements version %d: recompile it with the "
                "dc that matches this runtime",
                path.c_str(), version(), dcrt_abi_version());
  auto manifestText = reinterpret_cast<const char *(*)()>(
      artifact.symbol("dc_artifact_manifest", path));
  std::string error;
  std::optional<Manifest> manifest = parseManifest(manifestText(), error);
  if (!manifest)
    dcrt::fatal("artifact '%s' has a bad manifest: %s", path.c_str(),
                error.c_str());
  if (manifest->abi != dcrt_abi_version())
    dcrt::fatal("artifact '%s': its manifest says ABI version %d, but it "
                "exports version %d",
                path.c_str(), manifest->abi, version());
  artifact.manifest = std::move(*manifest);
  return artifact;
}

std::string formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

/// The backend an artifact's target runs on; DCRT_BACKEND, when set,
/// overrides it (dcrt_init reads it).
int32_t backendFor(const std::string &target) {
  const char *forced = std::getenv("DCRT_BACKEND");
  if (forced && *forced)
    return DCRT_BACKEND_AUTO;
  if (target.empty() || target == "cpu")
    return DCRT_BACKEND_HOST;
  if (target == "h200")
    return DCRT_BACKEND_CUDA;
  dcrt::fatal("the artifact targets '%s', which no backend of this libdcrt "
              "runs (cpu: host, h200: cuda)",
              target.c_str());
}

const StepSpec &pickStep(const Manifest &manifest, const std::string &name) {
  // An accumulating form runs only as part of its final form's step.
  for (const StepSpec &step : manifest.steps)
    if ((name.empty() || step.name == name) && step.accumulatesFor.empty())
      return step;
  for (const StepSpec &step : manifest.steps)
    if (step.name == name)
      dcrt::fatal("step '%s' is the accumulating form of '%s'; run '%s' with "
                  "--micro-batches N",
                  name.c_str(), step.accumulatesFor.c_str(),
                  step.accumulatesFor.c_str());
  std::string known;
  for (const StepSpec &step : manifest.steps)
    known += " " + step.name;
  dcrt::fatal("the artifact has no step '%s' (it has:%s)", name.c_str(),
              known.c_str());
}

std::string formatBytes(int64_t bytes) {
  char text[32];
  if (bytes < 10 * 1024)
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  else if (bytes < 10 * 1024 * 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / 1048576.0);
  return text;
}

/// Thrown on every rank at once to end the training loop early; main
/// finalizes the runtime and exits with status 1.
struct StopTraining {};

/// Seconds since dc-run started, for the start-up line: what a run spends
/// before its first step (runtime, buffers, initial values, optimizer
/// state) is worth seeing when it is tens of seconds.
double secondsSinceStart() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The training loop of one rank.
class Trainer {
public:
  Trainer(const Options &options, const Artifact &artifact)
      : runtimeReady(secondsSinceStart()), options(options), artifact(artifact),
        step(pickStep(artifact.manifest, options.step)), rank(dcrt_rank()),
        worldSize(dcrt_world_size()),
        registry(rank, worldSize, artifact.manifest.gridShape),
        data(step, options.seed,
             options.vocab ? options.vocab
                           : artifact.manifest.vocab.value_or(0),
             options.dataFile, rank, worldSize, artifact.manifest.gridShape) {
    finalForm.entry = reinterpret_cast<EntryFunction>(
        artifact.symbol(step.entry, options.artifact));
    finalForm.spec = &step;
    if (!step.accumulatingStep.empty()) {
      const StepSpec *spec = artifact.manifest.findStep(step.accumulatingStep);
      accumulatingForm.spec = spec;
      accumulatingForm.entry = reinterpret_cast<EntryFunction>(
          artifact.symbol(spec->entry, options.artifact));
    }
    for (const TensorSpec &arg : step.args)
      if (arg.kind == TensorKind::Param)
        registry.add(paramSpec(arg));
    // A bf16 master is the parameter itself: it must be bf16.
    if (options.adamw.masterDtype == DCRT_BF16)
      for (const dcrun::Param &param : registry.params())
        if (param.spec.hasGrad && param.spec.dtype != DCRT_BF16)
          dcrt::fatal("--master-dtype bf16 keeps the master weights in the "
                      "parameters themselves, which must be bf16; '%s' is %s",
                      param.spec.name.c_str(),
                      dcrt::dtypeName(param.spec.dtype));
    bindBuffers();
  }

  void run() {
    double buffersReady = secondsSinceStart();
    int64_t first = 1;
    if (!options.load.empty()) {
      first = dcrun::loadCheckpoint(options.load, registry) + 1;
      report("loaded checkpoint %s (step %lld)\n", options.load.c_str(),
             static_cast<long long>(first - 1));
    } else if (!options.init.empty()) {
      dcrun::loadInitialWeights(options.init, registry);
      report("loaded initial weights %s\n", options.init.c_str());
    } else {
      dcrun::InitOptions init;
      init.seed = options.seed;
      init.std = options.initStd;
      registry.initialize(init);
    }
    double valuesReady = secondsSinceStart();
    optimizer->loadState(registry);
    double stateReady = secondsSinceStart();
    if (options.cudaGraphs && !dcrt::canCaptureSteps())
      dcrt::fatal("--cuda-graphs needs a backend that captures steps (cuda); "
                  "this run uses the %s backend",
                  dcrt_backend_name());
    int64_t last = first + options.steps - 1;
    int64_t saveAt = options.saveStep ? options.saveStep : last;
    if (!options.save.empty() && (saveAt < first - 1 || saveAt > last))
      dcrt::fatal("--save-step %lld is outside the steps run (%lld to %lld)",
                  static_cast<long long>(saveAt), static_cast<long long>(first),
                  static_cast<long long>(last));
    // The gradients it writes are one micro-batch's; their mean lives in
    // the optimizer's sums.
    if (!options.saveGrads.empty() && microBatches > 1)
      dcrt::fatal("--save-grads writes the gradients of one entry call; it "
                  "does not take --micro-batches %lld",
                  static_cast<long long>(microBatches));
    if (!options.trace.empty())
      dcrt::setTracing(true);
    report("dc-run: start-up %.1f s (runtime %.1f s, buffers %.1f s, %s %.1f "
           "s, optimizer state %.1f s)\n",
           stateReady, runtimeReady, buffersReady - runtimeReady,
           !options.load.empty()   ? "checkpoint"
           : !options.init.empty() ? "initial weights"
                                   : "initial values",
           valuesReady - buffersReady, stateReady - valuesReady);
    printHeader();

    if (!options.save.empty() && saveAt == first - 1)
      save(saveAt); // --steps 0: re-save what was loaded or initialized
    std::vector<double> stepSeconds;
    for (int64_t s = first; s <= last; ++s) {
      recordRankStatus(RankState::InStep, s);
      // The step's time starts before its data is written: the write waits
      // for the previous step's AdamW, still queued on the device (not
      // waited for, below), which would otherwise fall between two steps'
      // times (on one H200, config B measured 28 ms a step without most of
      // its 13.5 ms update, 42 ms with it).
      int64_t begin = dcrt::nowNs();
      // Gradient accumulation: the entry runs once per micro-batch, each
      // on its slice of the step's global batch, and the optimizer sums
      // the gradient shards in fp32. Every micro-batch's loss is a mean
      // over the same number of terms (static shapes), so the step's loss
      // is their mean and its gradient the mean of theirs: N micro-batches
      // of B rows give one step of N B rows.
      double loss = 0;
      for (int64_t micro = 0; micro < microBatches; ++micro) {
        data.fill(s, micro, microBatches);
        // With accumulators, every micro-batch but the last runs the
        // accumulating form (the step sums those gradients itself) and
        // the last the final one, which reduces the sums.
        bool accumulating = accumulatingForm.entry && micro + 1 < microBatches;
        if (micro == 0)
          zeroAccumulators();
        runEntry(accumulating ? accumulatingForm : finalForm, s, first);
        if (options.checkFinite)
          noteNonFiniteOp(micro);
        double microLoss = 0;
        readToHost(*lossBuffer, dcrt::dtypeSize(lossType),
                   [&](const void *host) {
                     microLoss = dcrt::loadAsDouble(host, lossType, 0);
                   });
        loss += microLoss;
        if (microBatches > 1)
          optimizer->accumulate(registry, micro, microBatches);
      }
      loss /= static_cast<double>(microBatches);
      int64_t entryEnd = dcrt::nowNs();
      int64_t optimizerBegin = dcrt::nowNs();
      // The loss and the gradients' squared norm in one all-reduce. Both are
      // checked before the update: a non-finite one would make every
      // parameter NaN. With --check-finite the ranks whose checks found a
      // non-finite value ride along, and their report comes first: it
      // names the op where the values turned, the loss and the norm only
      // where they ended up.
      double localLoss = loss;
      double localSquares = optimizer->gradientSquares(registry);
      double sums[3] = {loss, localSquares, nonFiniteOp.empty() ? 0.0 : 1.0};
      dcrt::allReduceSum(sums, 3);
      loss = sums[0] / worldSize;
      double gradNorm = std::sqrt(sums[1]);
      if (sums[2] > 0)
        stopAtNonFiniteOp(s);
      if (!std::isfinite(loss))
        stopAtNonFinite(s, "the loss", localLoss);
      else if (!std::isfinite(gradNorm))
        stopAtNonFinite(s, "the gradient norm", localSquares);
      if (!options.saveGrads.empty() && s == last) {
        dcrun::saveGradients(options.saveGrads, registry, s);
        report("saved gradients %s (step %lld)\n", options.saveGrads.c_str(),
               static_cast<long long>(s));
      }
      // Not waited for: the host enqueues the next step while the update
      // runs (waiting here starved the GPU at the next step's start: config
      // A took 107 ms instead of 96 on one H200), so time_ms covers the
      // previous step's update.
      optimizer->step(registry, options.adamw, s,
                      clipScale(gradNorm, options.adamw.maxGradNorm));
      int64_t end = dcrt::nowNs();
      dcrt::traceSpan(dcrt::Track::Compute, "step", begin, end, "step", s);
      dcrt::traceSpan(dcrt::Track::Compute, "entry", begin, entryEnd);
      dcrt::traceSpan(dcrt::Track::Compute, "optimizer", optimizerBegin, end);

      double seconds = (end - begin) * 1e-9;
      stepSeconds.push_back(seconds);
      dcrt::MemoryStats memory = dcrt::memoryStats();
      int64_t peak = memory.peakBytes();
      dcrt::resetPeakMemory();
      std::string norm = " grad_norm=" + formatDouble(gradNorm);
      std::string throughput =
          tokensPerStep > 0
              ? " tokens_per_s=" + formatDouble(tokensPerStep / seconds)
              : "";
      // Per rank: the FLOPs dc's cost model counts in the step's ops, in
      // every micro-batch.
      if (step.flops > 0)
        throughput += " tflops=" +
                      formatDouble(step.flops * microBatches / seconds * 1e-12);
      // On a GPU: everything the device holds, the pools, the host
      // program's buffers and what CUDA and NCCL keep for themselves.
      std::string device = memory.deviceUsedBytes > 0
                               ? " device_peak_bytes=" +
                                     std::to_string(memory.devicePeakBytes()) +
                                     " device_used_bytes=" +
                                     std::to_string(memory.deviceUsedBytes)
                               : "";
      report("step=%lld loss=%.9g time_ms=%.3f peak_mem_bytes=%lld%s%s%s\n",
             static_cast<long long>(s), loss, seconds * 1e3,
             static_cast<long long>(peak), device.c_str(), throughput.c_str(),
             norm.c_str());
      // The first step warms caches and pools: profile the others.
      if (s == first && last > first)
        dcrt::resetOpProfile();
      if (!options.save.empty() && s == saveAt)
        save(s);
    }
    printSummary(stepSeconds, first);
    if (!options.trace.empty()) {
      dcrt::writeTrace(options.trace);
      report("wrote trace %s\n", options.trace.c_str());
    }
    if (!options.profileOut.empty())
      writeProfile();
  }

private:
  /// Runs the entry once (one micro-batch) and waits for it: from the
  /// second step on, replayed from its CUDA graph with --cuda-graphs.
  /// One compiled form of the step: its entry and the buffers it takes.
  struct Form {
    const StepSpec *spec = nullptr;
    EntryFunction entry = nullptr;
    std::vector<void *> pointers;
    /// Where this form writes each gradient it returns: its bytes of the
    /// step arena, or a buffer of dc-run's. Param::grad points there after
    /// each call of this form.
    std::vector<std::pair<dcrun::Param *, void *>> grads;
    dcrt::StepGraph graph;
  };

  void runEntry(Form &form, int64_t s, int64_t first) {
    int64_t ended = dcrt::endedSteps();
    // From the second step on, a captured step replays the first's work
    // with one launch (the runtime's bookkeeping ran at capture).
    if (options.cudaGraphs && s > first && !form.graph)
      form.graph = dcrt::captureStep(
          [](void *captured) {
            auto *self = static_cast<Form *>(captured);
            self->entry(self->pointers.data());
          },
          &form);
    if (form.graph)
      dcrt::replay(form.graph);
    else
      form.entry(form.pointers.data());
    // What reads the gradients next (norm, AdamW, micro-batch sums,
    // --save-grads) reads where this form wrote them.
    for (auto [param, data] : form.grads)
      if (param->grad.data() != data)
        param->grad =
            dcrt::Buffer::borrow(data, param->grad.size(), param->grad.kind());
    // The entry may return with its work still queued on the device.
    dcrt::synchronize();
    // Else its step buffers would pile up, step after step.
    if (dcrt::endedSteps() == ended && !form.graph)
      dcrt::fatal("the entry %s returned without calling dcrt_end_step",
                  form.spec->entry.c_str());
  }

  /// The step's accumulators start each optimizer step at zero.
  void zeroAccumulators() {
    for (auto &[param, buffer] : accumulators)
      writeFromHost(buffer, buffer.size(), [&](void *host) {
        std::memset(host, 0, static_cast<size_t>(buffer.size()));
      });
  }

  /// Every rank sees the same non-finite `what` (an all-reduced value) at
  /// step `s`; `local` is this rank's part of it. Unless the user allowed
  /// it, the job stops here, rank 0 naming the step and the ranks whose
  /// part is not finite (one more all-reduce, on this path only).
  void stopAtNonFinite(int64_t s, const char *what, double local) {
    std::vector<double> bad(worldSize, 0.0);
    bad[rank] = std::isfinite(local) ? 0.0 : 1.0;
    dcrt::allReduceSum(bad.data(), worldSize);
    std::string ranks;
    for (int r = 0; r < worldSize; ++r)
      if (bad[r] != 0)
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    std::string where = ranks.empty() ? "the sum over the ranks"
                        : ranks.find(',') == std::string::npos
                            ? "rank " + ranks
                            : "ranks " + ranks;
    if (options.allowNonFinite) {
      if (rank == 0)
        dcrt::warn("step %lld: %s is not finite (%s); training goes on "
                   "(--allow-nonfinite)",
                   static_cast<long long>(s), what, where.c_str());
      return;
    }
    // Every rank knows: the job ends cleanly (main finalizes), rank 0
    // saying why.
    if (rank == 0) {
      std::fprintf(stderr,
                   "dc-run: error: step %lld: %s is not finite (%s); training "
                   "stops before the parameters are updated "
                   "(--allow-nonfinite keeps going)\n",
                   static_cast<long long>(s), what, where.c_str());
      std::fflush(stderr);
    }
    throw StopTraining{};
  }

  /// --check-finite, after entry call `micro` of the step: the runtime's
  /// first check of the call that found a NaN or an infinity, kept in
  /// nonFiniteOp unless an earlier call of the step found one.
  void noteNonFiniteOp(int64_t micro) {
    const char *what = nullptr;
    int64_t count = 0;
    const char *site = dcrt_first_nonfinite(&what, &count);
    if (!site || !nonFiniteOp.empty())
      return;
    std::vector<std::string> context;
    if (worldSize > 1)
      context.push_back("rank " + std::to_string(rank));
    if (microBatches > 1)
      context.push_back("micro-batch " + std::to_string(micro + 1) + " of " +
                        std::to_string(microBatches));
    nonFiniteOp = std::string(what) + " in " + std::to_string(count) +
                  (count == 1 ? " element" : " elements") +
                  " of the output of " + site;
    for (size_t i = 0; i < context.size(); ++i)
      nonFiniteOp += (i ? ", " : " (") + context[i];
    if (!context.empty())
      nonFiniteOp += ")";
  }

  /// --check-finite: the checks of some rank found a non-finite value at
  /// step `s` (every rank knows: the count was all-reduced). Rank 0 names
  /// each such rank's first op, and the job ends before the update, as on
  /// a non-finite loss, whatever --allow-nonfinite says: the user asked to
  /// stop at the first.
  void stopAtNonFiniteOp(int64_t s) {
    std::vector<std::string> reports = dcrt::gatherStrings(nonFiniteOp, 0);
    if (rank == 0) {
      for (const std::string &report : reports)
        if (!report.empty())
          std::fprintf(stderr,
                       "dc-run: error: step %lld: the first non-finite value: "
                       "%s\n",
                       static_cast<long long>(s), report.c_str());
      std::fflush(stderr);
    }
    throw StopTraining{};
  }

  /// Prints on rank 0 only: every rank computes the same line.
  void report(const char *format, ...) __attribute__((format(printf, 2, 3))) {
    if (rank != 0)
      return;
    va_list args;
    va_start(args, format);
    std::vprintf(format, args);
    va_end(args);
    std::fflush(stdout);
  }

  dcrun::ParamSpec paramSpec(const TensorSpec &arg) const {
    dcrun::ParamSpec spec;
    spec.id = arg.id;
    spec.name = arg.name;
    spec.shape = arg.shape;
    spec.dtype = arg.dtype;
    spec.sharded = arg.local.has_value();
    spec.shardAxes = arg.shardAxes;
    spec.onHost = arg.onHost;
    const TensorSpec *grad = step.findGrad(arg.id);
    spec.hasGrad = grad != nullptr;
    spec.gradDtype = grad ? grad->dtype : arg.dtype;
    return spec;
  }

  /// The entries' buffers: arguments, then results, in manifest order. Both
  /// forms of a step share the parameters, data, gradients, accumulators
  /// (argument and result alike: updated in place) and the loss.
  void bindBuffers() {
    for (const TensorSpec &arg : step.args)
      if (arg.kind == TensorKind::GradAccum) {
        accumulators.emplace_back(
            arg.param,
            dcrt::Buffer(arg.numel() * int64_t(sizeof(float)),
                         dcrt::MemoryKind::Device, "a gradient accumulator"));
        registry.find(arg.param)->spec.stepAccumulates = true;
      }
    bindForm(finalForm);
    if (accumulatingForm.spec)
      bindForm(accumulatingForm);
    // A gradient every form keeps in the step arena needs no buffer of
    // dc-run's (the memory dc planned); one some form writes to the buffer
    // keeps it, in ownedGrads, as Param::grad moves between the forms'.
    for (dcrun::Param &param : registry.params()) {
      if (!param.grad.data() || !param.grad.owned())
        continue;
      void *owned = param.grad.data();
      void *first = nullptr;
      bool used = false;
      for (const Form *form : {&finalForm, &accumulatingForm})
        for (auto [p, data] : form->grads)
          if (p == &param) {
            used |= data == owned;
            first = first ? first : data;
          }
      if (!first)
        continue;
      int64_t bytes = param.grad.size();
      dcrt::MemoryKind kind = param.grad.kind();
      if (used)
        ownedGrads.push_back(std::move(param.grad));
      else
        ++gradientsInArena;
      param.grad = dcrt::Buffer::borrow(first, bytes, kind);
    }
  }

  void bindForm(Form &form) {
    for (const TensorSpec &arg : form.spec->args) {
      if (arg.kind == TensorKind::Param)
        form.pointers.push_back(registry.find(arg.id)->data.data());
      else if (arg.kind == TensorKind::GradAccum)
        form.pointers.push_back(accumulatorOf(arg.param));
      else
        form.pointers.push_back(data.buffer(dataIndex(arg)));
    }
    for (const TensorSpec &result : form.spec->results) {
      if (result.kind == TensorKind::Grad) {
        // In the step arena where the step keeps it (dc's memory plan
        // counts it from where backward makes it), else dc-run's buffer.
        dcrun::Param &param = *registry.find(result.param);
        void *data =
            result.arenaOffset
                ? static_cast<char *>(dcrt_step_arena()) + *result.arenaOffset
                : param.grad.data();
        form.grads.push_back({&param, data});
        form.pointers.push_back(data);
        continue;
      }
      if (result.kind == TensorKind::GradAccum) {
        form.pointers.push_back(accumulatorOf(result.param));
        continue;
      }
      if (result.kind == TensorKind::Loss && lossBuffer) {
        form.pointers.push_back(lossBuffer->data());
        continue;
      }
      ownedResults.emplace_back(result.bufferNumel() *
                                    dcrt::dtypeSize(result.dtype),
                                dcrt::MemoryKind::Device, result.name.c_str());
      form.pointers.push_back(ownedResults.back().data());
      if (result.kind == TensorKind::Loss) {
        lossBuffer = &ownedResults.back();
        lossType = result.dtype;
      }
    }
  }

  void *accumulatorOf(int32_t param) {
    for (auto &[id, buffer] : accumulators)
      if (id == param)
        return buffer.data();
    dcrt::fatal("internal: parameter %d has no accumulator", param);
  }

  /// The index in the picked step's arguments of the data argument `arg`
  /// of either form (the same name).
  size_t dataIndex(const TensorSpec &arg) const {
    for (size_t i = 0; i < step.args.size(); ++i)
      if (step.args[i].kind == TensorKind::Data &&
          step.args[i].name == arg.name)
        return i;
    dcrt::fatal("internal: no data argument '%s'", arg.name.c_str());
  }

  void save(int64_t atStep) {
    optimizer->storeState(registry);
    dcrun::saveCheckpoint(options.save, registry, atStep,
                          options.allowNonFinite);
    report("saved checkpoint %s (step %lld)\n", options.save.c_str(),
           static_cast<long long>(atStep));
  }

  void printHeader() {
    int64_t elements = 0, onHost = 0;
    for (const dcrun::Param &param : registry.params()) {
      elements += param.fullNumel;
      onHost += param.spec.onHost;
    }
    std::string hostParams =
        onHost ? ", " + std::to_string(onHost) + " in host memory" : "";
    if (microBatches > 1)
      hostParams +=
          ", " + std::to_string(microBatches) + " micro-batches per step";
    if (!accumulators.empty())
      hostParams += " (" + std::to_string(accumulators.size()) +
                    " gradients summed by the step)";
    int64_t grads = 0;
    for (const dcrun::Param &param : registry.params())
      grads += param.spec.hasGrad;
    const Manifest &manifest = artifact.manifest;
    const dcrun::AdamWConfig &adamw = options.adamw;
    report("dc-run: %s, step %s, %d rank%s, %zu parameters (%lld "
           "elements)%s, plan: gather arena %s, host pool %s; AdamW state: "
           "%s master, %s moments (%lld B/element); gradients in the step "
           "arena: %lld of %lld\n",
           options.artifact.c_str(), step.name.c_str(), worldSize,
           worldSize == 1 ? "" : "s", registry.params().size(),
           static_cast<long long>(elements), hostParams.c_str(),
           formatBytes(
               options.gatherArenaBytes.value_or(manifest.gatherArenaBytes))
               .c_str(),
           formatBytes(options.hostPoolBytes.value_or(manifest.hostPoolBytes))
               .c_str(),
           dcrt::dtypeName(adamw.masterDtype),
           dcrt::dtypeName(adamw.momentDtype),
           static_cast<long long>(dcrun::stateBytesPerElement(adamw)),
           static_cast<long long>(gradientsInArena),
           static_cast<long long>(grads));
  }

  /// The mean over all steps, and, with more than one, the mean and
  /// median of the steps after the first: the first warms caches, pools,
  /// cuBLASLt's heuristics and (with --cuda-graphs) captures the graph, so
  /// it is no steady-state step (config A: 375.9 ms over 6 steps with the
  /// capture, 83-84 ms each after it).
  void printSummary(const std::vector<double> &stepSeconds, int64_t first) {
    if (stepSeconds.empty())
      return;
    auto mean = [](const double *begin, const double *end) {
      return std::accumulate(begin, end, 0.0) * 1e3 /
             static_cast<double>(end - begin);
    };
    const double *all = stepSeconds.data();
    size_t count = stepSeconds.size();
    std::string steady;
    if (count > 1) {
      std::vector<double> rest(all + 1, all + count);
      std::sort(rest.begin(), rest.end());
      size_t n = rest.size();
      double median = n % 2 ? rest[n / 2] : (rest[n / 2 - 1] + rest[n / 2]) / 2;
      char text[160];
      std::snprintf(text, sizeof(text),
                    "; steps %lld-%lld: mean %.3f ms, median %.3f ms",
                    static_cast<long long>(first + 1),
                    static_cast<long long>(first + count - 1),
                    mean(all + 1, all + count), median * 1e3);
      steady = text;
    }
    report("summary: %lld steps, mean step %.3f ms%s\n",
           static_cast<long long>(count), mean(all, all + count),
           steady.c_str());
    for (const dcrt::TransferStats &stats : dcrt::transferStats())
      report("  %-20s %6lld in %9.3f ms, %s\n", stats.kind,
             static_cast<long long>(stats.count), stats.seconds * 1e3,
             formatBytes(stats.bytes).c_str());
    dcrt::MemoryStats memory = dcrt::memoryStats();
    report("  memory reserved: gather arena %s, host pool %s, step buffers "
           "%s, staging %s\n",
           formatBytes(memory.gatherArena.reserved).c_str(),
           formatBytes(memory.hostPool.reserved).c_str(),
           formatBytes(memory.stepBuffers.reserved).c_str(),
           formatBytes(memory.staging.reserved).c_str());
  }

  /// {"ops": {"<function>:<ordinal>": seconds}}: what the cost model reads.
  void writeProfile() {
    std::vector<dcrt::OpTime> ops = dcrt::opProfile();
    if (rank != 0)
      return;
    nlohmann::json times = nlohmann::json::object();
    for (const dcrt::OpTime &op : ops)
      times[op.key] = op.meanSeconds;
    std::ofstream file(options.profileOut);
    file << nlohmann::json{{"ops", times}}.dump(2) << "\n";
    file.close();
    if (!file)
      dcrt::fatal("cannot write the profile '%s'", options.profileOut.c_str());
    if (ops.empty())
      report("note: the artifact records no per-op times (it does not call "
             "dcrt_op_begin/dcrt_op_end); %s has no ops\n",
             options.profileOut.c_str());
    else
      report("wrote profile %s (%zu ops)\n", options.profileOut.c_str(),
             ops.size());
  }

  double runtimeReady; // seconds since start when the Trainer began
  const Options &options;
  const Artifact &artifact;
  const StepSpec &step;
  int rank, worldSize;
  dcrun::ParamRegistry registry;
  DataSource data;
  Form finalForm, accumulatingForm;
  /// The step's fp32 accumulators of full gradients, by parameter id.
  std::vector<std::pair<int32_t, dcrt::Buffer>> accumulators;
  std::unique_ptr<Optimizer> optimizer = createAdamW(options.adamw);
  int64_t microBatches = options.microBatches;
  /// Tokens the whole job trains on per step: the integer data arguments
  /// with a vocabulary (token ids) of every rank, in every micro-batch.
  double tokensPerStep = countTokens() * static_cast<double>(microBatches);

  double countTokens() const {
    double tokens = 0;
    for (const TensorSpec &arg : step.args)
      if (arg.kind == TensorKind::Data && arg.vocab &&
          !dcrt::isFloatDType(arg.dtype))
        tokens += static_cast<double>(arg.numel()) * worldSize;
    return tokens;
  }
  std::deque<dcrt::Buffer> ownedResults; // stable addresses
  /// Gradient buffers of dc-run's that some form writes (not in the arena).
  std::deque<dcrt::Buffer> ownedGrads;
  /// Gradients every form keeps in the step arena.
  int64_t gradientsInArena = 0;
  const dcrt::Buffer *lossBuffer = nullptr;
  int32_t lossType = DCRT_F32;
  /// --check-finite: this rank's first non-finite output of the step ("NaN
  /// in 3 elements of the output of <op>"), or empty.
  std::string nonFiniteOp;
};
} // namespace

int main(int argc, char **argv) {
  secondsSinceStart(); // the clock starts here
  dcrt::setErrorPrefix("dc-run");
  Options options;
  std::string help, error;
  if (!parseOptions(argc, argv, options, help, error)) {
    std::fprintf(stderr,
                 "dc-run: error: %s\n%s\nRun 'dc-run --help' for the "
                 "options.\n",
                 error.c_str(), usageLine);
    return 2;
  }
  if (!help.empty()) {
    std::fputs(help.c_str(), stdout);
    return 0;
  }

  Artifact artifact = openArtifact(options.artifact);
  const Manifest &manifest = artifact.manifest;
  // Without the checks compiled in there is nothing to run: a run that
  // found nothing would look like one that checked.
  if (options.checkFinite && !manifest.checkFinite)
    dcrt::fatal("--check-finite: %s was compiled without finite-value "
                "checks; compile it with dc-compile --check-finite",
                options.artifact.c_str());
  int launched = launchedWorldSize();
  if (launched == 0) {
    int nproc = options.nproc ? options.nproc : manifest.worldSize;
    if (nproc != manifest.worldSize)
      dcrt::fatal("--nproc %d, but artifact '%s' was compiled for %d ranks",
                  nproc, options.artifact.c_str(), manifest.worldSize);
    if (nproc > 1 && options.launcher == "tcp")
      startLocalTcpJob(nproc, argc, argv);
    if (nproc > 1)
      relaunchUnderMpirun(nproc, options.mpirun, argc, argv);
  } else if (options.nproc && options.nproc != launched) {
    dcrt::fatal("--nproc %d, but the launcher started %d ranks", options.nproc,
                launched);
  }

  dcrt_init_options init{};
  init.struct_size = sizeof(init);
  init.backend = backendFor(manifest.target);
  init.expected_world_size = manifest.worldSize;
  init.device = -1;
  init.grid_rank = static_cast<int32_t>(manifest.gridShape.size());
  init.grid_shape = manifest.gridShape.data();
  init.gather_arena_bytes =
      options.gatherArenaBytes.value_or(manifest.gatherArenaBytes);
  init.host_pool_bytes = options.hostPoolBytes.value_or(manifest.hostPoolBytes);
  init.step_arena_bytes = manifest.stepArenaBytes;
  init.step_buffer_bytes = manifest.stepBufferBytes;
  init.staging_bytes = manifest.stagingBytes;
  init.flags = (options.deterministic ? DCRT_INIT_DETERMINISTIC : 0) |
               (options.checkFinite ? DCRT_INIT_CHECK_FINITE : 0);
  dcrt_init(&init);
  // In a job dc-run started, it reports a rank that ends early.
  if (launched > 0)
    openRankStatus(dcrt_rank());
  int status = 0;
  try {
    Trainer trainer(options, artifact);
    trainer.run();
  } catch (const StopTraining &) {
    status = 1;
  }
  dcrt_finalize();
  recordRankStatus(status ? RankState::Stopped : RankState::Done, 0);
  return status;
}
