// RUN: dc-opt %s --dc-ulysses="sequence-parallel=4" -split-input-file -verify-diagnostics

// 4 ranks cannot split 2 query heads (the tokens give the batch, 2).
func.func @indivisible_heads(%t: tensor<2x16xi32> {dc.seq_dim = 1 : i64}, %q: tensor<4x16x8xf32> {dc.seq_dim = 1 : i64}, %k: tensor<4x16x8xf32> {dc.seq_dim = 1 : i64})
    -> (tensor<f32> {dc.loss}) {
  // expected-error @+1 {{dc-ulysses: sequence parallelism 4 does not divide the 2 query heads (q is 'tensor<4x4x8xf32>' for a batch of 2)}}
  %o, %lse = dc.attention %q, %k, %k causal scale = 0.35 : tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>, tensor<4x16xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// A max over the sequence is not a sum: ranks' maxima do not add up.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @max_over_sequence(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<2xf32> {dc.loss}) {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  // expected-error @+1 {{dc-ulysses: reduction over the sequence dim (loop d1) is not a sum into a zero-filled init; it cannot be split over the sequence-parallel group}}
  %m = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2x16xf32>) outs(%f : tensor<2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

// A sum over the sequence is a partial sum; its square root is not the
// square root of the whole sum.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#id1 = affine_map<(d0) -> (d0)>
func.func @nonlinear_partial(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<2xf32> {dc.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  %s = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2x16xf32>) outs(%f : tensor<2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  } -> tensor<2xf32>
  // expected-error @+1 {{dc-ulysses: 'math.sqrt' of a partial sum over the sequence-parallel group (a reduction over the sequence) is not linear}}
  %r = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%s : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.sqrt %a : f32
    linalg.yield %t : f32
  } -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// Splitting the sequence itself into two halves mixes the ranks' parts.
func.func @reshape_mixes(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}) {
  // expected-error @+1 {{dc-ulysses: this reshape splits the sequence dim (dim 1 of 'tensor<2x4xf32>' holds sequences of 16); it cannot be sharded}}
  %y = tensor.expand_shape %x [[0], [1, 2]] output_shape [2, 2, 8] : tensor<2x16xf32> into tensor<2x2x8xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// Half of the sequence is not a rank's slice of anything.
func.func @partial_slice(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}) {
  // expected-error @+1 {{dc-ulysses: slices part of the sequence dim 1; only whole-sequence slices are supported}}
  %y = tensor.extract_slice %x[0, 0] [2, 8] [1, 1] : tensor<2x16xf32> to tensor<2x8xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

func.func @indivisible_length(
    // expected-error @+1 {{sequence argument #0: sequence length 6 is not divisible by the 4 ranks of sequence parallelism}}
    %x: tensor<2x6xi32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}) {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// The position of a token is its global index, which the local loop index is not.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @index_of_sequence(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}) {
  %e = tensor.empty() : tensor<2x16xf32>
  %y = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x16xf32>) outs(%e : tensor<2x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    // expected-error @+1 {{dc-ulysses: linalg.index of the sequence loop d1 would give the local position, not the global one}}
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    %t = arith.addf %a, %f : f32
    linalg.yield %t : f32
  } -> tensor<2x16xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// A full-length table the tokens index by position must be sharded too.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#pos = affine_map<(d0, d1) -> (d1)>
func.func @unsharded_table(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}, %t: tensor<16xf32>) -> (tensor<f32> {dc.loss}) {
  %e = tensor.empty() : tensor<2x16xf32>
  // expected-error @+1 {{dc-ulysses: input #1 spans the full sequence (dim 0) but is not sequence-sharded}}
  %y = linalg.generic {indexing_maps = [#id2, #pos, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %t : tensor<2x16xf32>, tensor<16xf32>) outs(%e : tensor<2x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x16xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

func.func @returns_sharded(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}, tensor<2x16xf32>) {
  %z = arith.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{dc-ulysses: result #1 is sharded over the sequence; a step returns only the loss and gradients}}
  return %z, %x : tensor<f32>, tensor<2x16xf32>
}

// -----

// expected-error @+1 {{dc-ulysses: @no_sequence has no sequence argument (dc.seq_dim, seq-args, or dc.vocab token ids)}}
func.func @no_sequence(%x: tensor<2x16xf32>) -> (tensor<f32> {dc.loss}) {
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}

// -----

// The bshd form is made after dc-ulysses (dc-fold-head-transposes); the
// pass takes attention in its [B*H, S, D] / [B, H, S, D] form.
func.func @bshd(%t: tensor<2x16xi32> {dc.seq_dim = 1 : i64}, %q: tensor<2x16x4x8xf32> {dc.seq_dim = 1 : i64})
    -> (tensor<f32> {dc.loss}) {
  // expected-error @+1 {{dc-ulysses: the bshd form is not supported (it is made after dc-ulysses, by dc-fold-head-transposes)}}
  %o, %lse = dc.attention %q, %q, %q causal bshd scale = 0.35 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32> -> tensor<2x16x4x8xf32>, tensor<2x4x16xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}
