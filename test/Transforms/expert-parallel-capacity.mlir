// RUN: dc-opt %s --dc-expert-parallel="expert-parallel=2" | FileCheck %s

// A grouping with a capacity bounds the exchanges: 4 tokens with 2 choices
// each make N = 8 sorted rows, and with capacity 1 each of a peer's 2
// experts holds at most 1 of them, so a slot has S = min(8, 1 x 2) = 2 rows
// instead of 8: the dispatch sends [2, 2, 8] (not [2, 8, 8]), the receiver
// regroups 4 rows (not 16), and the products and the combine work on
// them. The sender's own grouping keeps its capacity; the receiver's
// regrouping needs none (what arrives is within it already).

// CHECK-LABEL: func.func @moe(
// CHECK: %[[ORDER:.*]], %[[ENDS:.*]] = dc.group_by_expert %{{.*}} experts = 4 capacity = 1 : tensor<4x2xi64> -> tensor<8xi64>, tensor<4xi64>
// CHECK: %[[COUNTS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2xi64>)
// CHECK: dc.all_to_all_start %[[COUNTS]] on @world[0] split 0 concat 0 : tensor<2x2xi64>
// CHECK: %[[PACK:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi64>)
// CHECK: %[[PACKED:.*]] = dc.gather_rows %{{.*}}[%[[PACK]]] : tensor<8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: %[[SEND:.*]] = tensor.expand_shape %[[PACKED]] {{\[\[}}0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
// CHECK: %[[XF:.*]] = dc.all_to_all_start %[[SEND]] on @world[0] split 0 concat 0 : tensor<2x2x8xf32> -> !dc.future<tensor<2x2x8xf32>>
// CHECK: %[[IDS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi64>)
// CHECK: %[[ORDER2:.*]], %[[ENDS2:.*]] = dc.group_by_expert %[[IDS]] experts = 2 : tensor<4xi64> -> tensor<4xi64>, tensor<2xi64>
// CHECK: %[[X:.*]] = dc.wait %[[XF]]
// CHECK: %[[XFLAT:.*]] = tensor.collapse_shape %[[X]]
// CHECK: %[[XR:.*]] = dc.gather_rows %[[XFLAT]][%[[ORDER2]]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: %[[Y:.*]] = dc.grouped_matmul %[[XR]], %{{.*}}, %[[ENDS2]] : tensor<4x8xf32>, tensor<2x8x8xf32>, tensor<2xi64> -> tensor<4x8xf32>
// CHECK: %[[BACK:.*]] = dc.scatter_add_rows %[[Y]][%[[ORDER2]]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: %[[BACKSLOTS:.*]] = tensor.expand_shape %[[BACK]] {{\[\[}}0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
// CHECK: %[[YF:.*]] = dc.all_to_all_start %[[BACKSLOTS]] on @world[0] split 0 concat 0 : tensor<2x2x8xf32>
// CHECK: %[[YW:.*]] = dc.wait %[[YF]]
// CHECK: %[[YFLAT:.*]] = tensor.collapse_shape %[[YW]]
// CHECK: %[[YL:.*]] = dc.scatter_add_rows %[[YFLAT]][%[[PACK]]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<8x8xf32>
// CHECK: dc.scatter_add_rows %[[YL]][%{{.*}}] : tensor<8x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
func.func @moe(%x: tensor<4x8xf32>, %ids: tensor<4x2xi64>,
               %w: tensor<4x8x8xf32> {dc.param = #dc.param<id = 0, name = "w">})
    -> (tensor<f32> {dc.loss}) {
  %order, %ends = dc.group_by_expert %ids experts = 4 capacity = 1 : tensor<4x2xi64> -> tensor<8xi64>, tensor<4xi64>
  %k = arith.constant 2 : i64
  %e = tensor.empty() : tensor<8xi64>
  %token = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%order : tensor<8xi64>) outs(%e : tensor<8xi64>) {
  ^bb0(%o: i64, %out: i64):
    %t = arith.divsi %o, %k : i64
    linalg.yield %t : i64
  } -> tensor<8xi64>
  %rows = dc.gather_rows %x[%token] : tensor<4x8xf32>, tensor<8xi64> -> tensor<8x8xf32>
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<8x8xf32>, tensor<4x8x8xf32>, tensor<4xi64> -> tensor<8x8xf32>
  %out = dc.scatter_add_rows %y[%token] : tensor<8x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%out : tensor<4x8xf32>) outs(%init : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss : tensor<f32>
}
