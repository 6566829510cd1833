//===- DCAttentionOps.td - fused attention ---------------------*- tablegen -*-===//
#ifndef DC_ATTENTION_OPS_TD
#define DC_ATTENTION_OPS_TD

include "dc/Dialect/DC/IR/DCBase.td"

// Attention operands: [batch..., seq, head_dim], at least one batch dim.
def DC_AttentionTensor : StaticShapeTensorOf<[AnyFloat]>;
// The per-row log-sum-exp: [batch..., seq], always f32.
def DC_AttentionLSE : StaticShapeTensorOf<[F32]>;

def DC_AttentionOp : DC_Op<"attention", [Pure]> {
  let summary = "fused scaled-dot-product attention (flash-attention forward)";
  let description = [{
    Per batch index (any number of leading dims, e.g. `[B*H]` or `[B, H]`):

    ```
    z[i, j]  = scale * sum_d q[i, d] k[j, d]      (-inf where j > i if causal)
    lse[i]   = log sum_j exp(z[i, j])
    o[i, :]  = sum_j exp(z[i, j] - lse[i]) v[j, :]
    ```

    `q` is `[..., Sq, D]`, `k` and `v` are `[..., Sk, D]` with the same
    batch dims and element type; `o` has the type of `q`. `lse` is the f32
    log-sum-exp of each query row, `[..., Sq]`: it is all `dc.attention_grad`
    needs besides `o` to recompute the probabilities, so no `Sq x Sk` tensor
    outlives the op. `causal` masks key `j > i` and needs `Sq == Sk`.

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
                       UnitAttr:$causal);
  let results = (outs DC_AttentionTensor:$o, DC_AttentionLSE:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? `scale` `=` $scale attr-dict `:`
    type($q) `,` type($k) `,` type($v) `->` type($o) `,` type($lse)
  }];
  let builders = [
    // Infers o and lse from q.
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "float":$scale, "bool":$causal)>
  ];
  let hasVerifier = 1;
}

def DC_AttentionGradOp : DC_Op<"attention_grad", [Pure]> {
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
    `v`.

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
                       F32Attr:$scale, UnitAttr:$causal);
  let results = (outs DC_AttentionTensor:$dq, DC_AttentionTensor:$dk,
                      DC_AttentionTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $o `,` $lse `,` $dO (`causal` $causal^)? `scale` `=`
    $scale attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($o) `,`
    type($lse) `,` type($dO) `->` type($dq) `,` type($dk) `,` type($dv)
  }];
  let builders = [
    // dq, dk, dv take the types of q, k, v.
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::Value":$o, "::mlir::Value":$lse,
                   "::mlir::Value":$dO, "float":$scale, "bool":$causal)>
  ];
  let hasVerifier = 1;
}

#endif // DC_ATTENTION_OPS_TD
