//===- DCExpertOps.td - mixture-of-experts routing ----------*- tablegen -*-===//
//
// Token-choice routing with static shapes. T tokens that each choose k
// experts are T x k assignments in every step; only which expert each one
// goes to is data. The ops below carry that data as index tensors of fixed
// size (the choices, a permutation, the end of each expert's rows), so that
// every value of a mixture-of-experts step has a static type: the
// scheduler, the memory timeline and the cost model size them like any
// other tensor, and the worst case (every assignment to one expert) needs
// no more memory than the balanced one.
//
//===----------------------------------------------------------------------===//
#ifndef DC_EXPERT_OPS_TD
#define DC_EXPERT_OPS_TD

include "dc/Dialect/DC/IR/DCBase.td"
include "dc/Dialect/DC/IR/DCInterfaces.td"

def DC_RoutingIndex : AnyTypeOf<[I32, I64]>;
def DC_RoutingIndices : StaticShapeTensorOf<[DC_RoutingIndex]>;
def DC_RoutingFloats : StaticShapeTensorOf<[AnyFloat]>;

def DC_TopKOp : DC_Op<"topk", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "the k largest entries of each row, and where they are";
  let description = [{
    Along the last dim of `scores` ([..., E], E >= k): `values[..., j]` is
    the j-th largest entry of the row, `indices[..., j]` its position.
    Ties go to the lower position first, so the choice is deterministic.
    `values` has the element type of `scores` and the shape `[..., k]`;
    `indices` the same shape, in i32 or i64.

    A router's choice of k experts per token. Its gradient (the gradient of
    `values` put back at `indices`, zero elsewhere) needs no op of its own.

    ```mlir
    %values, %indices = dc.topk %probs k = 2
        : tensor<4096x8xf32> -> tensor<4096x2xf32>, tensor<4096x2xi64>
    ```
  }];
  let arguments = (ins DC_RoutingFloats:$scores, I64Attr:$k);
  let results = (outs DC_RoutingFloats:$values, DC_RoutingIndices:$indices);
  let assemblyFormat = [{
    $scores `k` `=` $k attr-dict `:` type($scores) `->` type($values) `,`
    type($indices)
  }];
  let hasVerifier = 1;
}

def DC_GroupByExpertOp : DC_Op<"group_by_expert", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "the assignments of tokens to experts, sorted by expert";
  let description = [{
    Reads `ids` flat (row-major, N entries: N = T x k for the indices of a
    `dc.topk`) as the expert of each assignment, and sorts the assignments
    by expert, stably:

    - `order[p]` is the flat position in `ids` of the assignment at sorted
      position p (`[N]`);
    - `ends[e]` is the end of expert e's rows (`[experts]`): its rows are
      `[e == 0 ? 0 : ends[e - 1], ends[e])`, torch's `_grouped_mm`
      convention, so that `ends[e] - ends[e - 1]` is its token count.

    An id outside `[0, experts)` (a dropped assignment) is sorted after
    every expert's rows, at `[ends[experts - 1], N)`, in its original
    order. With k choices per token, the token of sorted row p is
    `order[p] / k`.

    With `capacity = C`, each expert keeps at most C assignments: its
    first C in flat order (token order, then choice order), so that
    `ends[e] - ends[e - 1] <= C`. The others are dropped. They are sorted
    after every expert's rows too: first the capacity's drops, by expert
    and then in flat order, then the ids outside `[0, experts)` in flat
    order. A dropped assignment computes nothing downstream (the grouped
    products give its row zeros). The static bound is what
    `dc-expert-parallel` sizes its exchanges by: a rank sends a peer at most
    `C x experts / W` rows instead of all N.

    ```mlir
    %order, %ends = dc.group_by_expert %choice experts = 8
        : tensor<4096x2xi64> -> tensor<8192xi64>, tensor<8xi64>
    %order, %ends = dc.group_by_expert %choice experts = 8 capacity = 1280
        : tensor<4096x2xi64> -> tensor<8192xi64>, tensor<8xi64>
    ```
  }];
  let arguments = (ins DC_RoutingIndices:$ids, I64Attr:$experts,
                       OptionalAttr<I64Attr>:$capacity);
  let results = (outs DC_RoutingIndices:$order, DC_RoutingIndices:$ends);
  let assemblyFormat = [{
    $ids `experts` `=` $experts (`capacity` `=` $capacity^)? attr-dict `:`
    type($ids) `->` type($order) `,` type($ends)
  }];
  let hasVerifier = 1;
}

def DC_GatherRowsOp : DC_Op<"gather_rows", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "rows of a tensor picked by an index tensor";
  let description = [{
    `result[i, ...] = source[index[i], ...]`: `source` is `[M, rest...]`,
    `index` is `[N]` and the result `[N, rest...]` with `source`'s element
    type. An index outside `[0, M)` gives a row of zeros. The dispatch of
    tokens to their experts' rows (`index` = the token of each sorted
    assignment); its gradient is `dc.scatter_add_rows` with the same index.

    ```mlir
    %rows = dc.gather_rows %x[%token]
        : tensor<4096x2048xbf16>, tensor<8192xi64> -> tensor<8192x2048xbf16>
    ```
  }];
  let arguments = (ins DC_RoutingFloats:$source, DC_RoutingIndices:$index);
  let results = (outs DC_RoutingFloats:$result);
  let assemblyFormat = [{
    $source `[` $index `]` attr-dict `:` type($source) `,` type($index) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def DC_ScatterAddRowsOp : DC_Op<"scatter_add_rows", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "rows of a tensor summed into the rows an index names";
  let description = [{
    `result[m, ...] = sum over i with index[i] == m of source[i, ...]`:
    `source` is `[N, rest...]`, `index` is `[N]` and the result
    `[M, rest...]` with `source`'s element type; a row no index names is
    zero, and an index outside `[0, M)` adds nowhere. Sums accumulate in
    f32 (or the element type, if wider). The combine of the experts'
    outputs back into their tokens' rows; the gradient of
    `dc.gather_rows`.

    ```mlir
    %out = dc.scatter_add_rows %y[%token]
        : tensor<8192x2048xbf16>, tensor<8192xi64> -> tensor<4096x2048xbf16>
    ```
  }];
  let arguments = (ins DC_RoutingFloats:$source, DC_RoutingIndices:$index);
  let results = (outs DC_RoutingFloats:$result);
  let assemblyFormat = [{
    $source `[` $index `]` attr-dict `:` type($source) `,` type($index) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def DC_GroupedMatmulOp : DC_Op<"grouped_matmul", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface, ["getMatmulElementType"]>]> {
  let summary = "each expert's rows times that expert's matrix";
  let description = [{
    `lhs` is `[N, K]`, rows grouped by expert as `dc.group_by_expert` sorts
    them: expert e's rows are `[e == 0 ? 0 : ends[e - 1], ends[e])`.
    `rhs` holds one matrix per expert, `[E, K, P]`, or with
    `transpose_rhs` `[E, P, K]` (the stacked `[out, in]` weights of
    per-expert linear layers) used transposed. The result `[N, P]` has
    `lhs`'s element type:

    ```
    result[i, :] = lhs[i, :] rhs[e]        for each row i of expert e
    result[i, :] = 0                       for rows past ends[E - 1]
    ```

    Products accumulate in f32 (or the element type, if wider). With
    `ends` known only when the step runs, the op has the FLOPs of one
    `[N, K] x [K, P]` product whatever the routing. The gradient of `lhs`
    is the same op on the result's gradient with `transpose_rhs` flipped;
    that of `rhs` is `dc.grouped_weight_grad`.

    ```mlir
    %h = dc.grouped_matmul %rows, %w1, %ends transpose_rhs
        : tensor<8192x2048xbf16>, tensor<8x5632x2048xbf16>, tensor<8xi64>
          -> tensor<8192x5632xbf16>
    ```
  }];
  let arguments = (ins DC_RoutingFloats:$lhs, DC_RoutingFloats:$rhs,
                       DC_RoutingIndices:$ends, UnitAttr:$transpose_rhs);
  let results = (outs DC_RoutingFloats:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $ends (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    type($lhs) `,` type($rhs) `,` type($ends) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DC_GroupedWeightGradOp : DC_Op<"grouped_weight_grad", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface, ["getMatmulElementType"]>]> {
  let summary = "per expert, the product of its rows of two tensors";
  let description = [{
    `lhs` is `[N, K]` and `rhs` `[N, P]`, both with rows grouped by expert
    as for `dc.grouped_matmul`; the result `[E, K, P]` (E = the size of
    `ends`) has `lhs`'s element type:

    ```
    result[e] = lhs[rows of e]^T rhs[rows of e]
    ```

    An expert without rows gets zeros, and rows past `ends[E - 1]` count
    nowhere. Products accumulate in f32 (or the element type, if wider).
    The gradient of `dc.grouped_matmul`'s `rhs`: `(input, grad)` for an
    `[E, K, P]` weight, `(grad, input)` for a transposed `[E, P, K]` one.

    ```mlir
    %dw1 = dc.grouped_weight_grad %dh, %rows, %ends
        : tensor<8192x5632xbf16>, tensor<8192x2048xbf16>, tensor<8xi64>
          -> tensor<8x5632x2048xbf16>
    ```
  }];
  let arguments = (ins DC_RoutingFloats:$lhs, DC_RoutingFloats:$rhs,
                       DC_RoutingIndices:$ends);
  let results = (outs DC_RoutingFloats:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $ends attr-dict `:` type($lhs) `,` type($rhs) `,`
    type($ends) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffer forms. One-Shot Bufferize makes each from its tensor op, with the
// results freshly allocated, on the targets that call libdcrt's routing
// kernels (dcrt_topk, dcrt_group_by_expert, dcrt_gather_rows,
// dcrt_scatter_add_rows, dcrt_grouped_matmul, dcrt_grouped_weight_grad);
// dc-to-dcrt lowers them. Operands are the tensor op's, then its results
// as outputs, with the same properties and shape rules. Float inputs may be
// row-strided views (a column slice, an expert slice of a stacked weight):
// every dim but the first dense, the first with any static stride at least
// a row's length (the runtime's `*_ld`); a multi-dim top-k's scores and
// every index buffer and output are dense.
//===----------------------------------------------------------------------===//

def DC_RoutingIndexBuffer : Type<And<[
    CPred<"::dc::isDeviceBuffer($_self)">,
    CPred<"::llvm::cast<::mlir::MemRefType>($_self).getElementType()"
          ".isSignlessInteger(32) || ::llvm::cast<::mlir::MemRefType>($_self)"
          ".getElementType().isSignlessInteger(64)">]>,
    "statically shaped identity-layout memref of i32 or i64 (device)",
    "::mlir::MemRefType">;
def DC_RoutingFloatBuffer : Type<And<[
    CPred<"::dc::isDeviceBuffer($_self)">,
    CPred<"::llvm::isa<::mlir::FloatType>("
          "::llvm::cast<::mlir::MemRefType>($_self).getElementType())">]>,
    "statically shaped identity-layout float memref (device)",
    "::mlir::MemRefType">;
def DC_RoutingRowsBuffer : Type<And<[
    CPred<"::dc::hasStridedRows($_self)">,
    CPred<"::llvm::isa<::mlir::FloatType>("
          "::llvm::cast<::mlir::MemRefType>($_self).getElementType())">]>,
    "statically shaped float memref (device) whose dims after the first "
    "are dense",
    "::mlir::MemRefType">;

def DC_TopKIntoOp : DC_Op<"topk_into"> {
  let summary = "dc.topk in buffer form: writes values and indices";
  let description = [{
    ```mlir
    dc.topk_into %probs into %values, %indices k = 2
        : memref<4096x8xf32> into memref<4096x2xf32>, memref<4096x2xi64>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$scores,
                       Arg<DC_RoutingFloatBuffer, "", [MemWrite]>:$values,
                       Arg<DC_RoutingIndexBuffer, "", [MemWrite]>:$indices,
                       I64Attr:$k);
  let assemblyFormat = [{
    $scores `into` $values `,` $indices `k` `=` $k attr-dict `:`
    type($scores) `into` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def DC_GroupByExpertIntoOp : DC_Op<"group_by_expert_into"> {
  let summary = "dc.group_by_expert in buffer form: writes order and ends";
  let description = [{
    ```mlir
    dc.group_by_expert_into %choice into %order, %ends experts = 8
        : memref<4096x2xi64> into memref<8192xi64>, memref<8xi64>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingIndexBuffer, "", [MemRead]>:$ids,
                       Arg<DC_RoutingIndexBuffer, "", [MemWrite]>:$order,
                       Arg<DC_RoutingIndexBuffer, "", [MemWrite]>:$ends,
                       I64Attr:$experts);
  let assemblyFormat = [{
    $ids `into` $order `,` $ends `experts` `=` $experts attr-dict `:`
    type($ids) `into` type($order) `,` type($ends)
  }];
  let hasVerifier = 1;
}

def DC_GatherRowsIntoOp : DC_Op<"gather_rows_into"> {
  let summary = "dc.gather_rows in buffer form";
  let description = [{
    ```mlir
    dc.gather_rows_into %x[%token] into %rows
        : memref<4096x2048xbf16>, memref<8192xi64> into memref<8192x2048xbf16>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$source,
                       Arg<DC_RoutingIndexBuffer, "", [MemRead]>:$index,
                       Arg<DC_RoutingFloatBuffer, "", [MemWrite]>:$result);
  let assemblyFormat = [{
    $source `[` $index `]` `into` $result attr-dict `:` type($source) `,`
    type($index) `into` type($result)
  }];
  let hasVerifier = 1;
}

def DC_ScatterAddRowsIntoOp : DC_Op<"scatter_add_rows_into"> {
  let summary = "dc.scatter_add_rows in buffer form (overwrites result)";
  let description = [{
    ```mlir
    dc.scatter_add_rows_into %y[%token] into %out
        : memref<8192x2048xbf16>, memref<8192xi64> into memref<4096x2048xbf16>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$source,
                       Arg<DC_RoutingIndexBuffer, "", [MemRead]>:$index,
                       Arg<DC_RoutingFloatBuffer, "", [MemWrite]>:$result);
  let assemblyFormat = [{
    $source `[` $index `]` `into` $result attr-dict `:` type($source) `,`
    type($index) `into` type($result)
  }];
  let hasVerifier = 1;
}

def DC_GroupedMatmulIntoOp : DC_Op<"grouped_matmul_into"> {
  let summary = "dc.grouped_matmul in buffer form (overwrites result)";
  let description = [{
    ```mlir
    dc.grouped_matmul_into %rows, %w1, %ends into %h transpose_rhs
        : memref<8192x2048xbf16>, memref<8x5632x2048xbf16>, memref<8xi64>
          into memref<8192x5632xbf16>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$lhs,
                       Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$rhs,
                       Arg<DC_RoutingIndexBuffer, "", [MemRead]>:$ends,
                       Arg<DC_RoutingFloatBuffer, "", [MemWrite]>:$result,
                       UnitAttr:$transpose_rhs);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $ends `into` $result (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs) `,` type($ends) `into`
    type($result)
  }];
  let hasVerifier = 1;
}

def DC_GroupedWeightGradIntoOp : DC_Op<"grouped_weight_grad_into"> {
  let summary = "dc.grouped_weight_grad in buffer form (overwrites result)";
  let description = [{
    ```mlir
    dc.grouped_weight_grad_into %dh, %rows, %ends into %dw1
        : memref<8192x5632xbf16>, memref<8192x2048xbf16>, memref<8xi64>
          into memref<8x5632x2048xbf16>
    ```
  }];
  let arguments = (ins Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$lhs,
                       Arg<DC_RoutingRowsBuffer, "", [MemRead]>:$rhs,
                       Arg<DC_RoutingIndexBuffer, "", [MemRead]>:$ends,
                       Arg<DC_RoutingFloatBuffer, "", [MemWrite]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $ends `into` $result attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($ends) `into` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DC_EXPERT_OPS_TD
