// RUN: dc-opt %s --dc-ulysses="sequence-parallel=2" | FileCheck %s --check-prefix=SP2
// RUN: dc-opt %s --dc-ulysses="sequence-parallel=4" | FileCheck %s --check-prefix=SP4
// RUN: dc-opt %s --dc-ulysses="sequence-parallel=2 reduce-grads=false" | FileCheck %s --check-prefix=NOGRAD
// RUN: dc-opt %s --dc-ulysses="sequence-parallel=1" | FileCheck %s --check-prefix=ONE

// A small attention block: x [B=2, S=16, 32] -> qkv projection -> 4 heads of
// 8 -> causal attention -> output projection, its backward for dq, and a
// loss that sums over every token. The sequence is dim 1 of x.

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#all2 = affine_map<(d0, d1) -> ()>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @block(%w: tensor<32x96xf32> {dc.param = #dc.param<id = 0, name = "wqkv">},
                 %x: tensor<2x16x32xf32> {dc.seq_dim = 1 : i64})
    -> (tensor<f32> {dc.loss}, tensor<32xf32> {dc.grad = #dc.grad<param = 0>}) {
  %zero = arith.constant 0.0 : f32
  %rows = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x16x32xf32> into tensor<32x32xf32>
  %e = tensor.empty() : tensor<32x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x96xf32>) -> tensor<32x96xf32>
  %qkv = linalg.matmul ins(%rows, %w : tensor<32x32xf32>, tensor<32x96xf32>) outs(%f : tensor<32x96xf32>) -> tensor<32x96xf32>
  %q2 = tensor.extract_slice %qkv[0, 0] [32, 32] [1, 1] : tensor<32x96xf32> to tensor<32x32xf32>
  %q4 = tensor.expand_shape %q2 [[0, 1], [2, 3]] output_shape [2, 16, 4, 8] : tensor<32x32xf32> into tensor<2x16x4x8xf32>
  %qe = tensor.empty() : tensor<2x4x16x8xf32>
  %qt = linalg.transpose ins(%q4 : tensor<2x16x4x8xf32>) outs(%qe : tensor<2x4x16x8xf32>) permutation = [0, 2, 1, 3]
  %q = tensor.collapse_shape %qt [[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
  %k2 = tensor.extract_slice %qkv[0, 32] [32, 32] [1, 1] : tensor<32x96xf32> to tensor<32x32xf32>
  %k4 = tensor.expand_shape %k2 [[0, 1], [2, 3]] output_shape [2, 16, 4, 8] : tensor<32x32xf32> into tensor<2x16x4x8xf32>
  %ke = tensor.empty() : tensor<2x4x16x8xf32>
  %kt = linalg.transpose ins(%k4 : tensor<2x16x4x8xf32>) outs(%ke : tensor<2x4x16x8xf32>) permutation = [0, 2, 1, 3]
  %k = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
  %v2 = tensor.extract_slice %qkv[0, 64] [32, 32] [1, 1] : tensor<32x96xf32> to tensor<32x32xf32>
  %v4 = tensor.expand_shape %v2 [[0, 1], [2, 3]] output_shape [2, 16, 4, 8] : tensor<32x32xf32> into tensor<2x16x4x8xf32>
  %ve = tensor.empty() : tensor<2x4x16x8xf32>
  %vt = linalg.transpose ins(%v4 : tensor<2x16x4x8xf32>) outs(%ve : tensor<2x4x16x8xf32>) permutation = [0, 2, 1, 3]
  %v = tensor.collapse_shape %vt [[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.35 : tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32> -> tensor<8x16x8xf32>, tensor<8x16xf32>
  // Back to tokens x features: [B*S, H*D].
  %o4 = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [2, 4, 16, 8] : tensor<8x16x8xf32> into tensor<2x4x16x8xf32>
  %oe = tensor.empty() : tensor<2x16x4x8xf32>
  %ot = linalg.transpose ins(%o4 : tensor<2x4x16x8xf32>) outs(%oe : tensor<2x16x4x8xf32>) permutation = [0, 2, 1, 3]
  %o2 = tensor.collapse_shape %ot [[0, 1], [2, 3]] : tensor<2x16x4x8xf32> into tensor<32x32xf32>
  // The loss: the sum over every token (a reduction over the sequence).
  %le = tensor.empty() : tensor<f32>
  %lf = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]} ins(%o2 : tensor<32x32xf32>) outs(%lf : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %inv = arith.constant 0.03125 : f32
  %me = tensor.empty() : tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%sum : tensor<f32>) outs(%me : tensor<f32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %inv : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // Backward: do = -o; dq, dk, dv; a gradient summed over the tokens.
  %de = tensor.empty() : tensor<8x16x8xf32>
  %do = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%o : tensor<8x16x8xf32>) outs(%de : tensor<8x16x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<8x16x8xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal scale = 0.35 : tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x16x8xf32> -> tensor<8x16x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 4, 16, 8] : tensor<8x16x8xf32> into tensor<2x4x16x8xf32>
  %dqe = tensor.empty() : tensor<2x16x4x8xf32>
  %dqt = linalg.transpose ins(%dq4 : tensor<2x4x16x8xf32>) outs(%dqe : tensor<2x16x4x8xf32>) permutation = [0, 2, 1, 3]
  %dq2 = tensor.collapse_shape %dqt [[0, 1], [2, 3]] : tensor<2x16x4x8xf32> into tensor<32x32xf32>
  %ge = tensor.empty() : tensor<32xf32>
  %gf = linalg.fill ins(%zero : f32) outs(%ge : tensor<32xf32>) -> tensor<32xf32>
  %g = linalg.generic {indexing_maps = [#id2, #col], iterator_types = ["reduction", "parallel"]} ins(%dq2 : tensor<32x32xf32>) outs(%gf : tensor<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  return %loss, %g : tensor<f32>, tensor<32xf32>
}

// SP=2: each rank holds 8 of the 16 positions; the projections run on its
// 2 x 8 tokens; attention runs on 2 of the 4 heads over the whole sequence.
// SP2: shard.grid @world(shape = 2)
// SP2-LABEL: func.func @block(
// SP2-SAME: %[[W:.*]]: tensor<32x96xf32> {dc.param
// SP2-SAME: %[[X:.*]]: tensor<2x8x32xf32> {dc.seq_axis = 0 : i64, dc.seq_dim = 1 : i64})
// SP2-SAME: -> (tensor<f32> {dc.loss}, tensor<32xf32> {dc.grad = #dc.grad<param = 0>})
// SP2: tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x8x32xf32> into tensor<16x32xf32>
// SP2: %[[QKV:.*]] = linalg.matmul ins(%{{.*}}, %[[W]] : tensor<16x32xf32>, tensor<32x96xf32>) outs(%{{.*}} : tensor<16x96xf32>) -> tensor<16x96xf32>
// SP2: tensor.extract_slice %[[QKV]][0, 0] [16, 32] [1, 1] : tensor<16x96xf32> to tensor<16x32xf32>
// SP2: tensor.expand_shape %{{.*}} output_shape [2, 8, 4, 8] : tensor<16x32xf32> into tensor<2x8x4x8xf32>
// SP2: linalg.transpose ins(%{{.*}} : tensor<2x8x4x8xf32>) outs(%{{.*}} : tensor<2x4x8x8xf32>)
// Sequence-sharded -> head-sharded: split the heads (dim 1), gather the
// sequence (dim 2). Each exchange starts as soon as its input is made,
// before the next projection's ops; all three are waited right before the
// attention.
// SP2: %[[Q:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// SP2-NEXT: %[[Q4:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0, 1], [2], [3]] output_shape [2, 4, 8, 8] : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
// SP2-NEXT: %[[QF:.*]] = dc.all_to_all_start %[[Q4]] on @world[0] split 1 concat 2 : tensor<2x4x8x8xf32> -> !dc.future<tensor<2x2x16x8xf32>>
// SP2-NOT: dc.wait
// SP2: tensor.extract_slice %[[QKV]][0, 32]
// SP2: linalg.transpose
// SP2: %[[K:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// SP2-NEXT: %[[K4:.*]] = tensor.expand_shape %[[K]]
// SP2-NEXT: %[[KF:.*]] = dc.all_to_all_start %[[K4]] on @world[0] split 1 concat 2
// SP2-NOT: dc.wait
// SP2: tensor.extract_slice %[[QKV]][0, 64]
// SP2: linalg.transpose
// SP2: %[[V:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// SP2-NEXT: %[[V4:.*]] = tensor.expand_shape %[[V]]
// SP2-NEXT: %[[VF:.*]] = dc.all_to_all_start %[[V4]] on @world[0] split 1 concat 2
// SP2-NEXT: %[[QA:.*]] = dc.wait %[[QF]] : !dc.future<tensor<2x2x16x8xf32>>
// SP2-NEXT: %[[QH:.*]] = tensor.collapse_shape %[[QA]] {{\[}}[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
// SP2-NEXT: %[[KA:.*]] = dc.wait %[[KF]]
// SP2-NEXT: %[[KH:.*]] = tensor.collapse_shape %[[KA]]
// SP2-NEXT: %[[VA:.*]] = dc.wait %[[VF]]
// SP2-NEXT: %[[VH:.*]] = tensor.collapse_shape %[[VA]]
// SP2-NEXT: %[[OH:.*]], %[[LSE:.*]] = dc.attention %[[QH]], %[[KH]], %[[VH]] causal scale = 3.500000e-01 : tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32> -> tensor<4x16x8xf32>, tensor<4x16xf32>
// And back: split the sequence, gather the heads. The output's first use
// (the transpose back to tokens) follows at once, so it is waited at once.
// SP2-NEXT: %[[O4:.*]] = tensor.expand_shape %[[OH]] {{\[}}[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
// SP2-NEXT: %[[OF:.*]] = dc.all_to_all_start %[[O4]] on @world[0] split 2 concat 1 : tensor<2x2x16x8xf32> -> !dc.future<tensor<2x4x8x8xf32>>
// SP2-NEXT: %[[OA:.*]] = dc.wait %[[OF]] : !dc.future<tensor<2x4x8x8xf32>>
// SP2-NEXT: %[[O:.*]] = tensor.collapse_shape %[[OA]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// SP2: tensor.collapse_shape %{{.*}} : tensor<2x8x4x8xf32> into tensor<16x32xf32>
// The token sum is a partial sum: scaled, then all-reduced over the group.
// SP2: %[[SUM:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<16x32xf32>) outs(%{{.*}} : tensor<f32>)
// SP2: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<f32>)
// SP2-NEXT: ^bb0
// SP2-NEXT: arith.mulf
// SP2-NEXT: linalg.yield
// SP2-NEXT: } -> tensor<f32>
// SP2-NEXT: %[[LF:.*]] = dc.all_reduce_start sum %[[LOSS]] on @world[0] : tensor<f32>
// The backward reuses the forward's head-sharded q, k, v, o and lse; only
// do goes through an all-to-all, and dq, dk, dv come back.
// SP2: linalg.generic {{.*}} ins(%[[O]] : tensor<8x8x8xf32>) outs(%{{.*}} : tensor<8x8x8xf32>)
// SP2: arith.negf
// SP2-NOT: dc.all_to_all
// SP2: %[[DOF:.*]] = dc.all_to_all_start %[[DO4:.*]] on @world[0] split 1 concat 2 : tensor<2x4x8x8xf32> -> !dc.future<tensor<2x2x16x8xf32>>
// SP2-NEXT: %[[DOA:.*]] = dc.wait %[[DOF]]
// SP2-NEXT: %[[DOH:.*]] = tensor.collapse_shape %[[DOA]]
// SP2-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dc.attention_grad %[[QH]], %[[KH]], %[[VH]], %[[OH]], %[[LSE]], %[[DOH]] causal
// dq, dk and dv start together; dk and dv are unused here (waited at once),
// dq is waited right before its first use, after the other two started.
// SP2-NEXT: tensor.expand_shape %[[DQ]]
// SP2-NEXT: %[[DQF:.*]] = dc.all_to_all_start %{{.*}} on @world[0] split 2 concat 1 : tensor<2x2x16x8xf32> -> !dc.future<tensor<2x4x8x8xf32>>
// SP2-NEXT: tensor.expand_shape %[[DK]]
// SP2-NEXT: %[[DKF:.*]] = dc.all_to_all_start
// SP2-NEXT: dc.wait %[[DKF]]
// SP2-NEXT: tensor.collapse_shape
// SP2-NEXT: tensor.expand_shape %[[DV]]
// SP2-NEXT: %[[DVF:.*]] = dc.all_to_all_start
// SP2-NEXT: dc.wait %[[DVF]]
// SP2-NEXT: tensor.collapse_shape
// SP2-NEXT: %[[DQA:.*]] = dc.wait %[[DQF]]
// SP2-NEXT: %[[DQS:.*]] = tensor.collapse_shape %[[DQA]]
// SP2-NEXT: tensor.expand_shape %[[DQS]]
// SP2-NOT: dc.all_to_all
// SP2: %[[G:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%{{.*}} : tensor<16x32xf32>) outs(%{{.*}} : tensor<32xf32>)
// SP2: %[[GF:.*]] = dc.all_reduce_start sum %[[G]] on @world[0] : tensor<32xf32>
// SP2: %[[L:.*]] = dc.wait %[[LF]] : !dc.future<tensor<f32>>
// SP2-NEXT: %[[GW:.*]] = dc.wait %[[GF]] : !dc.future<tensor<32xf32>>
// SP2-NEXT: return %[[L]], %[[GW]] : tensor<f32>, tensor<32xf32>

// SP=4: 4 positions per rank, one head each in attention.
// SP4: shard.grid @world(shape = 4)
// SP4: tensor<2x4x32xf32> {dc.seq_axis = 0 : i64, dc.seq_dim = 1 : i64}
// SP4: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<32x96xf32>) outs(%{{.*}} : tensor<8x96xf32>)
// SP4: dc.all_to_all_start %{{.*}} on @world[0] split 1 concat 2 : tensor<2x4x4x8xf32> -> !dc.future<tensor<2x1x16x8xf32>>
// SP4: dc.attention {{.*}} : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32> -> tensor<2x16x8xf32>, tensor<2x16xf32>
// SP4: dc.all_to_all_start %{{.*}} on @world[0] split 2 concat 1 : tensor<2x1x16x8xf32> -> !dc.future<tensor<2x4x4x8xf32>>
// SP4: dc.all_reduce_start sum %{{.*}} on @world[0] : tensor<f32>
// SP4: dc.attention_grad {{.*}} -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>

// Without reduce-grads the gradient is returned as the rank's partial sum
// (dc-zero3 reduces it); the loss is still all-reduced.
// NOGRAD: dc.all_reduce_start sum %{{.*}} on @world[0] : tensor<f32>
// NOGRAD-NOT: dc.all_reduce_start
// NOGRAD: return

// One rank on the axis: nothing to do.
// ONE: shard.grid @world(shape = 1)
// ONE: tensor<2x16x32xf32> {dc.seq_dim = 1 : i64}
// ONE-NOT: dc.all_to_all

// A table the step computes from positions alone (a rotary embedding's):
// each rank reads its rows [i * 8, (i + 1) * 8) at its index i on the
// sequence axis. A table from an argument is an error
// (ulysses-invalid.mlir, @unsharded_table).
// SP2-LABEL: func.func @computed_table
// SP2: %[[IDX:.*]] = shard.process_multi_index on @world axes = [0] : index
// SP2: %[[TABLE:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16xf32>)
// SP2: %[[OFF:.*]] = arith.muli %[[IDX]], %c8
// SP2: %[[MINE:.*]] = tensor.extract_slice %[[TABLE]][%[[OFF]]] [8] [1] : tensor<16xf32> to tensor<8xf32>
// SP2: linalg.generic {{.*}} ins(%{{.*}}, %[[MINE]] : tensor<2x8xf32>, tensor<8xf32>)
#t_id2 = affine_map<(d0, d1) -> (d0, d1)>
#t_pos = affine_map<(d0, d1) -> (d1)>
#t_one = affine_map<(d0) -> (d0)>
func.func @computed_table(%x: tensor<2x16xf32> {dc.seq_dim = 1 : i64}) -> (tensor<f32> {dc.loss}) {
  %te = tensor.empty() : tensor<16xf32>
  %t = linalg.generic {indexing_maps = [#t_one], iterator_types = ["parallel"]} outs(%te : tensor<16xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    %s = math.sin %f : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %e = tensor.empty() : tensor<2x16xf32>
  %y = linalg.generic {indexing_maps = [#t_id2, #t_pos, #t_id2], iterator_types = ["parallel", "parallel"]} ins(%x, %t : tensor<2x16xf32>, tensor<16xf32>) outs(%e : tensor<2x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x16xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  return %z : tensor<f32>
}
