//===- BufferAliasingTest.cpp - one rule for views, shared by every client ===//
//
// The memory timeline, the cost model and the offload pass's candidate
// selection once each kept their own list of view ops, and the lists
// disagreed on tensor.extract_slice. These tests hold every client to the
// one rule (dc::getViewedOperand) for each view op.
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;

namespace {

struct ViewCase {
  const char *name;
  const char *view; // defines %v from %src (tensor<8x8xf32>)
  const char *type; // %v's type
};

/// gtest names a failing case by its op.
void PrintTo(const ViewCase &view, std::ostream *os) { *os << view.name; }

const ViewCase kViewCases[] = {
    {"expand_shape",
     "%v = tensor.expand_shape %src [[0], [1, 2]] output_shape [8, 2, 4] "
     ": tensor<8x8xf32> into tensor<8x2x4xf32>",
     "tensor<8x2x4xf32>"},
    {"collapse_shape",
     "%v = tensor.collapse_shape %src [[0, 1]] : tensor<8x8xf32> into "
     "tensor<64xf32>",
     "tensor<64xf32>"},
    {"cast", "%v = tensor.cast %src : tensor<8x8xf32> to tensor<8x8xf32>",
     "tensor<8x8xf32>"},
    {"bitcast", "%v = tensor.bitcast %src : tensor<8x8xf32> to tensor<8x8xi32>",
     "tensor<8x8xi32>"},
    {"extract_slice",
     "%v = tensor.extract_slice %src[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to "
     "tensor<4x8xf32>",
     "tensor<4x8xf32>"},
};

class BufferAliasingTest : public ::testing::TestWithParam<ViewCase> {
protected:
  BufferAliasingTest() {
    DialectRegistry registry;
    dc::registerDCDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// @step: %src is computed, viewed as %v, and %v is read by a later op.
  OwningOpRef<ModuleOp> parseStep(const ViewCase &view) {
    std::string source = R"mlir(
      func.func @step(%a: tensor<8x8xf32>) -> $T {
        %e = tensor.empty() : tensor<8x8xf32>
        %src = linalg.add ins(%a, %a : tensor<8x8xf32>, tensor<8x8xf32>)
                          outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
        $VIEW
        %e2 = tensor.empty() : $T
        %r = linalg.add ins(%v, %v : $T, $T) outs(%e2 : $T) -> $T
        return %r : $T
      }
    )mlir";
    replaceAll(source, "$VIEW", view.view);
    replaceAll(source, "$T", view.type);
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "test IR does not parse: " << source;
    return module;
  }

  static void replaceAll(std::string &text, llvm::StringRef from,
                         llvm::StringRef to) {
    for (size_t at = text.find(from.str()); at != std::string::npos;
         at = text.find(from.str(), at + to.size()))
      text.replace(at, from.size(), to.str());
  }

  MLIRContext context;
};

TEST_P(BufferAliasingTest, EveryClientAgreesOnTheView) {
  OwningOpRef<ModuleOp> module = parseStep(GetParam());
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<func::FuncOp>("step");
  Block &body = fn.getBody().front();
  auto opAt = [&](size_t i) { return &*std::next(body.begin(), i); };
  Operation *srcOp = opAt(1), *viewOp = opAt(2), *reader = opAt(4);
  Value src = srcOp->getResult(0), view = viewOp->getResult(0);

  // The rule: the op views its source operand.
  EXPECT_EQ(getViewedOperand(viewOp), &viewOp->getOpOperand(0));
  EXPECT_EQ(getViewedOperand(srcOp), nullptr);
  EXPECT_EQ(getBufferViews(src), (SmallVector<Value>{src, view}));

  // The memory timeline: the view allocates nothing, and the source's
  // buffer lives while the view is read.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  const Buffer *srcBuffer = nullptr;
  for (const Buffer &buffer : timeline->getBuffers()) {
    EXPECT_NE(buffer.value, view) << "the view has a buffer of its own";
    if (buffer.value == src)
      srcBuffer = &buffer;
  }
  ASSERT_NE(srcBuffer, nullptr);
  EXPECT_GE(srcBuffer->end, timeline->indexOf(reader));

  // The cost model: a view runs no kernel.
  llvm::Expected<TargetDescription> target = TargetDescription::load("h200");
  ASSERT_TRUE(static_cast<bool>(target));
  CostModel costModel(*target);
  OpCost cost = costModel.estimate(viewOp);
  EXPECT_EQ(cost.seconds, 0.0);
  EXPECT_EQ(cost.bytes, 0);
  EXPECT_GT(costModel.estimate(srcOp).seconds, 0.0);

  // The offload pass's candidates: a viewed value does not own its buffer
  // (offloading it would free nothing while the view lives).
  EXPECT_FALSE(ownsItsBuffer(src));
  EXPECT_TRUE(ownsItsBuffer(fn.getArgument(0)));
}

INSTANTIATE_TEST_SUITE_P(ViewOps, BufferAliasingTest,
                         ::testing::ValuesIn(kViewCases),
                         [](const ::testing::TestParamInfo<ViewCase> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
