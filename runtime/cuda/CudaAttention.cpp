//===- CudaAttention.cpp - the cuda backend's fused attention: cuDNN ------===//
//
// dcrt_attention_fwd and dcrt_attention_bwd on bf16 and f16 run cuDNN's
// fused flash attention, reached through cuDNN 9's backend graph API: each
// descriptor (and direction) becomes one operation graph built from
// matmul, pointwise, reduction and reshape operations in the form cuDNN's
// fused-attention engines recognise (the causal mask is GEN_INDEX on rows
// and columns, CMP_GE and BINARY_SELECT of -inf), finalized into an
// execution plan with the first engine configuration of heuristic mode A
// that finalizes. Plans are cached by descriptor; each owns one device
// workspace (cuDNN's own, plus the f32 dQ accumulator and the per-row
// sum(dO o) the backward graph keeps in memory), allocated when the plan
// is made and counted in MemoryStats::attentionWorkspace.
//
// Tensors are viewed as cuDNN's [b, h, s, d] with their memory strides
// (core/Attention.h's attentionLayout, head_dim's 1 last), computed once per
// graph (GraphView). Dense (heads 0): b = the descriptor's batch_kv and
// h = batch / batch_kv for q, o, dO, dq (the query entries of a group: 1
// without grouped-query attention), h = 1 for k, v, dk, dv: cuDNN's
// grouped-query form, whose products broadcast k and v over the group; the
// backward computes dk and dv per query head (virtual tensors) and sums
// them over the group with a reduction, as cuDNN's frontend does. Strided
// (heads > 0, e.g. [B, S, H, D] or column slices of a fused q/k/v
// projection): b = outer, h = heads for every operand, each with the
// descriptor's strides; the strided grouped-query layout is not supported
// here (a fatal error: dc-compile does not emit it). Internal tensors (the
// stats, the row sums, the dQ accumulator) stay dense. cuDNN's flash
// attention has no f32 kernel: f32 is a fatal error here (dc-compile keeps
// f32 attention expanded). Without cuDNN at build time every call is a
// fatal error.
//
// As with matmul plans, only a descriptor's first call does host-side setup
// and allocates: make it outside a CUDA graph capture.
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"

#include "Attention.h"
#include "CudaCheck.h"

#include "dcrt/error.hpp"

#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#ifdef DCRT_HAVE_CUDNN
#include <cudnn_graph.h>
#endif

using namespace dcrt;
using namespace dcrt::detail;

namespace {

const char *directionName(bool backward) {
  return backward ? "dcrt_attention_bwd" : "dcrt_attention_fwd";
}

} // namespace

#ifndef DCRT_HAVE_CUDNN

struct dcrt::detail::AttentionPlan {};

void AttentionPlanDeleter::operator()(AttentionPlan *plan) const {
  delete plan;
}

void CudaBackend::tearDownAttention() { attentionPlans.clear(); }

void CudaBackend::attentionForward(const dcrt_attention_desc &d, const void *,
                                   const void *, const void *, void *,
                                   float *) {
  fatal("dcrt_attention_fwd: this libdcrt was built without cuDNN (cuda "
        "backend configured without cudnn_graph.h and libcudnn; set "
        "CUDNN_ROOT and rebuild): %s",
        describeAttention(d).c_str());
}

void CudaBackend::attentionBackward(const dcrt_attention_desc &d, const void *,
                                    const void *, const void *, const void *,
                                    const float *, const void *, void *, void *,
                                    void *) {
  fatal("dcrt_attention_bwd: this libdcrt was built without cuDNN (cuda "
        "backend configured without cudnn_graph.h and libcudnn; set "
        "CUDNN_ROOT and rebuild): %s",
        describeAttention(d).c_str());
}

#else // DCRT_HAVE_CUDNN

namespace {

/// What the cuDNN graphs need beyond checkAttentionDesc: a dtype cuDNN's flash
/// kernels take, a layout the graphs express, 16-byte aligned buffers.
void checkCudaAttention(const dcrt_attention_desc &d, bool backward,
                        const void *const *buffers, const char *const *names,
                        int count) {
  if (d.dtype == DCRT_F32)
    fatal("%s: f32 attention has no fused kernel on the cuda backend "
          "(cuDNN's flash attention takes bf16 and f16; dc-compile expands "
          "f32 attention): %s",
          directionName(backward), describeAttention(d).c_str());
  if (d.heads != 0 && d.batch_kv != d.batch)
    fatal("%s: the strided grouped-query layout (heads > 0 with batch_kv < "
          "batch) is not supported by the cuda backend (strided layouts "
          "need batch_kv == batch; grouped-query attention the dense "
          "layout, heads 0): %s",
          directionName(backward), describeAttention(d).c_str());
  for (int i = 0; i < count; ++i)
    if (reinterpret_cast<uintptr_t>(buffers[i]) % 16 != 0)
      fatal("%s: buffer %s at %p is not 16-byte aligned (cuDNN needs it): %s",
            directionName(backward), names[i], buffers[i],
            describeAttention(d).c_str());
}

/// Every cuDNN call is checked: a failure ends the job naming the call,
/// cuDNN's status and message, and the attention.
void checkDnn(cudnnStatus_t status, const char *what,
              const dcrt_attention_desc &d, bool backward) {
  if (status == CUDNN_STATUS_SUCCESS)
    return;
  char message[512] = "";
  cudnnGetLastErrorString(message, sizeof(message));
  fatal("%s: cuDNN failed in %s: %s%s%s (%s; cuDNN %zu)",
        directionName(backward), what, cudnnGetErrorString(status),
        message[0] ? ": " : "", message, describeAttention(d).c_str(),
        cudnnGetVersion());
}

/// The tensor uids of the graphs' memory operands (virtual tensors get
/// uids from 100 up).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kNegInf,
  kOne,
  kSoftmaxSum,
  kDQAccum,
};

using Dims = std::array<int64_t, 4>;

/// Builds one operation graph; owns every descriptor it made (the plan
/// keeps the builder alive).
class GraphBuilder {
public:
  GraphBuilder(cudnnHandle_t handle, const dcrt_attention_desc &d,
               bool backward)
      : handle(handle), d(d), backward(backward) {}
  GraphBuilder(const GraphBuilder &) = delete;
  GraphBuilder &operator=(const GraphBuilder &) = delete;
  ~GraphBuilder() {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it)
      cudnnBackendDestroyDescriptor(*it);
  }

  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type,
                                  const char *what) {
    cudnnBackendDescriptor_t descriptor = nullptr;
    check(cudnnBackendCreateDescriptor(type, &descriptor), what);
    owned.push_back(descriptor);
    return descriptor;
  }

  void set(cudnnBackendDescriptor_t descriptor,
           cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void *value, const char *what) {
    check(cudnnBackendSetAttribute(descriptor, name, type, count, value), what);
  }

  void setDesc(cudnnBackendDescriptor_t descriptor,
               cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value,
               const char *what) {
    set(descriptor, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
  }

  void finalize(cudnnBackendDescriptor_t descriptor, const char *what) {
    check(cudnnBackendFinalize(descriptor), what);
  }

  /// A tensor [b, h, s, d]-shaped of `type`.
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, Dims dims,
                                  Dims strides, bool isVirtual,
                                  bool byValue = false) {
    cudnnBackendDescriptor_t t =
        create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "creating a tensor");
    int64_t alignment = byValue ? 4 : 16;
    bool virtualFlag = isVirtual, byValueFlag = byValue;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type,
        "tensor data type");
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(),
        "tensor dimensions");
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(),
        "tensor strides");
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid,
        "tensor uid");
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment,
        "tensor alignment");
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtualFlag,
        "tensor virtual flag");
    if (byValue)
      set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValueFlag,
          "tensor by-value flag");
    finalize(t, "finalizing a tensor");
    return t;
  }

  /// A virtual tensor with the next free uid.
  cudnnBackendDescriptor_t temp(cudnnDataType_t type, Dims dims, Dims strides) {
    return tensor(nextUid++, type, dims, strides, true);
  }

  /// A by-value f32 scalar (the variant pack passes a host pointer).
  cudnnBackendDescriptor_t scalar(int64_t uid) {
    return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false,
                  true);
  }

  /// y = mode(x[, b[, t]]) with math in `precision`.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    cudnnBackendDescriptor_t pw =
        create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "creating a pointwise");
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode,
        "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision,
        "pointwise precision");
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis,
          "pointwise axis");
    finalize(pw, "finalizing a pointwise");
    cudnnBackendDescriptor_t op =
        create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
               "creating a pointwise op");
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw,
            "pointwise op descriptor");
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise op x");
    if (b)
      setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pointwise op b");
    if (t)
      setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pointwise op t");
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise op y");
    finalize(op, "finalizing a pointwise op");
    ops.push_back(op);
  }

  /// c = a b (batched over the first two dims), f32 accumulation.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm =
        create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "creating a matmul");
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
        "matmul compute type");
    finalize(mm, "finalizing a matmul");
    cudnnBackendDescriptor_t op = create(
        CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "creating a matmul op");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul op a");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul op b");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul op c");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, "matmul op descriptor");
    finalize(op, "finalizing a matmul op");
    ops.push_back(op);
  }

  /// y = reduce(x) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t red =
        create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "creating a reduction");
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    set(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
        1, &mode, "reduction operator");
    set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
        "reduction compute type");
    finalize(red, "finalizing a reduction");
    cudnnBackendDescriptor_t op =
        create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
               "creating a reduction op");
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction op x");
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction op y");
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, red,
            "reduction op descriptor");
    finalize(op, "finalizing a reduction op");
    ops.push_back(op);
  }

  /// y = x viewed with y's dims and strides (a transpose).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = create(
        CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "creating a reshape op");
    setDesc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, "reshape op x");
    setDesc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, "reshape op y");
    finalize(op, "finalizing a reshape op");
    ops.push_back(op);
  }

  /// The causal mask of scores `s` ([b, h, i, j]): s where i >= j, else
  /// -inf (`negInf`, a by-value scalar).
  cudnnBackendDescriptor_t causalMask(cudnnBackendDescriptor_t s, Dims dims,
                                      Dims strides,
                                      cudnnBackendDescriptor_t negInf) {
    cudnnBackendDescriptor_t row = temp(CUDNN_DATA_INT32, dims, strides);
    cudnnBackendDescriptor_t col = temp(CUDNN_DATA_INT32, dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row,
              CUDNN_DATA_FLOAT, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col,
              CUDNN_DATA_FLOAT, 3);
    cudnnBackendDescriptor_t keep = temp(CUDNN_DATA_BOOLEAN, dims, strides);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep,
              CUDNN_DATA_BOOLEAN);
    cudnnBackendDescriptor_t masked = temp(CUDNN_DATA_FLOAT, dims, strides);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, negInf, keep, masked);
    return masked;
  }

  /// The operation graph of `ops`, its engine configurations by heuristic
  /// mode A, and the first that finalizes as an execution plan; null if
  /// none does.
  cudnnBackendDescriptor_t plan() {
    cudnnBackendDescriptor_t graph =
        create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "creating the graph");
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(ops.size()), ops.data(), "graph operations");
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
        "graph handle");
    finalize(graph, "finalizing the operation graph");
    cudnnBackendDescriptor_t heuristics =
        create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "creating the heuristics");
    setDesc(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph,
            "heuristics graph");
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode,
        "heuristics mode");
    finalize(heuristics, "finalizing the heuristics");
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "counting the engine configurations");
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i)
      configs.push_back(
          create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "creating a config"));
    int64_t got = 0;
    if (count > 0)
      check(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                     configs.data()),
            "reading the engine configurations");
    for (int64_t i = 0; i < got; ++i) {
      cudnnBackendDescriptor_t plan =
          create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                 "creating an execution plan");
      set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
          "plan handle");
      setDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i],
              "plan engine configuration");
      if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS)
        return plan;
    }
    return nullptr;
  }

  int64_t workspaceBytes(cudnnBackendDescriptor_t plan) {
    int64_t bytes = 0, got = 0;
    check(cudnnBackendGetAttribute(plan,
                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &got, &bytes),
          "reading the plan's workspace size");
    return bytes;
  }

private:
  void check(cudnnStatus_t status, const char *what) {
    checkDnn(status, what, d, backward);
  }

  cudnnHandle_t handle;
  const dcrt_attention_desc &d;
  bool backward;
  int64_t nextUid = 100;
  std::vector<cudnnBackendDescriptor_t> owned, ops;
};

cudnnDataType_t dnnTypeOf(int64_t dtype) {
  return dtype == DCRT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

/// A descriptor as the graphs see it: q, o, dO, dq are [b, h, M, D] and k,
/// v, dk, dv [b, hkv, N, D] (hkv = h, or 1 in the dense grouped-query form),
/// each with its memory strides.
struct GraphView {
  int64_t b, h, hkv, M, N, D;
  Dims strides[kAttentionOperands];

  Dims qDims() const { return {b, h, M, D}; }
  Dims kDims() const { return {b, hkv, N, D}; }
  /// k^T and v^T: [b, hkv, D, N].
  Dims tDims() const { return {b, hkv, D, N}; }
  Dims of(AttentionOperand operand) const {
    return strides[static_cast<int>(operand)];
  }
  /// The strides of `operand` transposed (seq and head_dim swapped).
  Dims transposed(AttentionOperand operand) const {
    Dims s = of(operand);
    return {s[0], s[1], s[3], s[2]};
  }
  /// Dense [b, h, M, D] strides, for the internal tensors.
  Dims denseQ() const { return {h * M * D, M * D, D, 1}; }
};

GraphView graphView(const dcrt_attention_desc &d) {
  GraphView v{};
  v.h = attentionLayout(d, AttentionOperand::Q).heads;
  v.hkv = attentionLayout(d, AttentionOperand::K).heads;
  v.b = d.batch / v.h;
  v.M = d.seq_q;
  v.N = d.seq_k;
  v.D = d.head_dim;
  for (int i = 0; i < kAttentionOperands; ++i) {
    AttentionLayout l = attentionLayout(d, static_cast<AttentionOperand>(i));
    v.strides[i] = {l.strides[0], l.strides[1], l.strides[2], 1};
  }
  return v;
}

/// The forward graph: s = scale q k^T (masked), softmax with its stats
/// (lse = max + log sum exp), o = p v.
void buildForward(GraphBuilder &g, const dcrt_attention_desc &d) {
  using Op = AttentionOperand;
  const GraphView view = graphView(d);
  const int64_t b = view.b, h = view.h, M = view.M, N = view.N;
  cudnnDataType_t io = dnnTypeOf(d.dtype), f32 = CUDNN_DATA_FLOAT;
  Dims qDims = view.qDims();
  auto q = g.tensor(kQ, io, qDims, view.of(Op::Q), false);
  // k^T over k's rows.
  auto kt = g.tensor(kK, io, view.tDims(), view.transposed(Op::K), false);
  auto v = g.tensor(kV, io, view.kDims(), view.of(Op::V), false);
  auto o = g.tensor(kO, io, qDims, view.of(Op::O), false);
  auto stats = g.tensor(kStats, f32, {b, h, M, 1}, {h * M, M, 1, 1}, false);
  auto scale = g.scalar(kScale);
  Dims sDims{b, h, M, N}, sStrides{h * M * N, M * N, N, 1};
  Dims rDims{b, h, M, 1}, rStrides{h * M, M, 1, 1};

  auto s = g.temp(f32, sDims, sStrides);
  g.matmul(q, kt, s);
  auto scaled = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_MUL, s, scale, nullptr, scaled);
  if (d.causal)
    scaled = g.causalMask(scaled, sDims, sStrides, g.scalar(kNegInf));
  auto max = g.temp(f32, rDims, rStrides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scaled, max);
  auto shifted = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_SUB, scaled, max, nullptr, shifted);
  auto exp = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, exp);
  auto sum = g.temp(f32, rDims, rStrides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exp, sum);
  auto log = g.temp(f32, rDims, rStrides);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log);
  g.pointwise(CUDNN_POINTWISE_ADD, max, log, nullptr, stats);
  // The probabilities enter the second product in the operands' type.
  auto p = g.temp(io, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_DIV, exp, sum, nullptr, p);
  g.matmul(p, v, o);
}

/// The backward graph: delta = sum(dO o) (kept in memory, kSoftmaxSum),
/// p = exp(scale q k^T - lse) (masked), dv = p^T dO,
/// ds = scale p (dO v^T - delta), dk = ds^T q, dq = ds k (through an f32
/// accumulator, kDQAccum, when `accumulateDQ`).
void buildBackward(GraphBuilder &g, const dcrt_attention_desc &d,
                   bool accumulateDQ) {
  using Op = AttentionOperand;
  const GraphView view = graphView(d);
  const int64_t b = view.b, h = view.h, M = view.M, N = view.N, D = view.D;
  cudnnDataType_t io = dnnTypeOf(d.dtype), f32 = CUDNN_DATA_FLOAT;
  Dims qDims = view.qDims(), kDims = view.kDims(), tDims = view.tDims();
  Dims sDims{b, h, M, N}, sStrides{h * M * N, M * N, N, 1};
  Dims stDims{b, h, N, M}, stStrides{h * M * N, M * N, 1, N}; // s^T
  Dims rDims{b, h, M, 1}, rStrides{h * M, M, 1, 1};
  // dk and dv per query head before the sum over a group.
  Dims fullDims{b, h, N, D}, fullStrides{h * N * D, N * D, D, 1};
  bool grouped = view.hkv != h;
  auto q = g.tensor(kQ, io, qDims, view.of(Op::Q), false);
  auto kt = g.tensor(kK, io, tDims, view.transposed(Op::K), false);
  auto vt = g.tensor(kV, io, tDims, view.transposed(Op::V), false);
  auto o = g.tensor(kO, io, qDims, view.of(Op::O), false);
  auto stats = g.tensor(kStats, f32, rDims, rStrides, false);
  auto dO = g.tensor(kDO, io, qDims, view.of(Op::DO), false);
  auto dq = g.tensor(kDQ, io, qDims, view.of(Op::DQ), false);
  auto dk = g.tensor(kDK, io, kDims, view.of(Op::DK), false);
  auto dv = g.tensor(kDV, io, kDims, view.of(Op::DV), false);
  auto scale = g.scalar(kScale);
  auto one = g.scalar(kOne);
  auto softmaxSum = g.tensor(kSoftmaxSum, f32, rDims, rStrides, false);

  // delta = sum_d dO o, times 1 (the dropout-free form).
  auto product = g.temp(f32, qDims, view.denseQ());
  g.pointwise(CUDNN_POINTWISE_MUL, dO, o, nullptr, product);
  auto rowSum = g.temp(f32, rDims, rStrides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, product, rowSum);
  g.pointwise(CUDNN_POINTWISE_MUL, rowSum, one, nullptr, softmaxSum);

  // p = exp(scale q k^T - lse), masked.
  auto s = g.temp(f32, sDims, sStrides);
  g.matmul(q, kt, s);
  auto scaled = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_MUL, s, scale, nullptr, scaled);
  auto shifted = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_SUB, scaled, stats, nullptr, shifted);
  if (d.causal)
    shifted = g.causalMask(shifted, sDims, sStrides, g.scalar(kNegInf));
  auto p = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, p);

  // dv = p^T dO (summed over the group).
  auto pt = g.temp(io, stDims, stStrides);
  g.reshape(p, pt);
  if (!grouped) {
    g.matmul(pt, dO, dv);
  } else {
    auto dvFull = g.temp(io, fullDims, fullStrides);
    g.matmul(pt, dO, dvFull);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dvFull, dv);
  }

  // ds = scale p (dO v^T - delta).
  auto dp = g.temp(f32, sDims, sStrides);
  g.matmul(dO, vt, dp);
  auto centered = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, softmaxSum, nullptr, centered);
  auto weighted = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_MUL, centered, p, nullptr, weighted);
  auto ds = g.temp(f32, sDims, sStrides);
  g.pointwise(CUDNN_POINTWISE_MUL, weighted, scale, nullptr, ds);

  // dk = ds^T q (summed over the group).
  auto dst = g.temp(io, stDims, stStrides);
  g.reshape(ds, dst);
  if (!grouped) {
    g.matmul(dst, q, dk);
  } else {
    auto dkFull = g.temp(io, fullDims, fullStrides);
    g.matmul(dst, q, dkFull);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dkFull, dk);
  }

  // dq = ds k (k^T viewed back with k's memory strides).
  auto k = g.temp(io, kDims, view.of(Op::K));
  g.reshape(kt, k);
  if (accumulateDQ) {
    auto accum = g.tensor(kDQAccum, f32, qDims, view.denseQ(), false);
    g.matmul(ds, k, accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, accum, nullptr, nullptr, dq);
  } else {
    g.matmul(ds, k, dq);
  }
}

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

} // namespace

/// One cached graph: its builder (owning every descriptor), the execution
/// plan, and the device workspace (cuDNN's, then the backward's f32 dQ
/// accumulator and row sums).
struct dcrt::detail::AttentionPlan {
  std::unique_ptr<GraphBuilder> builder;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t dnnWorkspaceBytes = 0, accumOffset = 0, sumOffset = 0;
  bool accumulateDQ = false;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
  float scale = 1, one = 1, negInf = -std::numeric_limits<float>::infinity();
  ~AttentionPlan() {
    builder.reset();
    if (workspace)
      cudaFree(workspace);
  }
};

void AttentionPlanDeleter::operator()(AttentionPlan *plan) const {
  delete plan;
}

void CudaBackend::tearDownAttention() {
  attentionPlans.clear();
  attentionWorkspaceBytes = 0;
  if (dnn)
    cudnnDestroy(static_cast<cudnnHandle_t>(dnn));
  dnn = nullptr;
}

AttentionPlan &CudaBackend::attentionPlan(const dcrt_attention_desc &d,
                                          bool backward) {
  // checkAttentionDesc zeroed the strides the call ignores.
  AttentionKey key;
  key.fields[0] = backward;
  key.fields[1] = d.dtype;
  key.fields[2] = d.batch;
  key.fields[3] = d.seq_q;
  key.fields[4] = d.seq_k;
  key.fields[5] = d.head_dim;
  key.fields[6] = d.causal;
  key.fields[7] = d.scale_f32_bits;
  key.fields[8] = d.batch_kv;
  key.fields[9] = d.heads;
  for (int i = 0; i < kAttentionOperands; ++i)
    std::memcpy(&key.fields[10 + 3 * i],
                attentionStrideField(d, static_cast<AttentionOperand>(i)),
                3 * sizeof(int64_t));
  auto found = attentionPlans.find(key);
  if (found != attentionPlans.end())
    return *found->second;

  if (!dnn) {
    cudnnHandle_t handle = nullptr;
    checkDnn(cudnnCreate(&handle), "cudnnCreate", d, backward);
    checkDnn(cudnnSetStream(handle, compute), "cudnnSetStream", d, backward);
    dnn = handle;
  }
  auto handle = static_cast<cudnnHandle_t>(dnn);
  std::unique_ptr<AttentionPlan, AttentionPlanDeleter> plan(
      new AttentionPlan());
  plan->scale = attentionScale(d);
  // The backward first with an f32 dQ accumulator (cuDNN's form for large
  // score matrices, summed with atomics: not bit-identical run to run),
  // then writing dQ directly from a dP materialized in the workspace (the
  // only form when the job asked for determinism).
  for (int variant = backward && deterministic ? 1 : 0;
       variant < (backward ? 2 : 1) && !plan->plan; ++variant) {
    plan->builder = std::make_unique<GraphBuilder>(handle, d, backward);
    plan->accumulateDQ = backward && variant == 0;
    if (backward)
      buildBackward(*plan->builder, d, plan->accumulateDQ);
    else
      buildForward(*plan->builder, d);
    plan->plan = plan->builder->plan();
  }
  if (!plan->plan) {
    char message[512] = "";
    cudnnGetLastErrorString(message, sizeof(message));
    fatal("%s: cuDNN %zu has no %sengine for the fused attention graph of "
          "%s (head_dim must be a multiple of 8 and at most 256 on sm_90)%s%s",
          directionName(backward), cudnnGetVersion(),
          backward && deterministic ? "deterministic " : "",
          describeAttention(d).c_str(), message[0] ? ": " : "", message);
  }
  plan->dnnWorkspaceBytes = plan->builder->workspaceBytes(plan->plan);
  int64_t bytes = align256(plan->dnnWorkspaceBytes);
  if (backward) {
    plan->accumOffset = bytes;
    if (plan->accumulateDQ)
      bytes += align256(d.batch * d.seq_q * d.head_dim * 4);
    plan->sumOffset = bytes;
    bytes += align256(d.batch * d.seq_q * 4);
  }
  if (bytes > 0) {
    cudaError_t status =
        cudaMalloc(&plan->workspace, static_cast<size_t>(bytes));
    if (status != cudaSuccess)
      fatal("%s: out of device memory: %lld bytes for the attention "
            "workspace of %s: %s",
            directionName(backward), static_cast<long long>(bytes),
            describeAttention(d).c_str(),
            cuda::describeCudaError(status).c_str());
  }
  plan->workspaceBytes = bytes;
  attentionWorkspaceBytes += bytes;
  return *attentionPlans.emplace(key, std::move(plan)).first->second;
}

namespace {
/// Runs `plan` with the memory tensors `uids` at `pointers`.
void execute(cudnnHandle_t handle, AttentionPlan &plan,
             const std::vector<int64_t> &uids, std::vector<void *> pointers,
             const dcrt_attention_desc &d, bool backward) {
  cudnnBackendDescriptor_t pack = nullptr;
  checkDnn(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                        &pack),
           "creating the variant pack", d, backward);
  void *workspace = plan.workspace;
  cudnnStatus_t status = cudnnBackendSetAttribute(
      pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
      static_cast<int64_t>(uids.size()), uids.data());
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(
        pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
        static_cast<int64_t>(pointers.size()), pointers.data());
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                      CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendFinalize(pack);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendExecute(handle, plan.plan, pack);
  cudnnBackendDestroyDescriptor(pack);
  checkDnn(status, "executing the plan", d, backward);
}
} // namespace

void CudaBackend::attentionForward(const dcrt_attention_desc &d, const void *q,
                                   const void *k, const void *v, void *o,
                                   float *lse) {
  const void *buffers[] = {q, k, v, o, lse};
  const char *names[] = {"q", "k", "v", "o", "lse"};
  checkCudaAttention(d, false, buffers, names, 5);
  AttentionPlan &plan = attentionPlan(d, false);
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kScale};
  std::vector<void *> pointers = {const_cast<void *>(q),
                                  const_cast<void *>(k),
                                  const_cast<void *>(v),
                                  o,
                                  lse,
                                  &plan.scale};
  if (d.causal) {
    uids.push_back(kNegInf);
    pointers.push_back(&plan.negInf);
  }
  execute(static_cast<cudnnHandle_t>(dnn), plan, uids, pointers, d, false);
}

void CudaBackend::attentionBackward(const dcrt_attention_desc &d, const void *q,
                                    const void *k, const void *v, const void *o,
                                    const float *lse, const void *dO, void *dq,
                                    void *dk, void *dv) {
  const void *buffers[] = {q, k, v, o, lse, dO, dq, dk, dv};
  const char *names[] = {"q", "k", "v", "o", "lse", "dO", "dq", "dk", "dv"};
  checkCudaAttention(d, true, buffers, names, 9);
  AttentionPlan &plan = attentionPlan(d, true);
  char *workspace = static_cast<char *>(plan.workspace);
  std::vector<int64_t> uids = {kQ,  kK,  kV,  kO,     kStats, kDO,
                               kDQ, kDK, kDV, kScale, kOne,   kSoftmaxSum};
  std::vector<void *> pointers = {const_cast<void *>(q),
                                  const_cast<void *>(k),
                                  const_cast<void *>(v),
                                  const_cast<void *>(o),
                                  const_cast<float *>(lse),
                                  const_cast<void *>(dO),
                                  dq,
                                  dk,
                                  dv,
                                  &plan.scale,
                                  &plan.one,
                                  workspace + plan.sumOffset};
  if (d.causal) {
    uids.push_back(kNegInf);
    pointers.push_back(&plan.negInf);
  }
  if (plan.accumulateDQ) {
    uids.push_back(kDQAccum);
    pointers.push_back(workspace + plan.accumOffset);
  }
  execute(static_cast<cudnnHandle_t>(dnn), plan, uids, pointers, d, true);
}

#endif // DCRT_HAVE_CUDNN
