// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s
// RUN: dc-opt %s --cse --canonicalize | FileCheck %s --check-prefix=PURE

// The mixture-of-experts routing ops of one layer's forward and backward:
// 16 tokens, 4 experts, top-2 (32 assignments), d 8, expert width 12.

// CHECK-LABEL: func.func @moe_layer
// CHECK: %[[V:.*]], %[[I:.*]] = dc.topk %{{.*}} k = 2 : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi64>
// CHECK: %[[ORDER:.*]], %[[ENDS:.*]] = dc.group_by_expert %[[I]] experts = 4 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
// CHECK: %[[ROWS:.*]] = dc.gather_rows %{{.*}}[%{{.*}}] : tensor<16x8xbf16>, tensor<32xi64> -> tensor<32x8xbf16>
// CHECK: %[[H:.*]] = dc.grouped_matmul %[[ROWS]], %{{.*}}, %[[ENDS]] transpose_rhs : tensor<32x8xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x12xbf16>
// CHECK: dc.grouped_matmul %[[H]], %{{.*}}, %[[ENDS]] : tensor<32x12xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x8xbf16>
// CHECK: dc.scatter_add_rows %{{.*}}[%{{.*}}] : tensor<32x8xbf16>, tensor<32xi64> -> tensor<16x8xbf16>
// CHECK: dc.grouped_weight_grad %{{.*}}, %[[ROWS]], %[[ENDS]] : tensor<32x12xbf16>, tensor<32x8xbf16>, tensor<4xi64> -> tensor<4x12x8xbf16>
// The ops are pure: results nobody reads go away.
// PURE-LABEL: func.func @moe_layer
// PURE-NOT: dc.topk
// PURE-NOT: dc.group_by_expert
// PURE-NOT: dc.grouped_weight_grad
// PURE: return
func.func @moe_layer(%x: tensor<16x8xbf16>, %probs: tensor<16x4xf32>,
                     %w1: tensor<4x12x8xbf16>, %w2: tensor<4x12x8xbf16>,
                     %token: tensor<32xi64>, %dh: tensor<32x12xbf16>) {
  %v, %i = dc.topk %probs k = 2 : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi64>
  %order, %ends = dc.group_by_expert %i experts = 4 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%token] : tensor<16x8xbf16>, tensor<32xi64> -> tensor<32x8xbf16>
  %h = dc.grouped_matmul %rows, %w1, %ends transpose_rhs : tensor<32x8xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x12xbf16>
  %y = dc.grouped_matmul %h, %w2, %ends : tensor<32x12xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x8xbf16>
  %out = dc.scatter_add_rows %y[%token] : tensor<32x8xbf16>, tensor<32xi64> -> tensor<16x8xbf16>
  %dw1 = dc.grouped_weight_grad %dh, %rows, %ends : tensor<32x12xbf16>, tensor<32x8xbf16>, tensor<4xi64> -> tensor<4x12x8xbf16>
  return
}

// A grouping with a capacity (each expert keeps at most 10 of the 32).
// CHECK-LABEL: func.func @capacity
// CHECK: dc.group_by_expert %{{.*}} experts = 4 capacity = 10 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
func.func @capacity(%i: tensor<16x2xi64>) -> (tensor<32xi64>, tensor<4xi64>) {
  %order, %ends = dc.group_by_expert %i experts = 4 capacity = 10 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
  return %order, %ends : tensor<32xi64>, tensor<4xi64>
}

// i32 indices, a rank-1 top-k, rows of rank 3.
// CHECK-LABEL: func.func @i32_indices
// CHECK: dc.topk %{{.*}} k = 1 : tensor<8xf16> -> tensor<1xf16>, tensor<1xi32>
// CHECK: dc.group_by_expert %{{.*}} experts = 8 : tensor<1xi32> -> tensor<1xi32>, tensor<8xi32>
// CHECK: dc.gather_rows %{{.*}}[%{{.*}}] : tensor<6x2x3xf32>, tensor<5xi32> -> tensor<5x2x3xf32>
func.func @i32_indices(%s: tensor<8xf16>, %x: tensor<6x2x3xf32>, %idx: tensor<5xi32>)
    -> (tensor<1xf16>, tensor<1xi32>, tensor<8xi32>, tensor<5x2x3xf32>) {
  %v, %i = dc.topk %s k = 1 : tensor<8xf16> -> tensor<1xf16>, tensor<1xi32>
  %order, %ends = dc.group_by_expert %i experts = 8 : tensor<1xi32> -> tensor<1xi32>, tensor<8xi32>
  %rows = dc.gather_rows %x[%idx] : tensor<6x2x3xf32>, tensor<5xi32> -> tensor<5x2x3xf32>
  return %v, %order, %ends, %rows : tensor<1xf16>, tensor<1xi32>, tensor<8xi32>, tensor<5x2x3xf32>
}
