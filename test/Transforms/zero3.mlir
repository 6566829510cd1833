// RUN: dc-opt %s --dc-zero3="world-size=2 bucket-bytes=48" -split-input-file | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=3 bucket-bytes=100" -split-input-file | FileCheck %s --check-prefix=BUCKET
// RUN: dc-opt %s --dc-zero3="world-size=2 replicate-below=20" -split-input-file | FileCheck %s --check-prefix=REPL
// RUN: dc-opt %s --dc-zero3="world-size=1" -split-input-file | FileCheck %s --check-prefix=ONE
// RUN: dc-opt %s --dc-zero3="world-size=1 shard-one-rank=true" -split-input-file | FileCheck %s --check-prefix=ONESHARD

// A linear layer with a loss: the weight is used once in forward (the loss
// depends on it) and once in backward (the input gradient): two intervals.

// CHECK: shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @linear
// CHECK-SAME: %[[W:.*]]: !dc.shard<tensor<4x3xf32>, @world[0], local = 6> {dc.param = #dc.param<id = 0, name = "w">}
// CHECK-SAME: %[[B:.*]]: !dc.shard<tensor<3xf32>, @world[0], local = 2> {dc.param = #dc.param<id = 1, name = "b">}
// CHECK-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<4x3xf32>, @world[0], local = 6> {dc.grad = #dc.grad<param = 0>}, !dc.shard<tensor<3xf32>, @world[0], local = 2> {dc.grad = #dc.grad<param = 1>}, tensor<2x4xf32>)
// Forward interval of w: gather right before the matmul, release right after.
// CHECK: %[[FW:.*]] = dc.gather_start %[[W]] : !dc.shard<tensor<4x3xf32>, @world[0], local = 6> -> !dc.future<tensor<4x3xf32>>
// CHECK-NEXT: %[[W0:.*]] = dc.wait %[[FW]]
// CHECK-NEXT: %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %[[W0]] :
// CHECK-NEXT: dc.release %[[W0]] : tensor<4x3xf32>
// CHECK: %[[FB:.*]] = dc.gather_start %[[B]]
// CHECK-NEXT: %[[B0:.*]] = dc.wait %[[FB]]
// CHECK-NEXT: linalg.broadcast ins(%[[B0]] :
// CHECK-NEXT: dc.release %[[B0]]
// CHECK-NEXT: linalg.add ins(%[[Y]], %{{.*}} :
// The weight gradient is reduce-scattered as soon as it is computed.
// CHECK: %[[GW:.*]] = linalg.matmul {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x3xf32>)
// CHECK-NEXT: %[[RW:.*]] = dc.reduce_scatter_start average %[[GW]] : tensor<4x3xf32> -> !dc.future<!dc.shard<tensor<4x3xf32>, @world[0], local = 6>>
// Backward interval of w: the input gradient.
// CHECK: %[[FW2:.*]] = dc.gather_start %[[W]]
// CHECK-NEXT: %[[W1:.*]] = dc.wait %[[FW2]]
// CHECK-NEXT: %[[GX:.*]] = linalg.matmul {{.*}} ins(%{{.*}}, %[[W1]] :
// CHECK-NEXT: dc.release %[[W1]]
// The bias gradient comes last: a 48-byte bucket cannot hold both.
// CHECK: %[[RB:.*]] = dc.reduce_scatter_start average
// CHECK: %[[G:.*]]:2 = dc.end_backward %[[RW]], %[[RB]] :
// CHECK-NEXT: return %{{.*}}, %[[G]]#0, %[[G]]#1, %[[GX]]

// Three ranks: 12 elements -> 4 each; 3 elements -> 1 each. A 100-byte
// bucket holds both gradients (48 + 12 bytes): one reduce-scatter.
// BUCKET: shard.grid @world(shape = 3)
// BUCKET: !dc.shard<tensor<4x3xf32>, @world[0], local = 4>
// BUCKET: !dc.shard<tensor<3xf32>, @world[0], local = 1>
// BUCKET: %[[R:.*]]:2 = dc.reduce_scatter_start average %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3xf32>
// BUCKET: dc.end_backward %[[R]]#0, %[[R]]#1

// The 12-byte bias stays replicated below 20 bytes: no gather, and its
// gradient is all-reduced.
// REPL-LABEL: func.func @linear
// REPL-SAME: %{{.*}}: tensor<3xf32> {dc.param = #dc.param<id = 1, name = "b">}
// REPL-NOT: dc.gather_start %arg1
// REPL: %[[A:.*]] = dc.all_reduce_start average %{{.*}} on @world[0] : tensor<3xf32>
// REPL: dc.end_backward
// REPL-NEXT: %[[GB:.*]] = dc.wait %[[A]] : !dc.future<tensor<3xf32>>
// REPL-NEXT: return %{{.*}}, %{{.*}}, %[[GB]],

// One rank: parameters and gradients stay in place, nothing to gather or
// reduce; `shard-one-rank` (for shards kept in host memory) shards anyway.
// ONE: shard.grid @world(shape = 1)
// ONE-LABEL: func.func @linear
// ONE-SAME: %{{.*}}: tensor<4x3xf32> {dc.param = #dc.param<id = 0, name = "w">}
// ONE-SAME: -> (tensor<f32> {dc.loss}, tensor<4x3xf32> {dc.grad = #dc.grad<param = 0>}, tensor<3xf32> {dc.grad = #dc.grad<param = 1>}, tensor<2x4xf32>)
// ONE-NOT: dc.
// ONE: return
// ONESHARD-LABEL: func.func @linear
// ONESHARD-SAME: !dc.shard<tensor<4x3xf32>, @world[0], local = 12>
// ONESHARD: dc.gather_start
// ONESHARD: dc.end_backward
#map_mean = affine_map<(i, j) -> (i, j)>
#map_scalar = affine_map<(i, j) -> ()>
func.func @linear(%w: tensor<4x3xf32> {dc.param = #dc.param<id = 0, name = "w">},
                  %b: tensor<3xf32> {dc.param = #dc.param<id = 1, name = "b">},
                  %x: tensor<2x4xf32>, %dy: tensor<2x3xf32>)
    -> (tensor<f32> {dc.loss}, tensor<4x3xf32> {dc.grad = #dc.grad<param = 0>},
        tensor<3xf32> {dc.grad = #dc.grad<param = 1>}, tensor<2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x3xf32>) outs(%y0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %bb = linalg.broadcast ins(%b : tensor<3xf32>) outs(%e0 : tensor<2x3xf32>) dimensions = [0]
  %yb = linalg.add ins(%y, %bb : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map_mean, #map_scalar], iterator_types = ["reduction", "reduction"]}
      ins(%yb : tensor<2x3xf32>) outs(%l1 : tensor<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // Backward, given dy.
  %ew = tensor.empty() : tensor<4x3xf32>
  %gw0 = linalg.fill ins(%zero : f32) outs(%ew : tensor<4x3xf32>) -> tensor<4x3xf32>
  %gw = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %dy : tensor<2x4xf32>, tensor<2x3xf32>) outs(%gw0 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %ex = tensor.empty() : tensor<2x4xf32>
  %gx0 = linalg.fill ins(%zero : f32) outs(%ex : tensor<2x4xf32>) -> tensor<2x4xf32>
  %gx = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%dy, %w : tensor<2x3xf32>, tensor<4x3xf32>) outs(%gx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %eb = tensor.empty() : tensor<3xf32>
  %gb0 = linalg.fill ins(%zero : f32) outs(%eb : tensor<3xf32>) -> tensor<3xf32>
  %gb = linalg.reduce ins(%dy : tensor<2x3xf32>) outs(%gb0 : tensor<3xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss, %gw, %gb, %gx : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x4xf32>
}

// -----

// A bf16 copy of an f32 master weight: gathered in bf16 (half the bytes),
// and the cast is gone.
// CHECK-LABEL: func.func @cast_gather
// CHECK: dc.gather_start %{{.*}} : !dc.shard<tensor<4x4xf32>, @world[0], local = 8> -> !dc.future<tensor<4x4xbf16>>
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @cast_gather(%w: tensor<4x4xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<4x4xbf16>) -> (tensor<4x4xbf16> {dc.loss}) {
  %wb = arith.truncf %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %e = tensor.empty() : tensor<4x4xbf16>
  %y = linalg.matmul ins(%x, %wb : tensor<4x4xbf16>, tensor<4x4xbf16>) outs(%e : tensor<4x4xbf16>) -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

// -----

// An empty parameter has nothing to shard: it stays replicated.
// CHECK-LABEL: func.func @empty_param
// CHECK-SAME: %{{.*}}: tensor<0x4xf32> {dc.param = #dc.param<id = 0>}
// CHECK-NOT: dc.gather_start
func.func @empty_param(%w: tensor<0x4xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<0x4xf32>) -> (tensor<0x4xf32> {dc.loss}) {
  %y = arith.addf %w, %x : tensor<0x4xf32>
  return %y : tensor<0x4xf32>
}

// -----

// A parameter used inside a loop body is gathered once before the loop and
// released after it: the whole loop is one use.
// CHECK-LABEL: func.func @loop_use
// CHECK: %[[F:.*]] = dc.gather_start %arg0
// CHECK-NEXT: %[[W:.*]] = dc.wait %[[F]]
// CHECK-NEXT: scf.for
// CHECK: arith.addf %{{.*}}, %[[W]]
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: dc.release %[[W]]
func.func @loop_use(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<4xf32>) -> (tensor<4xf32> {dc.loss}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %s = arith.addf %acc, %w : tensor<4xf32>
    scf.yield %s : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// A view of the gathered parameter (a reshape) read again later keeps the
// gathered buffer: the release follows the last use of the view, not the
// reshape itself (after it the arena may hand the memory out again).
// CHECK-LABEL: func.func @view_use
// CHECK: %[[F:.*]] = dc.gather_start %arg0
// CHECK-NEXT: %[[W:.*]] = dc.wait %[[F]]
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[W]]
// CHECK-NOT: dc.release
// CHECK: linalg.matvec ins(%{{.*}}, %[[FLAT]]
// CHECK-NEXT: dc.release %[[W]]
func.func @view_use(%w: tensor<4x8xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<2x32xf32>) -> (tensor<2xf32> {dc.loss}) {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
  %e = tensor.empty() : tensor<2xf32>
  %y = linalg.matvec ins(%x, %flat : tensor<2x32xf32>, tensor<32xf32>) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// A view of the parameter that the step returns is the caller's: the
// gathered buffer is not released.
// CHECK-LABEL: func.func @returned_view
// CHECK: dc.gather_start %arg0
// CHECK-NOT: dc.release
// CHECK: return
func.func @returned_view(%w: tensor<4x8xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<32xf32>) -> (tensor<32xf32> {dc.loss}, tensor<32xf32>) {
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
  %y = arith.addf %x, %flat : tensor<32xf32>
  return %y, %flat : tensor<32xf32>, tensor<32xf32>
}
