// RUN: dc-opt %s --dc-expert-parallel="expert-parallel=2" | FileCheck %s
// RUN: dc-opt %s --dc-expert-parallel="expert-parallel=2 world-size=4" | FileCheck %s --check-prefix=GRID

// Tokens grouped by their expert (4 experts, 2 per rank): the rows go to
// the experts' rank in a [2, 4, 8] slot tensor (the counts first), are
// regrouped by local expert, multiplied by the rank's block of the stacked
// weights, and come back before the reduction, which is not row-parallel.
// The SiLU between the two products reads only their rows: it runs on the
// experts' rank. The routing weights' scaling reads the product's rows and
// the weights in sorted order: the weights are dispatched too.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK: shard.grid @world(shape = 2)
// GRID: shard.grid @world(shape = 2x2)
// CHECK-LABEL: func.func @moe(
// CHECK-SAME: %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<4xi64>, %{{.*}}: tensor<4xf32>,
// CHECK-SAME: %[[W1:.*]]: tensor<2x8x6xf32> {dc.expert_axis = 0 : i64, dc.param = #dc.param<id = 0, name = "w1">},
// CHECK-SAME: %[[W2:.*]]: tensor<2x6x8xf32> {dc.expert_axis = 0 : i64, dc.param = #dc.param<id = 1, name = "w2">})
// GRID: tensor<2x8x6xf32> {dc.expert_axis = 1 : i64
// CHECK: %[[ORDER:.*]], %[[ENDS:.*]] = dc.group_by_expert %{{.*}} experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
// CHECK: %[[COUNTS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2xi64>)
// CHECK: %[[CF:.*]] = dc.all_to_all_start %[[COUNTS]] on @world[0] split 0 concat 0 : tensor<2x2xi64> -> !dc.future<tensor<2x2xi64>>
// GRID: dc.all_to_all_start %{{.*}} on @world[1] split 0 concat 0 : tensor<2x2xi64>
// CHECK: %[[PACK:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8xi64>)
// CHECK: %[[ROWS:.*]] = dc.gather_rows %{{.*}}[%[[ORDER]]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: %[[PACKED:.*]] = dc.gather_rows %[[ROWS]][%[[PACK]]] : tensor<4x8xf32>, tensor<8xi64> -> tensor<8x8xf32>
// CHECK: %[[SEND:.*]] = tensor.expand_shape %[[PACKED]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
// CHECK: %[[XF:.*]] = dc.all_to_all_start %[[SEND]] on @world[0] split 0 concat 0 : tensor<2x4x8xf32> -> !dc.future<tensor<2x4x8xf32>>
// CHECK: %[[WEIGHTS:.*]] = dc.gather_rows %{{.*}}[%[[ORDER]]] : tensor<4xf32>, tensor<4xi64> -> tensor<4xf32>
// CHECK: %[[PACKEDW:.*]] = dc.gather_rows %[[WEIGHTS]][%[[PACK]]] : tensor<4xf32>, tensor<8xi64> -> tensor<8xf32>
// CHECK: %[[WF:.*]] = dc.all_to_all_start %{{.*}} on @world[0] split 0 concat 0 : tensor<2x4xf32>
// CHECK: %[[RECEIVED:.*]] = dc.wait %[[CF]]
// CHECK: %[[IDS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8xi64>)
// CHECK: %[[ORDER2:.*]], %[[ENDS2:.*]] = dc.group_by_expert %[[IDS]] experts = 2 : tensor<8xi64> -> tensor<8xi64>, tensor<2xi64>
// CHECK: %[[X:.*]] = dc.wait %[[XF]]
// CHECK: %[[XFLAT:.*]] = tensor.collapse_shape %[[X]]
// CHECK: %[[XR:.*]] = dc.gather_rows %[[XFLAT]][%[[ORDER2]]] : tensor<8x8xf32>, tensor<8xi64> -> tensor<8x8xf32>
// CHECK: %[[H:.*]] = dc.grouped_matmul %[[XR]], %[[W1]], %[[ENDS2]] : tensor<8x8xf32>, tensor<2x8x6xf32>, tensor<2xi64> -> tensor<8x6xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[H]] : tensor<8x6xf32>) outs(%{{.*}} : tensor<8x6xf32>)
// CHECK: %[[Y:.*]] = dc.grouped_matmul %[[A]], %[[W2]], %[[ENDS2]] : tensor<8x6xf32>, tensor<2x6x8xf32>, tensor<2xi64> -> tensor<8x8xf32>
// CHECK: %[[WAITW:.*]] = dc.wait %[[WF]]
// CHECK: %[[WR:.*]] = dc.gather_rows %{{.*}}[%[[ORDER2]]] : tensor<8xf32>, tensor<8xi64> -> tensor<8xf32>
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[WR]] : tensor<8x8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<8x8xf32>)
// CHECK: %[[BACK:.*]] = dc.scatter_add_rows %[[SCALED]][%[[ORDER2]]] : tensor<8x8xf32>, tensor<8xi64> -> tensor<8x8xf32>
// CHECK: %[[BACKSLOTS:.*]] = tensor.expand_shape %[[BACK]]
// CHECK: %[[YF:.*]] = dc.all_to_all_start %[[BACKSLOTS]] on @world[0] split 0 concat 0 : tensor<2x4x8xf32>
// CHECK: %[[YW:.*]] = dc.wait %[[YF]]
// CHECK: %[[YFLAT:.*]] = tensor.collapse_shape %[[YW]]
// CHECK: %[[YL:.*]] = dc.scatter_add_rows %[[YFLAT]][%[[PACK]]] : tensor<8x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
// CHECK: %[[OUT:.*]] = dc.scatter_add_rows %[[YL]][%[[ORDER]]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: linalg.reduce ins(%[[OUT]]
func.func @moe(%x: tensor<4x8xf32>, %ids: tensor<4xi64>, %gate: tensor<4xf32>,
               %w1: tensor<4x8x6xf32> {dc.param = #dc.param<id = 0, name = "w1">},
               %w2: tensor<4x6x8xf32> {dc.param = #dc.param<id = 1, name = "w2">})
    -> (tensor<f32> {dc.loss}) {
  %order, %ends = dc.group_by_expert %ids experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %weights = dc.gather_rows %gate[%order] : tensor<4xf32>, tensor<4xi64> -> tensor<4xf32>
  %h = dc.grouped_matmul %rows, %w1, %ends : tensor<4x8xf32>, tensor<4x8x6xf32>, tensor<4xi64> -> tensor<4x6xf32>
  %e0 = tensor.empty() : tensor<4x6xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<4x6xf32>) outs(%e0 : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    %x1 = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %x1 : f32
    %s = arith.divf %v, %d : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %y = dc.grouped_matmul %a, %w2, %ends : tensor<4x6xf32>, tensor<4x6x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %weights : tensor<4x8xf32>, tensor<4xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%v: f32, %g: f32, %o: f32):
    %m = arith.mulf %v, %g : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %out = dc.scatter_add_rows %scaled[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
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
