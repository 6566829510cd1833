//===- RuntimeFunctions.cpp - the dcrt functions the lowering calls -------===//
#include "RuntimeFunctions.h"

#include "dc/Support/Assert.h"

#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"

#include <array>

using namespace mlir;

namespace {
/// The C types of dcrt's results and arguments (pointers are opaque).
namespace abi {
enum ABIType : uint8_t { None, Void, Ptr, I32, I64 };
} // namespace abi

struct RuntimeFunction {
  llvm::StringLiteral name;
  abi::ABIType result;
  std::array<abi::ABIType, 13> args; // ends at the first None
};
} // namespace

/// The table entry of `name`, which must be in it.
static const RuntimeFunction &findRuntimeFunction(llvm::StringRef name) {
  using namespace abi;
  // clang-format off
  static constexpr RuntimeFunction kRuntimeFunctions[] = {
      // name                        result  arguments
      {"dcrt_gather_start",          Ptr,    {I32, I32, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_reduce_scatter_start",  Ptr,    {I32, I32, I32, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_all_reduce_start",      Ptr,    {I32, I32, Ptr, I64, I32, Ptr}},
      {"dcrt_offload_start",         Ptr,    {Ptr, I64, Ptr}},
      {"dcrt_reload_into",           Ptr,    {Ptr, I64, Ptr}},
      {"dcrt_upload_into",           Ptr,    {Ptr, I64, Ptr}},
      {"dcrt_download_into",         Ptr,    {Ptr, I64, Ptr}},
      {"dcrt_wait",                  Void,   {Ptr}},
      {"dcrt_release",               Void,   {Ptr}},
      {"dcrt_invalidate_gathered",   Void,   {Ptr}},
      {"dcrt_clear_gathered",        Void,   {}},
      {"dcrt_all_to_all_start",      Ptr,    {I32, Ptr, Ptr, I32, Ptr, I64, I64, I32}},
      {"dcrt_op_begin",              I64,    {}},
      {"dcrt_op_end",                Void,   {Ptr, I64}},
      {"dcrt_check_finite",          Void,   {Ptr, I64, I32, I32, Ptr}},
      {"dcrt_end_step",              Void,   {}},
      {"dcrt_step_arena",            Ptr,    {}},
      {"dcrt_rank",                  I32,    {}},
      {"dcrt_matmul",                Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_launch_kernel",         Void,   {Ptr, I64, Ptr, Ptr, I32, Ptr}},
      {"dcrt_launch_kernel_coresident", Void, {Ptr, I64, Ptr, Ptr, I32, Ptr, I64}},
      {"dcrt_attention_fwd",         Void,   {Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_attention_bwd",         Void,   {Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_topk",                  Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_group_by_expert",       Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_gather_rows",           Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_scatter_add_rows",      Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_grouped_matmul",        Void,   {Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_grouped_weight_grad",   Void,   {Ptr, Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_grad_squares",          Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_grad_accumulate",       Void,   {Ptr, Ptr, Ptr, Ptr}},
      {"dcrt_adamw",                 Void,   {Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}},
  };
  // clang-format on
  const RuntimeFunction *function =
      llvm::find_if(kRuntimeFunctions, [&](const RuntimeFunction &entry) {
        return entry.name == name;
      });
  DC_ASSERT(function != std::end(kRuntimeFunctions),
            "the lowering calls only dcrt functions of this table");
  return *function;
}

static Type getType(MLIRContext *context, abi::ABIType type) {
  switch (type) {
  case abi::Void:
    return LLVM::LLVMVoidType::get(context);
  case abi::Ptr:
    return LLVM::LLVMPointerType::get(context);
  case abi::I32:
    return IntegerType::get(context, 32);
  case abi::I64:
    return IntegerType::get(context, 64);
  case abi::None:
    break;
  }
  DC_UNREACHABLE("every ABI type of the table has an LLVM type");
}

FailureOr<LLVM::LLVMFuncOp>
dc::lookupOrCreateRuntimeFunction(OpBuilder &builder, Operation *module,
                                  llvm::StringRef name) {
  const RuntimeFunction &function = findRuntimeFunction(name);
  MLIRContext *context = builder.getContext();
  SmallVector<Type> args;
  for (abi::ABIType arg : function.args) {
    if (arg == abi::None)
      break;
    args.push_back(getType(context, arg));
  }
  return LLVM::lookupOrCreateFn(builder, module, name, args,
                                getType(context, function.result),
                                /*isVarArg=*/false, /*isReserved=*/true);
}
