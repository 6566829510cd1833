//===- AnalysisTestUtils.h - shared by the analysis unit tests -*- C++ -*-===//
//
// The fixture (a context with every dc dialect, parsing and lookup helpers)
// and the helpers the cost model, memory timeline, simulator, target and
// profile tests share.
//
//===----------------------------------------------------------------------===//
#ifndef DC_TEST_UNITTESTS_ANALYSISTESTUTILS_H
#define DC_TEST_UNITTESTS_ANALYSISTESTUTILS_H

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Registration/Registration.h"
#include "dc/Target/TargetDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dc::unittest {

inline constexpr int64_t kMiB = int64_t(1) << 20;
inline constexpr int64_t kGiB = int64_t(1) << 30;

inline std::string errorText(llvm::Error error) {
  return llvm::toString(std::move(error));
}

/// Power-of-two rates: every simulated time below is an exact binary
/// fraction, so sums compare exactly.
inline TargetDescription makeExactTarget() {
  TargetDescription target;
  target.name = "exact";
  target.matmulFlops16 = std::ldexp(1.0, 41);
  target.matmulFlops32 = std::ldexp(1.0, 40);
  target.vectorFlops = std::ldexp(1.0, 36);
  target.memoryBandwidth = std::ldexp(1.0, 50);
  target.opLaunchLatency = 0;
  target.collectiveLatency = 0;
  target.collectiveBusBandwidth = std::ldexp(1.0, 33);
  target.hostLinkBandwidth = std::ldexp(1.0, 33);
  target.hostLinkLatency = 0;
  target.deviceMemoryBytes = kGiB;
  return target;
}

/// Live device bytes at each op of `timeline`.
inline std::vector<int64_t> deviceBytes(const MemoryTimeline &timeline) {
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < timeline.getOps().size(); ++i)
    bytes.push_back(timeline.deviceBytesAt(i));
  return bytes;
}

/// One fixture type for the AnalysisTest suite in every file (googletest
/// requires it), so it lives here, outside any anonymous namespace.
class AnalysisTest : public ::testing::Test {
protected:
  AnalysisTest() {
    mlir::DialectRegistry registry;
    dc::registerDCDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef source) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "test IR does not parse";
    return module;
  }

  static mlir::func::FuncOp getFunc(mlir::ModuleOp module,
                                    llvm::StringRef name) {
    auto fn = module.lookupSymbol<mlir::func::FuncOp>(name);
    EXPECT_TRUE(fn) << "no function " << name.str();
    return fn;
  }

  /// The `index`th top-level op of `fn`'s body.
  static mlir::Operation *opAt(mlir::func::FuncOp fn, size_t index) {
    return &*std::next(fn.getBody().front().begin(), index);
  }

  mlir::MLIRContext context;
};

} // namespace dc::unittest

#endif // DC_TEST_UNITTESTS_ANALYSISTESTUTILS_H
