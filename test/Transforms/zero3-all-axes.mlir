// RUN: dc-opt %s --dc-zero3="shard-all-axes=true replicate-below=20 bucket-bytes=1000" -split-input-file | FileCheck %s
// RUN: dc-opt %s --dc-zero3="shard-all-axes=true replicate-below=20 bucket-bytes=1000 reduce=sum" -split-input-file | FileCheck %s --check-prefix=SUM
// RUN: not dc-opt %s --dc-zero3="shard-all-axes=true world-size=8" -split-input-file 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not dc-opt %s --dc-zero3="shard-all-axes=true hierarchical=2" -split-input-file 2>&1 | FileCheck %s --check-prefix=HIER

// ZeRO over data x sequence: on a 2x2 grid whose axis 1 carries the
// sequence (the step's `dc.seq_axis` argument, as dc-ulysses leaves it),
// parameters are split over both axes (4 ranks: 12 elements -> 3 each).
// Gradients are partial sums over axis 1 and per-rank means over axis 0:
// each is scaled by 1/2 (the data-parallel ranks), then reduce-scattered
// with sum over the whole grid. The 12-byte bias stays replicated; its
// gradient is averaged over axis 0 and summed over axis 1.

// CHECK: shard.grid @world(shape = 2x2)
// CHECK-LABEL: func.func @linear
// CHECK-SAME: %[[W:.*]]: !dc.shard<tensor<4x3xf32>, @world[0, 1], local = 3> {dc.param = #dc.param<id = 0, name = "w">}
// CHECK-SAME: %{{.*}}: tensor<3xf32> {dc.param = #dc.param<id = 1, name = "b">}
// CHECK-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<4x3xf32>, @world[0, 1], local = 3> {dc.grad = #dc.grad<param = 0>}, tensor<3xf32> {dc.grad = #dc.grad<param = 1>}, tensor<2x4xf32>)
// CHECK: dc.gather_start %[[W]] : !dc.shard<tensor<4x3xf32>, @world[0, 1], local = 3> -> !dc.future<tensor<4x3xf32>>
// CHECK: %[[GW:.*]] = linalg.matmul indexing_maps
// CHECK-NEXT: %[[HALF:.*]] = linalg.generic {{.*}} outs(%[[GW]] : tensor<4x3xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32):
// CHECK-NEXT: %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[IN]], %[[C]] : f32
// CHECK-NEXT: linalg.yield %[[M]]
// CHECK: %[[RW:.*]] = dc.reduce_scatter_start sum %[[HALF]] : tensor<4x3xf32> -> !dc.future<!dc.shard<tensor<4x3xf32>, @world[0, 1], local = 3>>
// CHECK: %[[GB:.*]] = linalg.reduce
// CHECK: %[[A0:.*]] = dc.all_reduce_start average %[[GB]] on @world[0] : tensor<3xf32>
// CHECK-NEXT: %[[B0:.*]] = dc.wait %[[A0]] : !dc.future<tensor<3xf32>>
// CHECK-NEXT: %[[A1:.*]] = dc.all_reduce_start sum %[[B0]] on @world[1] : tensor<3xf32>
// CHECK-NEXT: dc.end_backward %[[RW]]
// CHECK-NEXT: %[[B1:.*]] = dc.wait %[[A1]] : !dc.future<tensor<3xf32>>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[B1]],

// reduce=sum: sums over every axis, no scale.
// SUM-LABEL: func.func @linear
// SUM-NOT: arith.mulf
// SUM: dc.reduce_scatter_start sum
// SUM: dc.all_reduce_start sum %{{.*}} on @world[0]
// SUM: dc.all_reduce_start sum %{{.*}} on @world[1]

// WORLD: error: dc-zero3: world-size=8 but this grid has 4 ranks
// HIER: error: dc-zero3: hierarchical and shard-all-axes are two layouts; choose one

shard.grid @world(shape = 2x2)
#map_mean = affine_map<(i, j) -> (i, j)>
#map_scalar = affine_map<(i, j) -> ()>
func.func @linear(%w: tensor<4x3xf32> {dc.param = #dc.param<id = 0, name = "w">},
                  %b: tensor<3xf32> {dc.param = #dc.param<id = 1, name = "b">},
                  %x: tensor<2x4xf32> {dc.seq_axis = 1 : i64, dc.seq_dim = 0 : i64},
                  %dy: tensor<2x3xf32>)
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

// No sequence axis: the gradients are per-rank means on every axis, so the
// one reduce-scatter over the grid averages (no scale).
// CHECK-LABEL: func.func @no_sequence
// CHECK-SAME: !dc.shard<tensor<8xf32>, @world[0, 1], local = 2>
// CHECK-NOT: arith.mulf
// CHECK: dc.reduce_scatter_start average %{{.*}} : tensor<8xf32> -> !dc.future<!dc.shard<tensor<8xf32>, @world[0, 1], local = 2>>
shard.grid @world(shape = 2x2)
func.func @no_sequence(%w: tensor<8xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}, tensor<8xf32> {dc.grad = #dc.grad<param = 0>}) {
  %zero = arith.constant 0.0 : f32
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%w : tensor<8xf32>) outs(%l1 : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %e = tensor.empty() : tensor<8xf32>
  %g = linalg.add ins(%w, %w : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %loss, %g : tensor<f32>, tensor<8xf32>
}
