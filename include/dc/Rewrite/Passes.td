//===- Passes.td - dc rewrite passes -----------------------*- tablegen -*-===//
#ifndef DC_REWRITE_PASSES_TD
#define DC_REWRITE_PASSES_TD

include "mlir/Pass/PassBase.td"

def DCRaiseAttention : Pass<"dc-raise-attention", "::mlir::func::FuncOp"> {
  let summary = "Raise decomposed softmax(q k^T) v and its backward into "
                "dc.attention and dc.attention_grad";
  let description = [{
    Matches the decomposed attention of dc-gen-llama (docs/models.md):
    `linalg.batch_matmul` q k^T; one elementwise generic that scales and,
    optionally, applies the causal mask; the f32 row max and sum-of-exp
    reductions; the normalising generic; `linalg.batch_matmul` with v. It
    becomes one `dc.attention`. The probabilities may feed only that
    product or, besides it, the decomposed backward (dv = p^T do,
    dp = do v^T, the row dot sum_j dp p, ds = scale p (dp - rowdot),
    dq = ds k, dk = ds^T q), which becomes one `dc.attention_grad` on the
    forward's o and lse. The score, probability and gradient-of-score
    tensors (B H x S x S) disappear with the ops that made them.

    Every op of a match must have no uses outside it and lie in one block,
    the forward before the backward; IR that does not match is left as it
    is. The fused ops compute in f32 internally, so a bf16 step changes only
    by the roundings of the S x S intermediates it no longer stores.
  }];
  let dependentDialects = ["::dc::DCDialect"];
}

def DCFoldHeadTransposes : Pass<"dc-fold-head-transposes"> {
  let summary = "Let fused attention read and write [B, S, H, D] tensors "
                "instead of their head transposes";
  let description = [{
    For the GPU targets, on tensors before bufferization. A model splits
    the heads of its q/k/v projections ([B*S, H*D] -> [B, S, H, D]) and
    transposes them to the [B, H, S, D] (or [B*H, S, D]) that
    `dc.attention` reads, then transposes the context back; the backward
    does the same for the output gradient and dq, dk, dv. On config A
    those 128 transposes move 4 GiB a step (docs/cost-model.md, the h200
    preset's `foldsHeadTransposes`). The
    runtime's flash attention takes strided operands, so this pass rewrites
    a `dc.attention` / `dc.attention_grad` whose q, k, v (and o, do) are
    all such transposes into the op's `bshd` form on the untransposed
    tensors, and gives its results to their users through the inverse
    transposes, which cancel against the users' own transposes (and then
    fold away with the transposes that fed the op). After bufferization
    the op reads column slices of the fused projection in place.

    Only 16-bit attention without grouping is rewritten (f32 attention is
    expanded to linalg; the runtime's cuDNN path has no strided grouped
    form), and only where every operand matches; anything else stays as it
    was. `dc-zero3-pipeline` runs it before planning (`if-target-folds`:
    where the module's `#dc.target` says `foldsHeadTransposes`, as the GPU
    presets do), so the planners see the step the GPU runs;
    `dc-lower-to-llvm` runs it again for steps planned otherwise.
  }];
  let dependentDialects = ["::dc::DCDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"ifTargetFolds", "if-target-folds", "bool", "false",
           "Fold only where the module's target says foldsHeadTransposes "
           "(#dc.target; the default preset without one)">,
  ];
}

def DCChunkRows : Pass<"dc-chunk-rows", "::mlir::func::FuncOp"> {
  let summary = "Compute a wide matrix product, and what reads it, a chunk "
                "of rows at a time";
  let description = [{
    A language model's head makes its largest transient: config A's logits
    (8192 tokens x 32000 words, 500 MiB in bf16) and their gradient live
    together with every saved activation, at the step's memory peak. Each
    row of them is needed only by row-wise work (the softmax statistics,
    the loss term, the gradient row) and by two products that reduce or
    map rows (the head's weight gradient sums over tokens, the hidden
    gradient is one row per row). This pass finds a `linalg.matmul` whose
    result is at least `min-bytes` and rewrites it, and every op that
    reads it or a value made from it row by row, into `chunks` copies over
    consecutive row ranges, so only a chunk of the wide tensors is ever
    live (like the chunked "fused linear cross-entropy" of Liger Kernel,
    here derived from the step's ops instead of hand-written).

    Each op of the closure is classified by the loop its chunked operands'
    rows are indexed by (the row loop): parallel there, it is cloned per
    chunk on row slices of its row-indexed operands (an init a
    `tensor.empty` or a `linalg.fill` of one gets a chunk-sized one), and
    a result something outside the closure reads is assembled with
    `tensor.insert_slice` into the full tensor, each chunk writing its
    slice in place; a reduction there (the weight gradient, the summed
    loss), each chunk's copy accumulates into the previous one's result,
    which is linalg's own order of accumulation. `linalg.index` of the row
    loop is offset by the chunk's first row, except where it picks a row
    of a chunked value the body reads from outside its operands (the loss
    term's gather of the target's logit), which is chunk-local already.
    Only ops that read a value of the product's shape, or feed one that
    does, are chunked; the rest read assembled results. A
    `tensor.expand_shape` / `collapse_shape` that keeps the rows as dim 0
    (a frontend's [T] <-> [T, 1] views of per-row values) is chunked with
    them, and reshapes that come back to the shape they left (the logits
    viewed as [batch, sequence, words] and back) are folded first.

    Nothing is rewritten (and a remark says why) when a wide value would
    have to be assembled anyway (returned, or read by an op not chunkable
    on its rows), when the rows do not divide by `chunks`, or when an
    operand the chunks need is made after the first of them by an op that
    cannot move before it. Two rewrites make PyTorch's mean cross-entropy
    with an ignore index chunkable: its loss reduction also counts the
    counted tokens, which every row's gradient is scaled by, so a result of
    a reduction that reads the product but whose own value does not (the
    count reads the targets alone) is split off into a generic of its own,
    made before the chunks; and a value of the product's shape that a
    chunked op reads but that is made row by row from unchunked values
    (the one-hot gradient, from the targets) is made in the chunks too.
    The rewrite changes where partial sums round (a bf16 weight gradient is
    rounded once per chunk on the GPU), not what is summed.
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "4",
           "Row chunks of each wide product (2 or more)">,
    Option<"minBytes", "min-bytes", "int64_t", "268435456",
           "Chunk only matrix products whose result has at least this many "
           "bytes">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DCExpandAttention : Pass<"dc-expand-attention", "::mlir::func::FuncOp"> {
  let summary = "Expand dc.attention and dc.attention_grad into linalg";
  let description = [{
    Rewrites each fused attention op into `linalg.generic`s on tensors, for
    targets without a flash-attention kernel (the CPU loop lowering, the
    gradient checks). Scores and probabilities are materialised in f32
    (`[batch..., Sq, Sk]`); products accumulate in f32 and the results are
    rounded once to the operands' element type. The backward recomputes the
    probabilities from q, k and lse, and takes the softmax row term as
    `sum_d do o`, as a flash-attention kernel does.

    With `keep-fused`, bf16 and f16 ops stay as they are: the GPU target
    (`dc-lower-to-llvm target=h200`) bufferizes them to
    `dc.attention_into` / `dc.attention_grad_into` and calls the runtime's
    flash attention (`dcrt_attention_fwd` / `_bwd`, cuDNN); f32 ops, which
    cuDNN's flash kernels do not take, are still expanded. A grouped-query
    op in the `bshd` form becomes the `[B, H, S, D]` op between head
    transposes: the runtime reads grouped heads only dense, heads-major.
  }];
  let options = [
    Option<"keepFused", "keep-fused", "bool", /*default=*/"false",
           "Leave bf16 and f16 ops fused (the runtime's flash attention runs "
           "them); expand only f32 ones">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DCExpandExperts : Pass<"dc-expand-experts", "::mlir::func::FuncOp"> {
  let summary = "Expand the mixture-of-experts routing ops into linalg";
  let description = [{
    Rewrites `dc.topk`, `dc.group_by_expert`, `dc.gather_rows`,
    `dc.scatter_add_rows`, `dc.grouped_matmul` and `dc.grouped_weight_grad`
    into `linalg.generic`s on tensors with static shapes: their reference
    semantics. Compiled steps call libdcrt's routing kernels instead (the
    ops bufferize to their buffer forms), and run this pass with
    `keep-library-types` for the ops whose element types those calls do
    not take (f64 and narrower floats than f16); `dc-lower-to-llvm
    reference-experts` expands every op, to check the kernels against it.

    A grouping with a `capacity` becomes two plain groupings on every
    target (the first sorts; the sorted rows past their expert's capacity
    get id -1; the second moves them after every expert's rows; the order
    is the first's at the second's), which are then expanded or called like
    any other.

    - top-k ranks each score among its row (how many scores beat it, ties
      to the lower position) and picks the entries of ranks 0 to k - 1;
    - the grouping counts each expert's assignments, sums the counts into
      ends, and places each assignment at its expert's start plus the
      number of earlier assignments to the same expert (quadratic in the
      assignments: fine for the host's test sizes);
    - gathers read rows with `tensor.extract` (as an embedding lookup
      does); scatter-adds sum the source rows whose index names each
      result row;
    - the grouped products find each row's expert (the number of `ends` at
      or before the row) and read that expert's matrix; rows past the last
      end get zeros. Products and sums accumulate in f32 (or the element
      type, if wider) and are rounded once to the result type.
  }];
  let options = [
    Option<"keepLibraryTypes", "keep-library-types", "bool",
           /*default=*/"false",
           "Leave the ops whose element types libdcrt's routing calls take "
           "(f32, bf16, f16) for them; expand the others">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DCSimplifyMath : Pass<"dc-simplify-math"> {
  let summary = "Powers by constant exponents as multiplications, square "
                "roots and divisions (upstream's algebraic simplification)";
  let description = [{
    `math.powf %x, c` for a constant c of 1, 2, 3, -1, -2, 0.5, -0.5 or
    0.75 (and `math.fpowi` / `math.ipowi` by small constants) becomes the
    multiplications, `math.sqrt`, `math.rsqrt` and divisions it equals,
    with upstream's `populateMathAlgebraicSimplificationPatterns`. PyTorch's
    backward of `x.pow(2)` is `2 * x.pow(1.0)` and of `rsqrt` a `pow(r, 3)`:
    exported steps hold such powers of tensors of either sign. A power of a
    negative base is defined for an integer exponent, but the hardware's
    fast power (`__nv_fast_powf`, exp2(y * log2(x))) is NaN there; written
    as multiplications it is exact on every target, and cheaper. The
    powers left are general ones, which `dc-map-to-gpu` keeps accurate.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // DC_REWRITE_PASSES_TD
