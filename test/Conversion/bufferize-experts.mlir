// RUN: dc-opt %s --split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map unknown-type-conversion=identity-layout-map" | FileCheck %s

// The mixture-of-experts ops bufferize to their buffer forms, which call
// libdcrt's routing kernels: operands read in place, outputs freshly
// allocated (memref.alloc, for dc-assign-step-arena).

// CHECK-LABEL: func.func @routing
// CHECK-SAME: (%[[S:.*]]: memref<6x4xf32>, %[[X:.*]]: memref<6x8xbf16>, %[[W:.*]]: memref<4x8x8xbf16>)
// CHECK: %[[V:.*]] = memref.alloc() {{.*}}: memref<6x2xf32>
// CHECK: %[[I:.*]] = memref.alloc() {{.*}}: memref<6x2xi64>
// CHECK: dc.topk_into %[[S]] into %[[V]], %[[I]] k = 2
// CHECK: %[[ORDER:.*]] = memref.alloc() {{.*}}: memref<12xi64>
// CHECK: %[[ENDS:.*]] = memref.alloc() {{.*}}: memref<4xi64>
// CHECK: dc.group_by_expert_into %[[I]] into %[[ORDER]], %[[ENDS]] experts = 4
// CHECK: %[[ROWS:.*]] = memref.alloc() {{.*}}: memref<12x8xbf16>
// CHECK: dc.gather_rows_into %[[X]][%[[ORDER]]] into %[[ROWS]]
// CHECK: %[[H:.*]] = memref.alloc() {{.*}}: memref<12x8xbf16>
// CHECK: dc.grouped_matmul_into %[[ROWS]], %[[W]], %[[ENDS]] into %[[H]] transpose_rhs
// CHECK: %[[DW:.*]] = memref.alloc() {{.*}}: memref<4x8x8xbf16>
// CHECK: dc.grouped_weight_grad_into %[[H]], %[[ROWS]], %[[ENDS]] into %[[DW]]
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}}: memref<6x8xbf16>
// CHECK: dc.scatter_add_rows_into %[[H]][%[[ORDER]]] into %[[OUT]]
// CHECK-NOT: memref.copy
// CHECK: return %[[V]], %[[OUT]], %[[DW]]
func.func @routing(%scores: tensor<6x4xf32>, %x: tensor<6x8xbf16>,
                   %w: tensor<4x8x8xbf16>)
    -> (tensor<6x2xf32>, tensor<6x8xbf16>, tensor<4x8x8xbf16>) {
  %values, %choice = dc.topk %scores k = 2
      : tensor<6x4xf32> -> tensor<6x2xf32>, tensor<6x2xi64>
  %order, %ends = dc.group_by_expert %choice experts = 4
      : tensor<6x2xi64> -> tensor<12xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order]
      : tensor<6x8xbf16>, tensor<12xi64> -> tensor<12x8xbf16>
  %h = dc.grouped_matmul %rows, %w, %ends transpose_rhs
      : tensor<12x8xbf16>, tensor<4x8x8xbf16>, tensor<4xi64>
        -> tensor<12x8xbf16>
  %dw = dc.grouped_weight_grad %h, %rows, %ends
      : tensor<12x8xbf16>, tensor<12x8xbf16>, tensor<4xi64>
        -> tensor<4x8x8xbf16>
  %out = dc.scatter_add_rows %h[%order]
      : tensor<12x8xbf16>, tensor<12xi64> -> tensor<6x8xbf16>
  return %values, %out, %dw
      : tensor<6x2xf32>, tensor<6x8xbf16>, tensor<4x8x8xbf16>
}

// -----

// A column slice (the gate half of a fused gate/up product) is read in
// place with its row stride; the second half of an index is copied dense
// (index buffers are dense, at offset 0), and so is a view whose rows are
// not dense.

// CHECK-LABEL: func.func @views
// CHECK-DAG: %[[GATE:.*]] = memref.subview %{{.*}}[0, 0] [6, 8] [1, 1] : memref<12x16xbf16> to memref<6x8xbf16, strided<[16, 1]>>
// CHECK-DAG: %[[IDX:.*]] = memref.subview %{{.*}}[6] [6] [1] : memref<12xi64> to memref<6xi64, strided<[1], offset: 6>>
// CHECK: %[[DENSE:.*]] = memref.alloc() {{.*}}: memref<6xi64>
// CHECK: memref.copy %[[IDX]], %[[DENSE]]
// CHECK: dc.scatter_add_rows_into %[[GATE]][%[[DENSE]]] into %{{.*}} : memref<6x8xbf16, strided<[16, 1]>>, memref<6xi64> into memref<6x8xbf16>
// CHECK: %[[ODD:.*]] = memref.subview %{{.*}}[0, 0] [6, 4] [1, 2] : memref<6x8xf32> to memref<6x4xf32, strided<[8, 2]>>
// CHECK: %[[ODDD:.*]] = memref.alloc() {{.*}}: memref<6x4xf32>
// CHECK: memref.copy %[[ODD]], %[[ODDD]]
// CHECK: dc.gather_rows_into %[[ODDD]][%{{.*}}] into %{{.*}} : memref<6x4xf32>, memref<4xi64> into memref<4x4xf32>
func.func @views(%h: tensor<12x16xbf16>, %order: tensor<12xi64>,
                 %m: tensor<6x8xf32>, %index: tensor<4xi64>)
    -> (tensor<6x8xbf16>, tensor<4x4xf32>) {
  %gate = tensor.extract_slice %h[0, 0] [6, 8] [1, 1]
      : tensor<12x16xbf16> to tensor<6x8xbf16>
  %half = tensor.extract_slice %order[6] [6] [1]
      : tensor<12xi64> to tensor<6xi64>
  %out = dc.scatter_add_rows %gate[%half]
      : tensor<6x8xbf16>, tensor<6xi64> -> tensor<6x8xbf16>
  %odd = tensor.extract_slice %m[0, 0] [6, 4] [1, 2]
      : tensor<6x8xf32> to tensor<6x4xf32>
  %rows = dc.gather_rows %odd[%index]
      : tensor<6x4xf32>, tensor<4xi64> -> tensor<4x4xf32>
  return %out, %rows : tensor<6x8xbf16>, tensor<4x4xf32>
}
