//===- CompiledAdamW.h - the state of a step that runs AdamW itself -*- C++
//-*-===//
//
// A step compiled with the optimizer inside (dc-compile --optimizer-in-step)
// updates its parameters itself: dc-run keeps its state (both moments and
// the fp32 masters, in the dtypes the step was compiled for) in buffers
// the step reads and writes in place, gives it the learning rate and the
// step count before each call, and reads the squared gradient norm it
// returns. The registry's fp32 host copies are the state's only for
// checkpoints, as with the device AdamW.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_COMPILEDADAMW_H
#define DC_RUN_COMPILEDADAMW_H

#include "Manifest.h"
#include "Params.h"

#include "dcrt/core.hpp"

#include <deque>
#include <string_view>
#include <utility>
#include <vector>

namespace dcrun {

class CompiledAdamW : public Optimizer {
public:
  /// Allocates the state of every parameter `step` updates (its
  /// "opt_state" arguments), the scalars and the norm's result.
  CompiledAdamW(const StepSpec &step, ParamRegistry &registry);

  /// The buffer the step reads (and writes, in place) for argument or
  /// result `tensor` of kind OptState, LearningRate, StepCount or
  /// GradSquares.
  void *bufferOf(const TensorSpec &tensor);

  /// Before the step's call: its learning rate and step count.
  void setStep(double lr, int64_t step);
  /// After it: the squared global norm the step computed (every rank has
  /// the same); non-finite when the step skipped its update.
  double squaredNorm() const;

  /// Not called: the trainer reads squaredNorm() (already global).
  double gradientSquares(ParamRegistry &registry) override;
  /// The step updated the parameters already.
  void step(ParamRegistry &registry, const AdamWConfig &config, int64_t step,
            double gradScale) override {}
  /// The step sums the gradients itself: nothing to do.
  void accumulate(ParamRegistry &, int64_t, int64_t) override {}
  void loadState(ParamRegistry &registry) override;
  void storeState(ParamRegistry &registry) override;

private:
  struct State {
    Param *param = nullptr;
    std::string_view name; // exp_avg, exp_avg_sq or master
    dcrt_dtype dtype = DCRT_F32;
    dcrt::Buffer buffer;
  };
  std::deque<State> states;
  dcrt::Buffer lr, stepCount, squares;
};

/// The AdamW config a step compiled with the optimizer runs: `given` (what
/// dc-run's options say) with the step's compiled hyperparameters. Fatal
/// when an option was given a value that contradicts the step's (the
/// learning rate is the step's input and may be anything).
AdamWConfig compiledAdamWConfig(const CompiledOptimizer &compiled,
                                const AdamWConfig &given);

/// The micro-batches of a step: `given` (--micro-batches), or, for a step
/// that runs its optimizer, the count it was compiled for (its update uses
/// the mean over exactly that many). Fatal when `given` (not the default
/// 1) contradicts it.
int64_t compiledMicroBatches(const StepSpec &step, int64_t given);

} // namespace dcrun

#endif // DC_RUN_COMPILEDADAMW_H
