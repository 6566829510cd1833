//===- DCAttentionOps.td - fused attention ---------------------*- tablegen -*-===//
#ifndef DC_ATTENTION_OPS_TD
#define DC_ATTENTION_OPS_TD

include "dc/Dialect/DC/IR/DCBase.td"
include "dc/Dialect/DC/IR/DCInterfaces.td"

// Attention operands: [batch..., seq, head_dim], at least one batch dim.
def DC_AttentionTensor : StaticShapeTensorOf<[AnyFloat]>;
// The per-row log-sum-exp: [batch..., seq], always f32.
def DC_AttentionLSE : StaticShapeTensorOf<[F32]>;

def DC_AttentionOp : DC_Op<"attention", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface, ["getMatmulElementType"]>]> {
  let summary = "fused scaled-dot-product attention (flash-attention forward)";
  let description = [{
    Per batch index (any number of leading dims, e.g. `[B*H]` or `[B, H]`):

    ```
    z[i, j]  = scale * sum_d q[i, d] k[j, d]      (-inf where j > i if causal)
    lse[i]   = log sum_j exp(z[i, j])
    o[i, :]  = sum_j exp(z[i, j] - lse[i]) v[j, :]
    ```

    `q` is `[..., Sq, D]`, `k` and `v` are `[..., Sk, D]` with the same
    batch dims and element type; `o` has the type of `q`.

    Grouped-query attention (Llama-3, Mistral): the innermost batch dim of
    `k` and `v` (the key/value heads) may divide that of `q` (the query
    heads) instead of equalling it; with `G` query heads per key/value head,
    query head `h` reads key/value head `h / G` (PyTorch's `repeat_kv`
    order). In row-major order over all batch dims, query batch entry `b`
    reads key/value batch entry `b / G`, so `[B*H, S, D]` against
    `[B*Hkv, S, D]` means the same as `[B, H, S, D]` against
    `[B, Hkv, S, D]`. `lse` is the f32
    log-sum-exp of each query row, `[..., Sq]`: it is all `dc.attention_grad`
    needs besides `o` to recompute the probabilities, so no `Sq x Sk` tensor
    outlives the op. `causal` masks key `j > i` and needs `Sq == Sk`.

    With `bshd`, the operands are rank 4 with the sequence before the heads:
    `q` and `o` are `[B, Sq, H, D]`, `k` and `v` `[B, Sk, Hkv, D]` (PyTorch's
    layout after the q/k/v projections) and `lse` is `[B, H, Sq]`: the same
    op on the operands transposed to `[B, H, S, D]`. `dc-fold-head-transposes`
    forms it where the operands were such transposes, so that the runtime
    reads and writes the projections' buffers in place.
    A lowering maps the op to a flash-attention kernel; `dc-expand-attention`
    rewrites it into linalg for targets without one, and
    `dc-raise-attention` forms it from the decomposed softmax(q k^T) v.

    ```mlir
    %o, %lse = dc.attention %q, %k, %v causal scale = 0.125
        : tensor<32x2048x64xbf16>, tensor<32x2048x64xbf16>,
          tensor<32x2048x64xbf16> -> tensor<32x2048x64xbf16>, tensor<32x2048xf32>
    ```
  }];
  let arguments = (ins DC_AttentionTensor:$q, DC_AttentionTensor:$k,
                       DC_AttentionTensor:$v, F32Attr:$scale,
                       UnitAttr:$causal, UnitAttr:$bshd);
  let results = (outs DC_AttentionTensor:$o, DC_AttentionLSE:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? (`bshd` $bshd^)? `scale` `=` $scale
    attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($o) `,`
    type($lse)
  }];
  let builders = [
    // Infers o and lse from q.
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "float":$scale, "bool":$causal,
                   CArg<"bool", "false">:$bshd)>
  ];
  let hasVerifier = 1;
}

def DC_AttentionGradOp : DC_Op<"attention_grad", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface,
                              ["getMatmulElementType", "isReproducible"]>]> {
  let summary = "backward of dc.attention (flash-attention backward)";
  let description = [{
    The gradients `dq`, `dk`, `dv` of a loss with respect to the operands of
    the `dc.attention` that produced `o` and `lse` from `q`, `k`, `v` with the
    same `scale` and `causal`, given `do`, the gradient with respect to `o`.
    With `p = exp(z - lse)` recomputed from `q`, `k` and `lse`:

    ```
    dv = p^T do        dp = do v^T        delta[i] = sum_d do[i, d] o[i, d]
    ds = scale * p * (dp - delta)
    dq = ds k          dk = ds^T q
    ```

    `o` and `do` have the type of `q`; `dq`, `dk`, `dv` the types of `q`, `k`,
    `v`. With grouped-query attention (fewer key/value heads than query
    heads, see `dc.attention`) `dk` and `dv` of a key/value head sum the
    products above over the query heads of its group. `bshd` as for
    `dc.attention`: every operand and result but `lse` is `[B, S, H, D]`.

    ```mlir
    %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal
        scale = 0.125 : tensor<32x2048x64xbf16>, tensor<32x2048x64xbf16>,
          tensor<32x2048x64xbf16>, tensor<32x2048x64xbf16>, tensor<32x2048xf32>,
          tensor<32x2048x64xbf16> -> tensor<32x2048x64xbf16>,
          tensor<32x2048x64xbf16>, tensor<32x2048x64xbf16>
    ```
  }];
  let arguments = (ins DC_AttentionTensor:$q, DC_AttentionTensor:$k,
                       DC_AttentionTensor:$v, DC_AttentionTensor:$o,
                       DC_AttentionLSE:$lse, DC_AttentionTensor:$dO,
                       F32Attr:$scale, UnitAttr:$causal, UnitAttr:$bshd);
  let results = (outs DC_AttentionTensor:$dq, DC_AttentionTensor:$dk,
                      DC_AttentionTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $o `,` $lse `,` $dO (`causal` $causal^)?
    (`bshd` $bshd^)? `scale` `=` $scale attr-dict `:` type($q) `,` type($k)
    `,` type($v) `,` type($o) `,` type($lse) `,` type($dO) `->` type($dq) `,`
    type($dk) `,` type($dv)
  }];
  let builders = [
    // dq, dk, dv take the types of q, k, v.
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::Value":$o, "::mlir::Value":$lse,
                   "::mlir::Value":$dO, "float":$scale, "bool":$causal,
                   CArg<"bool", "false">:$bshd)>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffer forms (GPU target): runtime flash-attention calls
//===----------------------------------------------------------------------===//

// Statically shaped float device buffers: dense, or strided in the `bshd`
// form (the verifiers say which).
def DC_AttentionBuffer : Type<And<[
    CPred<"::dc::isStridedDeviceBuffer($_self)">,
    CPred<"::llvm::isa<::mlir::FloatType>("
          "::llvm::cast<::mlir::MemRefType>($_self).getElementType())">]>,
    "statically shaped strided float memref (device)",
    "::mlir::MemRefType">;

def DC_AttentionIntoOp : DC_Op<"attention_into"> {
  let summary = "dc.attention in buffer form: writes o and lse";
  let description = [{
    The buffer form of `dc.attention` on targets that run it as a library
    call (`dc-compile --target=h200`, bf16 and f16: `dcrt_attention_fwd`,
    cuDNN's flash attention). Reads `q`, `k`, `v` and writes `o` and `lse`,
    dense buffers with the shapes and element types `dc.attention` gives its
    operands and results (k and v may have fewer heads: grouped-query
    attention); the same `scale` and `causal`. With `bshd` the rank-4
    operands may be strided views (any strides, the innermost 1), such as
    column slices of a fused q/k/v projection; `lse` stays dense.
    One-Shot Bufferize
    makes it from a `dc.attention` that `dc-expand-attention` left fused,
    with `o` and `lse` freshly allocated; `dc-to-dcrt` lowers it.

    ```mlir
    dc.attention_into %q, %k, %v into %o, %lse causal scale = 0.125
        : memref<32x2048x64xbf16>, memref<32x2048x64xbf16>,
          memref<32x2048x64xbf16> into memref<32x2048x64xbf16>,
          memref<32x2048xf32>
    ```
  }];
  let arguments = (ins Arg<DC_AttentionBuffer, "", [MemRead]>:$q,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$k,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$v,
                       Arg<DC_AttentionBuffer, "", [MemWrite]>:$o,
                       Arg<DC_AttentionBuffer, "", [MemWrite]>:$lse,
                       F32Attr:$scale, UnitAttr:$causal, UnitAttr:$bshd);
  let assemblyFormat = [{
    $q `,` $k `,` $v `into` $o `,` $lse (`causal` $causal^)? (`bshd` $bshd^)?
    `scale` `=` $scale attr-dict `:` type($q) `,` type($k) `,` type($v) `into`
    type($o) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def DC_AttentionGradIntoOp : DC_Op<"attention_grad_into"> {
  let summary = "dc.attention_grad in buffer form: writes dq, dk, dv";
  let description = [{
    The buffer form of `dc.attention_grad` on targets that run it as a
    library call (`dcrt_attention_bwd`): reads `q`, `k`, `v`, `o`, `lse` and
    `do`, writes (overwrites) `dq`, `dk` and `dv`, with the types
    `dc.attention_grad` gives them (strided views with `bshd`, as for
    `dc.attention_into`).

    ```mlir
    dc.attention_grad_into %q, %k, %v, %o, %lse, %do into %dq, %dk, %dv
        causal scale = 0.125 : memref<32x2048x64xbf16>,
          memref<32x2048x64xbf16>, memref<32x2048x64xbf16>,
          memref<32x2048x64xbf16>, memref<32x2048xf32>,
          memref<32x2048x64xbf16> into memref<32x2048x64xbf16>,
          memref<32x2048x64xbf16>, memref<32x2048x64xbf16>
    ```
  }];
  let arguments = (ins Arg<DC_AttentionBuffer, "", [MemRead]>:$q,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$k,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$v,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$o,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$lse,
                       Arg<DC_AttentionBuffer, "", [MemRead]>:$dO,
                       Arg<DC_AttentionBuffer, "", [MemWrite]>:$dq,
                       Arg<DC_AttentionBuffer, "", [MemWrite]>:$dk,
                       Arg<DC_AttentionBuffer, "", [MemWrite]>:$dv,
                       F32Attr:$scale, UnitAttr:$causal, UnitAttr:$bshd);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $o `,` $lse `,` $dO `into` $dq `,` $dk `,` $dv
    (`causal` $causal^)? (`bshd` $bshd^)? `scale` `=` $scale attr-dict `:`
    type($q) `,`
    type($k) `,` type($v) `,` type($o) `,` type($lse) `,` type($dO) `into`
    type($dq) `,` type($dk) `,` type($dv)
  }];
  let hasVerifier = 1;
}

#endif // DC_ATTENTION_OPS_TD
