//===- FuzzIR.cpp - libFuzzer targets over dc IR --------------------------===//
//
// dc-fuzz-ir: parse and verify any text as dc IR. dc-fuzz-pipeline: parse,
// and on a module that verifies run the whole dc-zero3-pipeline; a crash is
// a bug, and so is an error of its final dc-verify-schedule: a schedule the
// planning passes emit must always verify (the passes before it either plan
// a valid schedule or refuse with their own error).
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Pipelines/Zero3Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {
/// One context for every input: dialects load once.
MLIRContext &context() {
  static MLIRContext *shared = [] {
    DialectRegistry registry;
    registry.insert<dc::DCDialect, arith::ArithDialect,
                    bufferization::BufferizationDialect, cf::ControlFlowDialect,
                    func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
                    memref::MemRefDialect, scf::SCFDialect, shard::ShardDialect,
                    tensor::TensorDialect>();
    auto *context = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    return context;
  }();
  return *shared;
}

/// What MLIR's lexer skips between tokens: space, tab, newline, carriage
/// return and NUL bytes inside the buffer. Not \v or \f: those are
/// "unexpected character" errors, so `permutation = \v[0]` reaches the
/// crashing parser with an error token where this filter, had it skipped
/// them, would have seen `[0]`.
const llvm::StringRef kLexerBlanks(" \t\n\r\0", 5);

/// `text` past what MLIR's lexer skips between tokens: kLexerBlanks and
/// `//` comments.
llvm::StringRef skipBlanks(llvm::StringRef text) {
  while (true) {
    text = text.ltrim(kLexerBlanks);
    if (!text.starts_with("//"))
      return text;
    size_t end = text.find('\n');
    text =
        end == llvm::StringRef::npos ? llvm::StringRef() : text.drop_front(end);
  }
}

/// Upstream MLIR 22 crashes (a null attribute in NamedAttrList::set) when
/// the value of `dimensions =` of linalg.broadcast / linalg.reduce (and
/// `permutation =` of linalg.transpose) holds a token the lexer rejects:
/// `dimensions = \x1b0]`, `dimensions = [\xff0]` or `dimensions = [-]`
/// segfault mlir-opt and dc-opt alike. `dimensions = [18888888888888888888]`
/// (an integer over 64 bits) segfaults the same parser here, though dc-opt
/// and mlir-opt report it as an error (this harness's context and handler
/// differ; not investigated further). Not dc's bug; such inputs are skipped
/// so that the fuzzer looks for dc's.
bool hitsKnownUpstreamCrash(llvm::StringRef text) {
  for (llvm::StringRef keyword : {"dimensions", "permutation"}) {
    for (size_t at = text.find(keyword); at != llvm::StringRef::npos;
         at = text.find(keyword, at + 1)) {
      llvm::StringRef rest = skipBlanks(text.drop_front(at + keyword.size()));
      if (!rest.consume_front("="))
        continue;
      rest = skipBlanks(rest);
      // Only `[` integers `]` is safe to hand to that parser (`[-]` is not:
      // a minus sign without digits crashed it too, and so does an integer
      // that overflows 64 bits).
      if (!rest.consume_front("["))
        return true;
      size_t close = rest.find(']');
      if (close == llvm::StringRef::npos)
        return true;
      llvm::SmallVector<llvm::StringRef> items;
      rest.take_front(close).split(items, ',');
      if (items.size() == 1 && items[0].trim(kLexerBlanks).empty())
        continue; // `[]`
      for (llvm::StringRef item : items) {
        item = item.trim(kLexerBlanks);
        item.consume_front("-");
        if (item.empty() || item.size() > 18 ||
            item.find_first_not_of("0123456789") != llvm::StringRef::npos)
          return true;
      }
    }
  }
  return false;
}

/// Upstream MLIR 22's custom parsers of linalg's structured ops cast
/// whatever their `<...>` properties hold to a dictionary without checking:
/// `linalg.add <"abc"> ins(...)`, `<[1, 2]>`, or linalg.generic's form after
/// its attribute dictionary, `linalg.generic {iterator_types = []} <3>`,
/// abort or segfault mlir-opt and dc-opt alike. Only `<{` is safe to hand to
/// those parsers.
bool hitsUpstreamLinalgPropertiesCrash(llvm::StringRef text) {
  const llvm::StringRef dialect = "linalg.";
  for (size_t at = text.find(dialect); at != llvm::StringRef::npos;
       at = text.find(dialect, at + 1)) {
    llvm::StringRef rest = text.drop_front(at + dialect.size());
    rest = rest.drop_while([](char c) { return llvm::isAlnum(c) || c == '_'; });
    rest = skipBlanks(rest);
    // linalg.generic: the attribute dictionary comes first.
    if (rest.starts_with("{")) {
      int depth = 0;
      size_t end = 0;
      for (; end < rest.size(); ++end) {
        depth += rest[end] == '{' ? 1 : rest[end] == '}' ? -1 : 0;
        if (depth == 0)
          break;
      }
      if (end == rest.size())
        return true; // unbalanced: let no parser see it
      rest = skipBlanks(rest.drop_front(end + 1));
    }
    if (rest.consume_front("<") && !skipBlanks(rest).starts_with("{"))
      return true;
  }
  return false;
}

/// Upstream's parser recurses once per nesting level: a few thousand `(`
/// overflow the stack (mlir-opt and dc-opt alike). Inputs nested deeper than
/// any real step are skipped.
bool nestsTooDeep(llvm::StringRef text) {
  int depth = 0;
  for (char c : text) {
    if (c == '(' || c == '[' || c == '{' || c == '<')
      ++depth;
    else if (c == ')' || c == ']' || c == '}' || c == '>')
      depth = std::max(depth - 1, 0);
    if (depth > 256)
      return true;
  }
  return false;
}

#ifdef DC_FUZZ_PIPELINE
/// The pass that is running, for the diagnostic handler.
struct CurrentPass : public PassInstrumentation {
  std::string *name;
  explicit CurrentPass(std::string *name) : name(name) {}
  void runBeforePass(Pass *pass, Operation *) override {
    *name = pass->getArgument().str();
  }
  void runAfterPass(Pass *, Operation *) override { name->clear(); }
  void runAfterPassFailed(Pass *, Operation *) override {}
};

/// Runs the pipeline on `module`; aborts if dc-verify-schedule rejects what
/// the planning passes produced. Its budget check is the exception: a step
/// that no planner had anything to do for (no parameters, offload off) may
/// simply not fit, and the verifier is where that is said.
void runPipeline(ModuleOp module, bool tight) {
  std::string running, verifierError;
  ScopedDiagnosticHandler handler(&context(), [&](Diagnostic &diagnostic) {
    std::string message = diagnostic.str();
    if (diagnostic.getSeverity() == DiagnosticSeverity::Error &&
        running == "dc-verify-schedule" && verifierError.empty() &&
        message.find("device memory peaks here") == std::string::npos)
      verifierError = message;
    return success();
  });
  PassManager pm(&context());
  pm.addInstrumentation(std::make_unique<CurrentPass>(&running));
  dc::Zero3PipelineOptions options;
  options.worldSize = 2;
  // Two plans: the h200's whole memory, or a budget that forces the
  // planners (and activation offload) to work.
  if (tight) {
    options.target = "cpu";
    options.memoryBudget = "64KiB";
    options.offloadActivations = true;
  }
  dc::buildZero3Pipeline(pm, options);
  if (failed(pm.run(module)) && !verifierError.empty()) {
    std::fprintf(stderr,
                 "dc-fuzz-pipeline: the pipeline emitted a schedule that "
                 "dc-verify-schedule rejects: %s\n",
                 verifierError.c_str());
    std::abort();
  }
}
#endif
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  // Errors of bad input are expected: silence them.
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  std::string text(reinterpret_cast<const char *>(data), size);
  if (hitsKnownUpstreamCrash(text) || hitsUpstreamLinalgPropertiesCrash(text) ||
      nestsTooDeep(text))
    return 0;
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
#ifdef DC_FUZZ_PIPELINE
  if (module)
    runPipeline(*module, size % 2 == 1);
#endif
  return 0;
}
