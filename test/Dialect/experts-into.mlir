// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s
// RUN: dc-opt %s --cse --canonicalize | FileCheck %s --check-prefix=EFFECTS

// The buffer forms of the mixture-of-experts ops: they read and write
// memory, so CSE and canonicalization keep every call even without uses.
// Float inputs may be row-strided views (a column slice, an expert slice of
// a stacked weight).

#cols = strided<[16, 1], offset: 8>
#expert = strided<[64, 8, 1], offset: ?>

// CHECK-LABEL: func.func @buffers
// CHECK: dc.topk_into %{{.*}} into %{{.*}}, %{{.*}} k = 2 : memref<6x4xf32, strided<[16, 1], offset: 8>> into memref<6x2xf32>, memref<6x2xi64>
// CHECK: dc.group_by_expert_into %{{.*}} into %{{.*}}, %{{.*}} experts = 4 : memref<6x2xi64> into memref<12xi32>, memref<4xi64>
// CHECK: dc.gather_rows_into %{{.*}}[%{{.*}}] into %{{.*}} : memref<6x8xbf16, strided<[16, 1], offset: 8>>, memref<12xi32> into memref<12x8xbf16>
// CHECK: dc.scatter_add_rows_into %{{.*}}[%{{.*}}] into %{{.*}} : memref<12x8xbf16>, memref<12xi32> into memref<6x8xbf16>
// CHECK: dc.grouped_matmul_into %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} transpose_rhs : memref<12x8xbf16>, memref<4x8x8xbf16, strided<[64, 8, 1], offset: ?>>, memref<4xi64> into memref<12x8xbf16>
// CHECK: dc.grouped_weight_grad_into %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} : memref<12x8xbf16>, memref<12x8xbf16>, memref<4xi64> into memref<4x8x8xbf16>
// EFFECTS-LABEL: func.func @buffers
// EFFECTS: dc.topk_into
// EFFECTS: dc.group_by_expert_into
// EFFECTS: dc.gather_rows_into
// EFFECTS: dc.scatter_add_rows_into
// EFFECTS: dc.grouped_matmul_into
// EFFECTS: dc.grouped_weight_grad_into
func.func @buffers(%scores: memref<6x4xf32, #cols>, %values: memref<6x2xf32>,
                   %choice: memref<6x2xi64>, %order: memref<12xi32>,
                   %ends: memref<4xi64>, %x: memref<6x8xbf16, #cols>,
                   %rows: memref<12x8xbf16>, %out: memref<6x8xbf16>,
                   %w: memref<4x8x8xbf16, #expert>, %h: memref<12x8xbf16>,
                   %dw: memref<4x8x8xbf16>) {
  dc.topk_into %scores into %values, %choice k = 2
      : memref<6x4xf32, #cols> into memref<6x2xf32>, memref<6x2xi64>
  dc.group_by_expert_into %choice into %order, %ends experts = 4
      : memref<6x2xi64> into memref<12xi32>, memref<4xi64>
  dc.gather_rows_into %x[%order] into %rows
      : memref<6x8xbf16, #cols>, memref<12xi32> into memref<12x8xbf16>
  dc.scatter_add_rows_into %rows[%order] into %out
      : memref<12x8xbf16>, memref<12xi32> into memref<6x8xbf16>
  dc.grouped_matmul_into %rows, %w, %ends into %h transpose_rhs
      : memref<12x8xbf16>, memref<4x8x8xbf16, #expert>, memref<4xi64>
        into memref<12x8xbf16>
  dc.grouped_weight_grad_into %h, %rows, %ends into %dw
      : memref<12x8xbf16>, memref<12x8xbf16>, memref<4xi64>
        into memref<4x8x8xbf16>
  return
}
