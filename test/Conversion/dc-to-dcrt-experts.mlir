// RUN: dc-opt %s --split-input-file --dc-to-dcrt | FileCheck %s

// The mixture-of-experts buffer ops: one libdcrt call each, with its
// descriptor (all int64_t, struct_size first; dcrt.h's field order) built
// on the stack, then the operands' addresses in the op's order.

// top-k (dcrt_topk_desc, 72 bytes): dtype f32 = 0, index dtype i64 = 4,
// 2 x 6 = 12 rows of 4 experts, k = 2, the scores' row stride 16 (a view),
// values and indices dense (k).
// CHECK-LABEL: func.func @topk
// CHECK: %[[DESC:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: llvm.mlir.constant(72 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.getelementptr %[[DESC]][0]
// The view's offset (8 elements of 4 bytes) is in the scores' address.
// CHECK: %[[BASE:.*]] = llvm.extractvalue %{{.*}}[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK-NEXT: %[[OFFSET:.*]] = llvm.mlir.constant(8 : index) : i64
// CHECK-NEXT: %[[SCORES:.*]] = llvm.getelementptr %[[BASE]][%[[OFFSET]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: llvm.call @dcrt_topk(%[[DESC]], %[[SCORES]], %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT: dc.topk_into
func.func @topk(%scores: memref<12x4xf32, strided<[16, 1], offset: 8>>,
                %values: memref<12x2xf32>, %indices: memref<12x2xi64>) {
  dc.topk_into %scores into %values, %indices k = 2
      : memref<12x4xf32, strided<[16, 1], offset: 8>>
        into memref<12x2xf32>, memref<12x2xi64>
  return
}

// -----

// The grouping (dcrt_group_by_expert_desc, 48 bytes): ids i64 = 4, order
// i32 = 3, ends i64 = 4, 6 x 2 = 12 assignments, 4 experts.
// CHECK-LABEL: func.func @group
// CHECK: llvm.mlir.constant(48 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(3 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.getelementptr
// CHECK: llvm.call @dcrt_group_by_expert(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
func.func @group(%ids: memref<6x2xi64>, %order: memref<12xi32>,
                 %ends: memref<4xi64>) {
  dc.group_by_expert_into %ids into %order, %ends experts = 4
      : memref<6x2xi64> into memref<12xi32>, memref<4xi64>
  return
}

// -----

// Gather and scatter-add (dcrt_row_map_desc, 64 bytes): bf16 = 1, index
// i32 = 3; indexed rows (the index's) 12, table rows 6, rows of 2 x 8 = 16
// elements; the gather's source a column slice (row stride 32), its result
// dense (16); the scatter's source dense, its result dense.
// CHECK-LABEL: func.func @row_maps
// CHECK: llvm.mlir.constant(64 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(3 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(32 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK: llvm.call @dcrt_gather_rows(
// CHECK: llvm.mlir.constant(64 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(3 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK: llvm.call @dcrt_scatter_add_rows(
func.func @row_maps(%x: memref<6x2x8xbf16, strided<[32, 8, 1]>>,
                    %index: memref<12xi32>, %rows: memref<12x2x8xbf16>,
                    %out: memref<6x2x8xbf16>) {
  dc.gather_rows_into %x[%index] into %rows
      : memref<6x2x8xbf16, strided<[32, 8, 1]>>, memref<12xi32>
        into memref<12x2x8xbf16>
  dc.scatter_add_rows_into %rows[%index] into %out
      : memref<12x2x8xbf16>, memref<12xi32> into memref<6x2x8xbf16>
  return
}

// -----

// The grouped products (dcrt_grouped_matmul_desc, 112 bytes): bf16, ends
// i64; 12 rows, 4 experts. The forward with a transposed [E, P, K] = [4,
// 6, 8] weight, an expert slice of a stacked [8, 6, 8] one (expert stride
// 48): k 8, p 6, transpose 1, overwrite, lhs_ld 8, rhs_ld 8, out_ld 6,
// rhs_expert_stride 48, out_expert_stride unused. The weight gradient
// [4, 8, 6] of lhs [12, 8] (a column slice, ld 16) and rhs [12, 6]: k 8,
// p 6, lhs_ld 16, rhs_ld 6, out_ld 6, out_expert_stride 48.
// CHECK-LABEL: func.func @grouped
// CHECK: llvm.mlir.constant(112 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(48 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK: llvm.call @dcrt_grouped_matmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.mlir.constant(112 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(12 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(6 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(48 : i64)
// CHECK: llvm.call @dcrt_grouped_weight_grad(
// CHECK-NOT: dc.grouped
func.func @grouped(%lhs: memref<12x8xbf16>,
                   %w: memref<4x6x8xbf16, strided<[48, 8, 1], offset: 96>>,
                   %ends: memref<4xi64>, %out: memref<12x6xbf16>,
                   %x: memref<12x8xbf16, strided<[16, 1]>>,
                   %dw: memref<4x8x6xbf16>) {
  dc.grouped_matmul_into %lhs, %w, %ends into %out transpose_rhs
      : memref<12x8xbf16>, memref<4x6x8xbf16, strided<[48, 8, 1], offset: 96>>,
        memref<4xi64> into memref<12x6xbf16>
  dc.grouped_weight_grad_into %x, %out, %ends into %dw
      : memref<12x8xbf16, strided<[16, 1]>>, memref<12x6xbf16>,
        memref<4xi64> into memref<4x8x6xbf16>
  return
}
