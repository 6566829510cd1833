//===- CompilePipeline.cpp - one compile's options and pipeline -----------===//
//
// The schedule's and the lowering's option tables stay what their own
// pipelines parse; CompileOptions only routes each word of one string to
// the table that declares it, so no option is declared, defaulted or
// copied twice.
//
//===----------------------------------------------------------------------===//
#include "dc/Pipelines/Pipelines.h"

#include "dc/Schedule/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;
using namespace dc;

namespace {

constexpr llvm::StringLiteral kNoSchedule = "no-schedule";

/// A pipeline's option table, asked what it declares (its llvm::cl map).
template <typename Options> class OptionTable : public Options {
public:
  /// The option `name`, or null.
  const llvm::cl::Option *find(StringRef name) const {
    auto found = this->OptionsMap.find(name);
    return found == this->OptionsMap.end() ? nullptr : found->second;
  }
};

const OptionTable<Zero3PipelineOptions> &scheduleTable() {
  static const OptionTable<Zero3PipelineOptions> table;
  return table;
}
const OptionTable<LowerToLLVMPipelineOptions> &loweringTable() {
  static const OptionTable<LowerToLLVMPipelineOptions> table;
  return table;
}

/// `text` split into words at spaces outside braces, brackets and quotes
/// (how pass options write lists and nested values).
SmallVector<StringRef> splitWords(StringRef text) {
  SmallVector<StringRef> words;
  size_t start = 0, depth = 0;
  char quote = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ' ';
    if (quote) {
      quote = c == quote ? 0 : quote;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    } else if (c == ' ' && depth == 0) {
      if (i > start)
        words.push_back(text.slice(start, i));
      start = i + 1;
    }
  }
  return words;
}

/// "true"/"false" (or 1/0, or nothing: a flag) as a bool.
std::optional<bool> parseFlag(StringRef value, bool hasValue) {
  if (!hasValue)
    return true;
  if (value == "true" || value == "1")
    return true;
  if (value == "false" || value == "0")
    return false;
  return std::nullopt;
}

} // namespace

CompileOptions::CompileOptions() {
  schedule.optimizerStateBytes = kDcRunOptimizerStateBytes;
}

bool CompileOptions::takesValue(StringRef name) const {
  for (const llvm::cl::Option *option :
       {scheduleTable().find(name), loweringTable().find(name)})
    if (option)
      return option->getValueExpectedFlag() == llvm::cl::ValueRequired;
  return false;
}

LogicalResult CompileOptions::parseFromString(StringRef text,
                                              llvm::raw_ostream &errors) {
  std::string scheduleText, loweringText;
  for (StringRef word : splitWords(text)) {
    auto [name, value] = word.split('=');
    bool hasValue = word.contains('=');
    if (name == kNoSchedule) {
      std::optional<bool> flag = parseFlag(value, hasValue);
      if (!flag) {
        errors << "'" << word << "': " << kNoSchedule << " is true or false\n";
        return failure();
      }
      noSchedule = *flag;
      continue;
    }
    bool toSchedule = scheduleTable().find(name) != nullptr;
    bool toLowering = loweringTable().find(name) != nullptr;
    if (!toSchedule && !toLowering) {
      errors << "no such option " << name
             << ": a compile takes dc-zero3-pipeline's options, "
                "dc-lower-to-llvm's and "
             << kNoSchedule << "\n";
      return failure();
    }
    (toSchedule ? scheduleText : loweringText) += (word + " ").str();
    // The one option both declare: the ranks the step is planned for are
    // the ranks the artifact runs on.
    if (toSchedule && toLowering)
      loweringText += (word + " ").str();
  }
  if (failed(schedule.parseFromString(scheduleText, errors)) ||
      failed(lowering.parseFromString(loweringText, errors)))
    return failure();
  return success();
}

void dc::buildCompilePipeline(OpPassManager &pm,
                              const CompileOptions &options) {
  if (options.noSchedule) {
    DCAttachTargetOptions attach;
    attach.target = options.schedule.target;
    attach.memoryBudget = options.schedule.memoryBudget;
    attach.lowering = options.schedule.lowering;
    // An option has a value once parsed or assigned.
    attach.keepExisting = !options.schedule.target.hasValue() &&
                          !options.schedule.memoryBudget.hasValue();
    pm.addPass(createDCAttachTarget(attach));
  } else {
    buildZero3Pipeline(pm, options.schedule);
  }
  buildLowerToLLVMPipeline(pm, options.lowering);
}

void dc::registerCompilePipeline() {
  registerPassPipeline(
      "dc-compile-pipeline",
      "dc-zero3-pipeline then dc-lower-to-llvm, as dc-compile runs them: "
      "the options of both (world-size goes to both), and no-schedule to "
      "only lower a step scheduled already",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompileOptions options;
        std::string error;
        llvm::raw_string_ostream errors(error);
        if (failed(options.parseFromString(text, errors)))
          return errorHandler(error);
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(Zero3PipelineOptions());
        optHandler(LowerToLLVMPipelineOptions());
      });
}
