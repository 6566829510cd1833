//===- ChooseSchedule.h - dc-zero3-pipeline's `choose` ----------*- C++ -*-===//
#ifndef DC_PIPELINES_CHOOSESCHEDULE_H
#define DC_PIPELINES_CHOOSESCHEDULE_H

#include "dc/Pipelines/Zero3Pipeline.h"

#include "mlir/Pass/Pass.h"

namespace dc {

/// Runs dc-zero3-pipeline with `options` (without its choice) on a copy of
/// the module for each candidate of `options.choose`, prints each
/// prediction (stderr), and makes the module the fastest copy; an error
/// when none schedules, or when the target or the grid leaves nothing to
/// choose between.
std::unique_ptr<mlir::Pass>
createChooseSchedulePass(const Zero3PipelineOptions &options);

} // namespace dc

#endif // DC_PIPELINES_CHOOSESCHEDULE_H
