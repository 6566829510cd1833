// RUN: dc-opt %s --dc-expand-experts="keep-library-types" | FileCheck %s

// With keep-library-types (what dc-lower-to-llvm runs unless
// reference-experts), the ops whose element types libdcrt's routing calls
// take (f32, bf16, f16 floats; i32, i64 indices) stay for the calls, and
// the others (here f64) become their linalg reference: a model in f64
// still compiles.

// CHECK-LABEL: func.func @mixed
// CHECK: dc.topk %{{.*}} k = 2 : tensor<6x4xf32>
// CHECK: dc.group_by_expert
// CHECK: dc.gather_rows %{{.*}} : tensor<6x8xbf16>
// CHECK-NOT: dc.gather_rows
// CHECK: linalg.generic
// CHECK-NOT: dc.grouped_matmul
// CHECK: return
func.func @mixed(%scores: tensor<6x4xf32>, %x: tensor<6x8xbf16>,
                 %y: tensor<6x8xf64>, %w: tensor<4x8x8xf64>)
    -> (tensor<12x8xbf16>, tensor<12x8xf64>) {
  %values, %choice = dc.topk %scores k = 2
      : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi64>
  %order, %ends = dc.group_by_expert %choice experts = 4
      : tensor<6x2xi64> -> tensor<12xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order]
      : tensor<6x8xbf16>, tensor<12xi64> -> tensor<12x8xbf16>
  %rows64 = dc.gather_rows %y[%order]
      : tensor<6x8xf64>, tensor<12xi64> -> tensor<12x8xf64>
  %h = dc.grouped_matmul %rows64, %w, %ends
      : tensor<12x8xf64>, tensor<4x8x8xf64>, tensor<4xi64> -> tensor<12x8xf64>
  return %rows, %h : tensor<12x8xbf16>, tensor<12x8xf64>
}

// A grouping with a capacity becomes two plain groupings (the second over
// the sorted rows' ids, drops -1) and the order composed, on every target.
// CHECK-LABEL: func.func @capacity
// CHECK: %[[O1:.*]], %[[E1:.*]] = dc.group_by_expert %{{.*}} experts = 4 : tensor<6x2xi64> -> tensor<12xi64>, tensor<4xi64>
// CHECK: %[[GROUP:.*]] = linalg.generic {{.*}} ins(%[[E1]] : tensor<4xi64>) outs(%{{.*}} : tensor<12xi64>)
// CHECK: %[[KEPT:.*]] = linalg.generic {{.*}} ins(%[[GROUP]] : tensor<12xi64>) outs(%{{.*}} : tensor<12xi64>)
// CHECK: tensor.extract %[[E1]]
// CHECK: arith.constant 3 : i64
// CHECK: arith.constant -1 : i64
// CHECK: %[[O2:.*]], %[[E2:.*]] = dc.group_by_expert %[[KEPT]] experts = 4 : tensor<12xi64> -> tensor<12xi64>, tensor<4xi64>
// CHECK: %[[ORDER:.*]] = linalg.generic {{.*}} ins(%[[O2]] : tensor<12xi64>) outs(%{{.*}} : tensor<12xi64>)
// CHECK: tensor.extract %[[O1]]
// CHECK: return %[[ORDER]], %[[E2]]
// CHECK-NOT: capacity
func.func @capacity(%choice: tensor<6x2xi64>) -> (tensor<12xi64>, tensor<4xi64>) {
  %order, %ends = dc.group_by_expert %choice experts = 4 capacity = 3
      : tensor<6x2xi64> -> tensor<12xi64>, tensor<4xi64>
  return %order, %ends : tensor<12xi64>, tensor<4xi64>
}
