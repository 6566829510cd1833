//===- Passes.cpp - C API of dc's passes and pipelines --------------------===//
#include "dc-c/Passes.h"

#include "dc/Pipelines/Pipelines.h"
#include "dc/Registration/Registration.h"

#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"

#include "llvm/Support/raw_ostream.h"

void dcRegisterPasses(void) { dc::registerDCPassesAndPipelines(); }

namespace {
// Parses `options` into a pipeline's option struct (or dc::CompileOptions,
// which parses the same way) and builds the pipeline into `passManager`; a
// parse error goes to the callback (or stderr).
template <typename Options>
MlirLogicalResult
addPipeline(MlirOpPassManager passManager, MlirStringRef options,
            MlirStringCallback errorCallback, void *userData,
            void (*build)(mlir::OpPassManager &, const Options &)) {
  Options parsed;
  mlir::LogicalResult result = mlir::success();
  if (errorCallback) {
    mlir::detail::CallbackOstream stream(errorCallback, userData);
    result = parsed.parseFromString(unwrap(options), stream);
  } else {
    result = parsed.parseFromString(unwrap(options), llvm::errs());
  }
  if (mlir::failed(result))
    return wrap(result);
  build(*unwrap(passManager), parsed);
  return wrap(mlir::success());
}
} // namespace

MlirLogicalResult dcAddZero3Pipeline(MlirOpPassManager passManager,
                                     MlirStringRef options,
                                     MlirStringCallback errorCallback,
                                     void *userData) {
  return addPipeline<dc::Zero3PipelineOptions>(
      passManager, options, errorCallback, userData, dc::buildZero3Pipeline);
}

MlirLogicalResult dcAddLowerToLLVMPipeline(MlirOpPassManager passManager,
                                           MlirStringRef options,
                                           MlirStringCallback errorCallback,
                                           void *userData) {
  return addPipeline<dc::LowerToLLVMPipelineOptions>(
      passManager, options, errorCallback, userData,
      [](mlir::OpPassManager &pm,
         const dc::LowerToLLVMPipelineOptions &options) {
        dc::buildLowerToLLVMPipeline(pm, options);
      });
}

MlirLogicalResult dcAddCompilePipeline(MlirOpPassManager passManager,
                                       MlirStringRef options,
                                       MlirStringCallback errorCallback,
                                       void *userData) {
  return addPipeline<dc::CompileOptions>(passManager, options, errorCallback,
                                         userData, dc::buildCompilePipeline);
}
