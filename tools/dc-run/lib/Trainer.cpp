//===- Trainer.cpp - the training loop of one rank ------------------------===//
#include "Trainer.h"
#include "Checkpoint.h"
#include "HostAccess.h"
#include "Launcher.h"
#include "Report.h"

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace dcrun;

double dcrun::secondsSinceStart() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

Trainer::Trainer(const Options &options, const Artifact &artifact)
    : runtimeReady(secondsSinceStart()), options(options), artifact(artifact),
      step(pickStep(artifact.manifest, options.step)), rank(dcrt_rank()),
      worldSize(dcrt_world_size()),
      registry(rank, worldSize, artifact.manifest.gridShape),
      data(step, options.seed,
           options.vocab ? options.vocab : artifact.manifest.vocab.value_or(0),
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
  if (step.optimizer) {
    // The step updates the parameters itself, with the hyperparameters it
    // was compiled for; dc-run gives it the state, learning rate and step.
    if (!options.saveGrads.empty())
      dcrt::fatal("--save-grads: the step runs its optimizer itself "
                  "(compiled with --optimizer-in-step) and returns no "
                  "gradients; compile without it to save them");
    adamw = compiledAdamWConfig(*step.optimizer, options.adamw);
    auto compiled = std::make_unique<CompiledAdamW>(step, registry);
    compiledOptimizer = compiled.get();
    optimizer = std::move(compiled);
  } else {
    optimizer = createAdamW(adamw);
  }
  // A bf16 master is the parameter itself: it must be bf16.
  if (adamw.masterDtype == DCRT_BF16)
    for (const dcrun::Param &param : registry.params())
      if (param.spec.hasGrad && param.spec.dtype != DCRT_BF16)
        dcrt::fatal("--master-dtype bf16 keeps the master weights in the "
                    "parameters themselves, which must be bf16; '%s' is %s",
                    param.spec.name.c_str(), dcrt::dtypeName(param.spec.dtype));
  bindBuffers();
}

void Trainer::run() {
  double buffersReady = secondsSinceStart();
  int64_t first = 1;
  if (options.saveEvery > 0) {
    std::error_code error;
    std::filesystem::create_directories(options.checkpointDir, error);
    if (error)
      dcrt::fatal("cannot create --checkpoint-dir '%s': %s",
                  options.checkpointDir.c_str(), error.message().c_str());
    // A job killed while saving left its temporary file: nothing else
    // writes here, so it is garbage.
    if (rank == 0)
      removeUnfinishedCheckpoints(options.checkpointDir);
  }
  // --resume: the latest periodic checkpoint, if the job saved one.
  std::string load = options.load;
  if (options.resume)
    load = latestCheckpoint(options.checkpointDir);
  if (!load.empty()) {
    int64_t loaded = dcrun::loadCheckpoint(load, registry);
    // Step numbers stay in int64_t: the last one run is loaded + steps.
    if (loaded >= INT64_MAX - options.steps)
      dcrt::fatal("checkpoint '%s' is at step %lld; %lld more would pass "
                  "the largest step number (%lld)",
                  load.c_str(), static_cast<long long>(loaded),
                  static_cast<long long>(options.steps),
                  static_cast<long long>(INT64_MAX - 1));
    first = loaded + 1;
    report("loaded checkpoint %s (step %lld)\n", load.c_str(),
           static_cast<long long>(loaded));
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
  // Resumed, --steps is the run's last step: a restarted job ends where
  // the uninterrupted one would have.
  int64_t last = options.resume ? std::max(options.steps, first - 1)
                                : first + options.steps - 1;
  int64_t saveAt = saveStepOf(options, last);
  std::string unusable = checkStepOptions(options, first, last);
  if (!unusable.empty())
    dcrt::fatal("%s", unusable.c_str());
  if (!options.trace.empty())
    dcrt::setTracing(true);
  report("dc-run: start-up %.1f s (runtime %.1f s, buffers %.1f s, %s %.1f "
         "s, optimizer state %.1f s)\n",
         stateReady, runtimeReady, buffersReady - runtimeReady,
         !load.empty()           ? "checkpoint"
         : !options.init.empty() ? "initial weights"
                                 : "initial values",
         valuesReady - buffersReady, stateReady - valuesReady);
  printHeader();

  if (!options.save.empty() && saveAt == first - 1)
    save(options.save, saveAt); // --steps 0: re-save what was loaded
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
    if (compiledOptimizer)
      compiledOptimizer->setStep(adamw.lr, s);
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
      readToHost(*lossBuffer, dcrt::dtypeSize(lossType), [&](const void *host) {
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
    // A step that runs its optimizer itself returns the global norm (and
    // skipped its update if it is not finite).
    double localLoss = loss;
    double localSquares =
        compiledOptimizer ? 0.0 : optimizer->gradientSquares(registry);
    double sums[3] = {loss, localSquares, nonFiniteOp.empty() ? 0.0 : 1.0};
    dcrt::allReduceSum(sums, 3);
    loss = sums[0] / worldSize;
    if (compiledOptimizer)
      localSquares = sums[1] = compiledOptimizer->squaredNorm();
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
    optimizer->step(registry, adamw, s, clipScale(gradNorm, adamw.maxGradNorm));
    int64_t end = dcrt::nowNs();
    dcrt::traceSpan(dcrt::Track::Compute, "step", begin, end, "step", s);
    dcrt::traceSpan(dcrt::Track::Compute, "entry", begin, entryEnd);
    dcrt::traceSpan(dcrt::Track::Compute, "optimizer", optimizerBegin, end);

    double seconds = (end - begin) * 1e-9;
    stepSeconds.push_back(seconds);
    stepResults.push_back({s, loss, gradNorm, seconds});
    dcrt::MemoryStats memory = dcrt::memoryStats();
    int64_t peak = memory.peakBytes();
    if (memory.devicePeakBytes() > measuredPeak) {
      measuredPeak = memory.devicePeakBytes();
      peakMemory = memory;
    }
    workspacePeak =
        std::max(workspacePeak, memory.matmulWorkspace.highWater +
                                    memory.attentionWorkspace.highWater +
                                    memory.moeWorkspace.highWater);
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
    std::string device =
        memory.deviceUsedBytes > 0
            ? " device_peak_bytes=" + std::to_string(memory.devicePeakBytes()) +
                  " device_used_bytes=" + std::to_string(memory.deviceUsedBytes)
            : "";
    report("step=%lld loss=%.9g time_ms=%.3f peak_mem_bytes=%lld%s%s%s\n",
           static_cast<long long>(s), loss, seconds * 1e3,
           static_cast<long long>(peak), device.c_str(), throughput.c_str(),
           norm.c_str());
    // The first step warms caches and pools: profile the others.
    if (s == first && last > first)
      dcrt::resetOpProfile();
    if (!options.save.empty() && s == saveAt)
      save(options.save, s);
    if (options.saveEvery > 0 && s % options.saveEvery == 0)
      save(periodicCheckpoint(options.checkpointDir, s), s);
  }
  printSummary(stepSeconds, first);
  checkMemoryPlan();
  if (!options.trace.empty()) {
    dcrt::writeTrace(options.trace);
    report("wrote trace %s\n", options.trace.c_str());
  }
  if (!options.profileOut.empty())
    writeProfile();
}

/// Runs the entry once (one micro-batch) and waits for it: from the
/// second step on, replayed from its CUDA graph with --cuda-graphs.
void Trainer::runEntry(Form &form, int64_t s, int64_t first) {
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
void Trainer::zeroAccumulators() {
  for (auto &[param, buffer] : accumulators)
    writeFromHost(buffer, buffer.size(), [&](void *host) {
      std::memset(host, 0, static_cast<size_t>(buffer.size()));
    });
}

/// Every rank sees the same non-finite `what` (an all-reduced value) at
/// step `s`; `local` is this rank's part of it. Unless the user allowed
/// it, the job stops here, rank 0 naming the step and the ranks whose
/// part is not finite (one more all-reduce, on this path only).
void Trainer::stopAtNonFinite(int64_t s, const char *what, double local) {
  std::vector<double> bad(worldSize, 0.0);
  bad[rank] = std::isfinite(local) ? 0.0 : 1.0;
  dcrt::allReduceSum(bad.data(), worldSize);
  std::string where = describeNonFiniteRanks(bad);
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
void Trainer::noteNonFiniteOp(int64_t micro) {
  const char *what = nullptr;
  int64_t count = 0;
  const char *site = dcrt_first_nonfinite(&what, &count);
  if (!site || !nonFiniteOp.empty())
    return;
  nonFiniteOp = describeNonFiniteOp(what, count, site, rank, worldSize, micro,
                                    microBatches);
}

/// --check-finite: the checks of some rank found a non-finite value at
/// step `s` (every rank knows: the count was all-reduced). Rank 0 names
/// each such rank's first op, and the job ends before the update, as on
/// a non-finite loss, whatever --allow-nonfinite says: the user asked to
/// stop at the first.
void Trainer::stopAtNonFiniteOp(int64_t s) {
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
void Trainer::report(const char *format, ...) {
  if (rank != 0)
    return;
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fflush(stdout);
}

ParamSpec Trainer::paramSpec(const TensorSpec &arg) const {
  dcrun::ParamSpec spec;
  spec.id = arg.id;
  spec.name = arg.name;
  spec.shape = arg.shape;
  spec.dtype = arg.dtype;
  spec.sharded = arg.local.has_value();
  spec.shardAxes = arg.shardAxes;
  spec.onHost = arg.onHost;
  const TensorSpec *grad = step.findGrad(arg.id);
  spec.updatedByStep = step.findResult(TensorKind::ParamUpdate, arg.id);
  spec.hasGrad = grad != nullptr || spec.updatedByStep;
  spec.gradDtype = grad ? grad->dtype : arg.dtype;
  return spec;
}

/// The entries' buffers: arguments, then results, in manifest order. Both
/// forms of a step share the parameters, data, gradients, accumulators
/// (argument and result alike: updated in place) and the loss.
void Trainer::bindBuffers() {
  for (const TensorSpec &arg : step.args)
    if (arg.kind == TensorKind::GradAccum) {
      accumulators.emplace_back(
          arg.param,
          dcrt::Buffer(arg.bufferNumel() * int64_t(sizeof(float)),
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

void Trainer::bindForm(Form &form) {
  for (const TensorSpec &arg : form.spec->args) {
    if (arg.kind == TensorKind::Param)
      form.pointers.push_back(registry.find(arg.id)->data.data());
    else if (arg.kind == TensorKind::GradAccum)
      form.pointers.push_back(accumulatorOf(arg.param));
    else if (arg.kind == TensorKind::OptState ||
             arg.kind == TensorKind::LearningRate ||
             arg.kind == TensorKind::StepCount)
      form.pointers.push_back(compiledOptimizer->bufferOf(arg));
    else
      form.pointers.push_back(data.buffer(dataIndex(arg)));
  }
  for (const TensorSpec &result : form.spec->results) {
    if (result.kind == TensorKind::Grad) {
      // In the step arena where the step keeps it (dc's memory plan
      // counts it from where backward makes it), else dc-run's buffer.
      dcrun::Param &param = *registry.find(result.param);
      void *data = result.arenaOffset ? static_cast<char *>(dcrt_step_arena()) +
                                            *result.arenaOffset
                                      : param.grad.data();
      form.grads.push_back({&param, data});
      form.pointers.push_back(data);
      continue;
    }
    if (result.kind == TensorKind::GradAccum) {
      form.pointers.push_back(accumulatorOf(result.param));
      continue;
    }
    // The step's update, in place: the parameter's own buffer, the state's.
    if (result.kind == TensorKind::ParamUpdate) {
      form.pointers.push_back(registry.find(result.param)->data.data());
      continue;
    }
    if (result.kind == TensorKind::OptState ||
        result.kind == TensorKind::GradSquares) {
      form.pointers.push_back(compiledOptimizer->bufferOf(result));
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

void *Trainer::accumulatorOf(int32_t param) {
  for (auto &[id, buffer] : accumulators)
    if (id == param)
      return buffer.data();
  dcrt::fatal("internal: parameter %d has no accumulator", param);
}

/// The index in the picked step's arguments of the data argument `arg`
/// of either form (the same name).
size_t Trainer::dataIndex(const TensorSpec &arg) const {
  for (size_t i = 0; i < step.args.size(); ++i)
    if (step.args[i].kind == TensorKind::Data && step.args[i].name == arg.name)
      return i;
  dcrt::fatal("internal: no data argument '%s'", arg.name.c_str());
}

void Trainer::save(const std::string &path, int64_t atStep) {
  optimizer->storeState(registry);
  dcrun::saveCheckpoint(path, registry, atStep, options.allowNonFinite);
  report("saved checkpoint %s (step %lld)\n", path.c_str(),
         static_cast<long long>(atStep));
}

void Trainer::printHeader() {
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
  // Optimizer state the step keeps in host memory.
  int64_t hostStates = 0, states = 0;
  for (const TensorSpec &arg : step.args)
    if (arg.kind == TensorKind::OptState) {
      ++states;
      hostStates += arg.onHost;
    }
  std::string stateInHost = hostStates
                                ? ", " + std::to_string(hostStates) + " of " +
                                      std::to_string(states) + " in host memory"
                                : "";
  const Manifest &manifest = artifact.manifest;
  report(
      "dc-run: %s, step %s, %d rank%s, %zu parameters (%lld "
      "elements)%s, plan: gather arena %s, host pool %s; %s: "
      "%s master, %s moments (%lld B/element%s); gradients in the step "
      "arena: %lld of %lld\n",
      options.artifact.c_str(), step.name.c_str(), worldSize,
      worldSize == 1 ? "" : "s", registry.params().size(),
      static_cast<long long>(elements), hostParams.c_str(),
      formatBytes(options.gatherArenaBytes.value_or(manifest.gatherArenaBytes))
          .c_str(),
      formatBytes(options.hostPoolBytes.value_or(manifest.hostPoolBytes))
          .c_str(),
      compiledOptimizer ? "AdamW inside the step, state" : "AdamW state",
      dcrt::dtypeName(adamw.masterDtype), dcrt::dtypeName(adamw.momentDtype),
      static_cast<long long>(dcrun::stateBytesPerElement(adamw)),
      stateInHost.c_str(), static_cast<long long>(gradientsInArena),
      static_cast<long long>(grads));
}

/// The mean over all steps, and, with more than one, the mean and
/// median of the steps after the first: the first warms caches, pools,
/// cuBLASLt's heuristics and (with --cuda-graphs) captures the graph, so
/// it is no steady-state step (config A: 375.9 ms over 6 steps with the
/// capture, 83-84 ms each after it).
void Trainer::printSummary(const std::vector<double> &stepSeconds,
                           int64_t first) {
  if (stepSeconds.empty())
    return;
  StepTimeSummary times = summarizeStepTimes(stepSeconds);
  std::string steady;
  if (times.steps > 1) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "; steps %lld-%lld: mean %.3f ms, median %.3f ms",
                  static_cast<long long>(first + 1),
                  static_cast<long long>(first + times.steps - 1),
                  times.steadyMeanMs, times.steadyMedianMs);
    steady = text;
  }
  report("summary: %lld steps, mean step %.3f ms%s\n",
         static_cast<long long>(times.steps), times.meanMs, steady.c_str());
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

int64_t Trainer::bytesBesidePlan() const {
  // The host AdamW's state and sums are host vectors, not dcrt memory; a
  // step that runs its optimizer holds its state as planned arguments.
  if (compiledOptimizer || dcrt::deviceIsHost())
    return 0;
  int64_t elements = 0;
  for (const dcrun::Param &param : registry.params())
    if (param.spec.hasGrad)
      elements += param.validNumel;
  int64_t perElement = dcrun::stateBytesPerElement(adamw) +
                       (microBatches > 1 ? int64_t(sizeof(float)) : 0);
  return elements * perElement;
}

void Trainer::checkMemoryPlan() {
  if (!step.plannedPeakBytes)
    return;
  int64_t beside = bytesBesidePlan();
  int64_t planned = *step.plannedPeakBytes + beside;
  std::string verdict =
      measuredPeak <= planned
          ? "within the plan"
          : "OVER the plan by " + formatBytes(measuredPeak - planned);
  // The pools' high-water marks add up as if each peaked at once: where
  // the plan's one timeline shares memory between them, the runtime holds
  // each apart.
  const dcrt::MemoryStats &m = peakMemory;
  report("  device peak: %s measured, %s planned (the step %s, beside it "
         "%s): %s; measured: gather arena %s, step arena %s, step buffers "
         "%s, staging %s, library workspaces %s, dc-run's buffers %s\n",
         formatBytes(measuredPeak).c_str(), formatBytes(planned).c_str(),
         formatBytes(*step.plannedPeakBytes).c_str(),
         formatBytes(beside).c_str(), verdict.c_str(),
         formatBytes(m.gatherArena.highWater).c_str(),
         formatBytes(m.stepArena.highWater).c_str(),
         formatBytes(m.stepBuffers.highWater).c_str(),
         formatBytes(m.staging.highWater).c_str(),
         formatBytes(workspacePeak).c_str(),
         formatBytes(m.hostProgramBytes).c_str());
  if (options.checkMemoryPlan && measuredPeak > planned)
    dcrt::fatal("--check-memory-plan: the measured device peak %s exceeds "
                "the plan's %s by %s",
                formatBytes(measuredPeak).c_str(), formatBytes(planned).c_str(),
                formatBytes(measuredPeak - planned).c_str());
}

/// {"ops": {"<function>:<ordinal>": seconds}}: what the cost model reads.
void Trainer::writeProfile() {
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

double Trainer::countTokens() const {
  for (const TensorSpec &arg : step.args)
    if (arg.kind == TensorKind::Data && arg.vocab &&
        !dcrt::isFloatDType(arg.dtype))
      return static_cast<double>(arg.numel()) * worldSize;
  return 0;
}