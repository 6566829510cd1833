// RUN: dc-opt %s --dc-raise-attention | FileCheck %s

// The decomposed attention of dc-gen-llama, on [B*H, S, Dh] = [2, 4, 3]:
// forward alone, non-causal, with its backward; then near misses, which
// must stay as they are.

!t = tensor<2x4x3xf32>
!s = tensor<2x4x4xf32>
!r = tensor<2x4xf32>
!kv = tensor<2x6x3xf32>
!sx = tensor<2x4x6xf32>
#bmk = affine_map<(b, m, n, k) -> (b, m, k)>
#bnk = affine_map<(b, m, n, k) -> (b, n, k)>
#bkm = affine_map<(b, m, n, k) -> (b, k, m)>
#bkn = affine_map<(b, m, n, k) -> (b, k, n)>
#bmn = affine_map<(b, m, n, k) -> (b, m, n)>
#id = affine_map<(b, i, j) -> (b, i, j)>
#row = affine_map<(b, i, j) -> (b, i)>

// Inference: the whole chain, its inits and its constants go; lse is unused.
// CHECK-LABEL: func.func @forward_only(
// CHECK-SAME: %[[Q:.*]]: tensor<2x4x3xf32>, %[[K:.*]]: tensor<2x4x3xf32>, %[[V:.*]]: tensor<2x4x3xf32>)
// CHECK-NEXT: %[[O:.*]], %{{.*}} = dc.attention %[[Q]], %[[K]], %[[V]] causal scale = 2.500000e-01 : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32> -> tensor<2x4x3xf32>, tensor<2x4xf32>
// CHECK-NEXT: return %[[O]]
func.func @forward_only(%q: !t, %k: !t, %v: !t) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  return %out : !t
}

// Without the mask (and the scale on the left) the op is not causal.
// CHECK-LABEL: func.func @non_causal(
// CHECK-NEXT: dc.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 :
// CHECK-NEXT: return
func.func @non_causal(%q: !t, %k: !t, %v: !t) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.125 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %scale, %a : f32
    linalg.yield %s : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  return %out : !t
}

// The backward on the saved probabilities becomes dc.attention_grad on the
// forward's o and lse: no 2x4x4 tensor is left.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[Q:.*]]: tensor<2x4x3xf32>, %[[K:.*]]: tensor<2x4x3xf32>, %[[V:.*]]: tensor<2x4x3xf32>, %[[DO:.*]]: tensor<2x4x3xf32>)
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = dc.attention %[[Q]], %[[K]], %[[V]] causal scale = 2.500000e-01
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dc.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] causal scale = 2.500000e-01 : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4xf32>, tensor<2x4x3xf32> -> tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>
// CHECK-NEXT: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
// CHECK-NOT: 2x4x4
func.func @forward_backward(%q: !t, %k: !t, %v: !t, %dout: !t) -> (!t, !t, !t, !t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  %e6 = tensor.empty() : !s
  %p0 = linalg.fill ins(%zero : f32) outs(%e6 : !s) -> !s
  %dprobs = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%dout, %v : !t, !t) outs(%p0 : !s) -> !s
  %e7 = tensor.empty() : !t
  %v0 = linalg.fill ins(%zero : f32) outs(%e7 : !t) -> !t
  %dv = linalg.batch_matmul indexing_maps = [#bkm, #bkn, #bmn] ins(%probs, %dout : !s, !t) outs(%v0 : !t) -> !t
  %e8 = tensor.empty() : !r
  %r0 = linalg.fill ins(%zero : f32) outs(%e8 : !r) -> !r
  %rowdot = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : !s, !s) outs(%r0 : !r) {
  ^bb0(%dp: f32, %p: f32, %acc: f32):
    %x = arith.mulf %dp, %p : f32
    %y = arith.addf %acc, %x : f32
    linalg.yield %y : f32
  } -> !r
  %e9 = tensor.empty() : !s
  %dscores = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dprobs, %probs, %rowdot : !s, !s, !r) outs(%e9 : !s) {
  ^bb0(%dp: f32, %p: f32, %rd: f32, %o: f32):
    %x = arith.subf %dp, %rd : f32
    %y = arith.mulf %p, %x : f32
    %z = arith.mulf %y, %scale : f32
    linalg.yield %z : f32
  } -> !s
  %e10 = tensor.empty() : !t
  %q0 = linalg.fill ins(%zero : f32) outs(%e10 : !t) -> !t
  %dq = linalg.batch_matmul ins(%dscores, %k : !s, !t) outs(%q0 : !t) -> !t
  %e11 = tensor.empty() : !t
  %k0 = linalg.fill ins(%zero : f32) outs(%e11 : !t) -> !t
  %dk = linalg.batch_matmul indexing_maps = [#bkm, #bkn, #bmn] ins(%dscores, %q : !s, !t) outs(%k0 : !t) -> !t
  return %out, %dq, %dk, %dv : !t, !t, !t, !t
}

// The probabilities are returned: they must stay.
// CHECK-LABEL: func.func @probs_escape(
// CHECK-NOT: dc.attention
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: return
func.func @probs_escape(%q: !t, %k: !t, %v: !t) -> (!t, !s) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  return %out, %probs : !t, !s
}

// A mask of the keys before the query is not causal attention.
// CHECK-LABEL: func.func @anti_causal(
// CHECK-NOT: dc.attention
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: return
func.func @anti_causal(%q: !t, %k: !t, %v: !t) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ult, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  return %out : !t
}

// A row max seeded with 0 is not the softmax's.
// CHECK-LABEL: func.func @max_from_zero(
// CHECK-NOT: dc.attention
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: return
func.func @max_from_zero(%q: !t, %k: !t, %v: !t) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%zero : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  return %out : !t
}

// A backward scaled differently is not this forward's; the forward's
// probabilities have other uses, so nothing is raised.
// CHECK-LABEL: func.func @backward_other_scale(
// CHECK-NOT: dc.attention
// CHECK-COUNT-6: linalg.batch_matmul
// CHECK: return
func.func @backward_other_scale(%q: !t, %k: !t, %v: !t, %dout: !t) -> (!t, !t, !t, !t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !s
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !s) -> !s
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !t) outs(%z0 : !s) -> !s
  %e1 = tensor.empty() : !s
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !s) outs(%e1 : !s) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !s
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !s) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !s, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !s
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !s, !r, !r) outs(%e4 : !s) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !s
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !s, !t) outs(%c0 : !t) -> !t
  %e6 = tensor.empty() : !s
  %p0 = linalg.fill ins(%zero : f32) outs(%e6 : !s) -> !s
  %dprobs = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%dout, %v : !t, !t) outs(%p0 : !s) -> !s
  %e7 = tensor.empty() : !t
  %v0 = linalg.fill ins(%zero : f32) outs(%e7 : !t) -> !t
  %dv = linalg.batch_matmul indexing_maps = [#bkm, #bkn, #bmn] ins(%probs, %dout : !s, !t) outs(%v0 : !t) -> !t
  %e8 = tensor.empty() : !r
  %r0 = linalg.fill ins(%zero : f32) outs(%e8 : !r) -> !r
  %rowdot = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : !s, !s) outs(%r0 : !r) {
  ^bb0(%dp: f32, %p: f32, %acc: f32):
    %x = arith.mulf %dp, %p : f32
    %y = arith.addf %acc, %x : f32
    linalg.yield %y : f32
  } -> !r
  %e9 = tensor.empty() : !s
  %dscores = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dprobs, %probs, %rowdot : !s, !s, !r) outs(%e9 : !s) {
  ^bb0(%dp: f32, %p: f32, %rd: f32, %o: f32):
    %x = arith.subf %dp, %rd : f32
    %y = arith.mulf %p, %x : f32
    %z = arith.mulf %y, %zero : f32
    linalg.yield %z : f32
  } -> !s
  %e10 = tensor.empty() : !t
  %q0 = linalg.fill ins(%zero : f32) outs(%e10 : !t) -> !t
  %dq = linalg.batch_matmul ins(%dscores, %k : !s, !t) outs(%q0 : !t) -> !t
  %e11 = tensor.empty() : !t
  %k0 = linalg.fill ins(%zero : f32) outs(%e11 : !t) -> !t
  %dk = linalg.batch_matmul indexing_maps = [#bkm, #bkn, #bmn] ins(%dscores, %q : !s, !t) outs(%k0 : !t) -> !t
  return %out, %dq, %dk, %dv : !t, !t, !t, !t
}

// Cross attention, 6 keys per 4 queries, is raised when not causal...
// CHECK-LABEL: func.func @cross(
// CHECK-NEXT: dc.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 : tensor<2x4x3xf32>, tensor<2x6x3xf32>, tensor<2x6x3xf32> -> tensor<2x4x3xf32>, tensor<2x4xf32>
// CHECK-NEXT: return
func.func @cross(%q: !t, %k: !kv, %v: !kv) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.125 : f32
  %e0 = tensor.empty() : !sx
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !sx) -> !sx
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !kv) outs(%z0 : !sx) -> !sx
  %e1 = tensor.empty() : !sx
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !sx) outs(%e1 : !sx) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %scale, %a : f32
    linalg.yield %s : f32
  } -> !sx
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !sx) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !sx, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !sx
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !sx, !r, !r) outs(%e4 : !sx) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !sx
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !sx, !kv) outs(%c0 : !t) -> !t
  return %out : !t
}

// ... but a causal mask needs as many keys as queries.
// CHECK-LABEL: func.func @cross_causal(
// CHECK-NOT: dc.attention
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK: return
func.func @cross_causal(%q: !t, %k: !kv, %v: !kv) -> (!t) {
  %zero = arith.constant 0.0 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.25 : f32
  %e0 = tensor.empty() : !sx
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : !sx) -> !sx
  %scores = linalg.batch_matmul indexing_maps = [#bmk, #bnk, #bmn] ins(%q, %k : !t, !kv) outs(%z0 : !sx) -> !sx
  %e1 = tensor.empty() : !sx
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores : !sx) outs(%e1 : !sx) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi ugt, %j, %i : index
    %s = arith.mulf %a, %scale : f32
    %x = arith.select %above, %neg_inf, %s : f32
    linalg.yield %x : f32
  } -> !sx
  %e2 = tensor.empty() : !r
  %m0 = linalg.fill ins(%neg_inf : f32) outs(%e2 : !r) -> !r
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked : !sx) outs(%m0 : !r) {
  ^bb0(%a: f32, %acc: f32):
    %x = arith.maximumf %acc, %a : f32
    linalg.yield %x : f32
  } -> !r
  %e3 = tensor.empty() : !r
  %d0 = linalg.fill ins(%zero : f32) outs(%e3 : !r) -> !r
  %denom = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%masked, %max : !sx, !r) outs(%d0 : !r) {
  ^bb0(%a: f32, %mx: f32, %acc: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.addf %acc, %y : f32
    linalg.yield %z : f32
  } -> !r
  %e4 = tensor.empty() : !sx
  %probs = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%masked, %max, %denom : !sx, !r, !r) outs(%e4 : !sx) {
  ^bb0(%a: f32, %mx: f32, %l: f32, %o: f32):
    %x = arith.subf %a, %mx : f32
    %y = math.exp %x : f32
    %z = arith.divf %y, %l : f32
    linalg.yield %z : f32
  } -> !sx
  %e5 = tensor.empty() : !t
  %c0 = linalg.fill ins(%zero : f32) outs(%e5 : !t) -> !t
  %out = linalg.batch_matmul ins(%probs, %v : !sx, !kv) outs(%c0 : !t) -> !t
  return %out : !t
}

// Products on buffers are not looked at.
// CHECK-LABEL: func.func @buffers(
// CHECK-NEXT: linalg.batch_matmul
func.func @buffers(%a: memref<2x4x3xf32>, %b: memref<2x3x4xf32>, %c: memref<2x4x4xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x3xf32>, memref<2x3x4xf32>) outs(%c : memref<2x4x4xf32>)
  return
}
