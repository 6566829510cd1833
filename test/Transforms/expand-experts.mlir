// RUN: dc-opt %s --dc-expand-experts | FileCheck %s
// RUN: dc-opt %s --dc-expand-experts | FileCheck %s --check-prefix=NONE

// dc-expand-experts: each routing op becomes static linalg on tensors
// (what the values are is checked by expand-experts-run.test, which runs
// them).

// NONE-NOT: dc.

// top-k: each score's rank in its row (scores larger, or equal at a lower
// position, counted over the row), then the entry of each rank 0..k-1.
// CHECK-LABEL: func.func @route
// CHECK-SAME: (%[[P:.*]]: tensor<6x4xf32>)
// CHECK: %[[RANK:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[P]], %[[P]] : {{.*}}) outs({{.*}} : tensor<6x4xi64>)
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf oeq
// CHECK: arith.cmpi ult
// CHECK: %[[TOPK:.*]]:2 = linalg.generic {{.*}} ins(%[[RANK]], %[[P]] : {{.*}}) outs({{.*}} : tensor<6x2xf32>, tensor<6x2xi64>)
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK: arith.select
// The grouping: the ids flat, each expert's count, the ends (sums of the
// counts up to each expert), each assignment's start and position, and the
// order (the assignment at each position).
// CHECK: %[[IDS:.*]] = tensor.collapse_shape %[[TOPK]]#1 {{\[\[}}0, 1]] : tensor<6x2xi64> into tensor<12xi64>
// CHECK: %[[COUNTS:.*]] = linalg.generic {{.*}} ins(%[[IDS]] : tensor<12xi64>) outs({{.*}} : tensor<4xi64>)
// CHECK: %[[ENDS:.*]] = linalg.generic {{.*}} ins(%[[COUNTS]] : tensor<4xi64>) outs({{.*}} : tensor<4xi64>)
// CHECK: %[[START:.*]] = linalg.generic {{.*}} ins(%[[IDS]], %[[COUNTS]] : {{.*}}) outs({{.*}} : tensor<12xi64>)
// CHECK: %[[POS:.*]] = linalg.generic {{.*}} ins(%[[IDS]], %[[IDS]] : {{.*}}) outs(%[[START]] : tensor<12xi64>)
// CHECK: %[[ORDER:.*]] = linalg.generic {{.*}} ins(%[[POS]] : tensor<12xi64>) outs({{.*}} : tensor<12xi64>)
// CHECK: return %[[TOPK]]#0, %[[ORDER]], %[[ENDS]]
func.func @route(%probs: tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<12xi64>, tensor<4xi64>) {
  %v, %i = dc.topk %probs k = 2 : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi64>
  %order, %ends = dc.group_by_expert %i experts = 4 : tensor<6x2xi64> -> tensor<12xi64>, tensor<4xi64>
  return %v, %order, %ends : tensor<6x2xf32>, tensor<12xi64>, tensor<4xi64>
}

// The gather reads each row at a guarded index (zeros outside [0, 6)); the
// grouped products find each row's expert (how many ends are at or before
// it) and accumulate bf16 products in f32, rounded once; the weight
// gradient sums each expert's rows; the scatter-add sums the rows whose
// index names each result row.
// CHECK-LABEL: func.func @experts
// CHECK-SAME: (%[[X:.*]]: tensor<6x8xbf16>, %[[TOK:.*]]: tensor<12xi32>, %[[W:.*]]: tensor<4x16x8xbf16>, %[[E:.*]]: tensor<4xi32>)
// CHECK: %[[ROWS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%[[TOK]] : tensor<12xi32>)
// CHECK: %[[INSIDE:.*]] = arith.andi
// CHECK: %[[ROW:.*]] = arith.select %[[INSIDE]]
// CHECK: tensor.extract %[[X]][%[[ROW]], %{{.*}}] : tensor<6x8xbf16>
// CHECK: %[[GROUP:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<4xi32>) outs({{.*}} : tensor<12xi32>)
// CHECK: arith.cmpi sle
// CHECK: %[[ACC:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[ROWS]], %[[GROUP]] : {{.*}}) outs({{.*}} : tensor<12x16xf32>)
// CHECK: %[[EXPERT:.*]] = arith.select
// CHECK: %[[COLUMN:.*]] = linalg.index 1
// CHECK: %[[REDUCED:.*]] = linalg.index 2
// CHECK: tensor.extract %[[W]][%[[EXPERT]], %[[COLUMN]], %[[REDUCED]]] : tensor<4x16x8xbf16>
// CHECK: arith.mulf {{.*}} : f32
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%[[ACC]] : tensor<12x16xf32>) outs({{.*}} : tensor<12x16xbf16>)
// CHECK: arith.truncf
// CHECK: %[[GROUP2:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<4xi32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%[[GROUP2]], %[[H]], %[[ROWS]] : {{.*}}) outs({{.*}} : tensor<4x16x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[TOK]], %[[H]] : {{.*}}) outs({{.*}} : tensor<6x16xf32>)
// CHECK: arith.cmpi eq
// CHECK: arith.addf
func.func @experts(%x: tensor<6x8xbf16>, %tok: tensor<12xi32>, %w: tensor<4x16x8xbf16>, %ends: tensor<4xi32>) -> (tensor<6x16xbf16>, tensor<4x16x8xbf16>) {
  %rows = dc.gather_rows %x[%tok] : tensor<6x8xbf16>, tensor<12xi32> -> tensor<12x8xbf16>
  %h = dc.grouped_matmul %rows, %w, %ends transpose_rhs : tensor<12x8xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<12x16xbf16>
  %dw = dc.grouped_weight_grad %h, %rows, %ends : tensor<12x16xbf16>, tensor<12x8xbf16>, tensor<4xi32> -> tensor<4x16x8xbf16>
  %out = dc.scatter_add_rows %h[%tok] : tensor<12x16xbf16>, tensor<12xi32> -> tensor<6x16xbf16>
  return %out, %dw : tensor<6x16xbf16>, tensor<4x16x8xbf16>
}
