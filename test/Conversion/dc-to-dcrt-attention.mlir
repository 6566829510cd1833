// RUN: dc-opt %s --split-input-file --dc-to-dcrt | FileCheck %s

// dc.attention_into: dcrt_attention_fwd with its descriptor
// (struct_size 272, dtype bf16 = 1, batch = 2 * 4 leading dims, seq_q,
// seq_k, head_dim, causal, the scale's f32 bits: 0.5 = 0x3F000000,
// batch_kv = batch: as many key/value heads as query heads) and the five
// buffers.
// CHECK-LABEL: func.func @forward
// CHECK: %[[DESC:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[F0:.*]] = llvm.mlir.constant(272 : i64)
// CHECK-NEXT: %[[F1:.*]] = llvm.mlir.constant(1 : i64)
// CHECK-NEXT: %[[F2:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[F3:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[F4:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[F5:.*]] = llvm.mlir.constant(4 : i64)
// CHECK-NEXT: %[[F6:.*]] = llvm.mlir.constant(1 : i64)
// CHECK-NEXT: %[[F7:.*]] = llvm.mlir.constant(1056964608 : i64)
// CHECK-NEXT: %[[F8:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[DENSE:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.getelementptr %[[DESC]][0]
// CHECK-NEXT: llvm.store %[[F0]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][1]
// CHECK-NEXT: llvm.store %[[F1]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][2]
// CHECK-NEXT: llvm.store %[[F2]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][3]
// CHECK-NEXT: llvm.store %[[F3]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][4]
// CHECK-NEXT: llvm.store %[[F4]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][5]
// CHECK-NEXT: llvm.store %[[F5]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][6]
// CHECK-NEXT: llvm.store %[[F6]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][7]
// CHECK-NEXT: llvm.store %[[F7]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][8]
// CHECK-NEXT: llvm.store %[[F8]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][9]
// CHECK-NEXT: llvm.store %[[DENSE]]
// CHECK: llvm.call @dcrt_attention_fwd(%[[DESC]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT: dc.attention_into
func.func @forward(%q: memref<2x4x16x4xbf16>, %k: memref<2x4x16x4xbf16>,
                   %v: memref<2x4x16x4xbf16>, %o: memref<2x4x16x4xbf16>,
                   %lse: memref<2x4x16xf32>) {
  dc.attention_into %q, %k, %v into %o, %lse causal scale = 0.5
      : memref<2x4x16x4xbf16>, memref<2x4x16x4xbf16>, memref<2x4x16x4xbf16>
        into memref<2x4x16x4xbf16>, memref<2x4x16xf32>
  return
}

// -----

// dc.attention_grad_into: dcrt_attention_bwd with f16 (dtype 2), batch 6
// query heads over batch_kv 2 key/value heads (grouped-query attention),
// 8 queries and 12 keys, head_dim 16, no mask, scale 0.25 (0x3E800000) and
// nine buffers.
// CHECK-LABEL: func.func @backward
// CHECK: %[[DESC:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[F0:.*]] = llvm.mlir.constant(272 : i64)
// CHECK-NEXT: %[[F1:.*]] = llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[F2:.*]] = llvm.mlir.constant(6 : i64)
// CHECK-NEXT: %[[F3:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[F4:.*]] = llvm.mlir.constant(12 : i64)
// CHECK-NEXT: %[[F5:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[F6:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: %[[F7:.*]] = llvm.mlir.constant(1048576000 : i64)
// CHECK-NEXT: %[[F8:.*]] = llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[DENSE:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.getelementptr %[[DESC]][0]
// CHECK-NEXT: llvm.store %[[F0]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][1]
// CHECK-NEXT: llvm.store %[[F1]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][2]
// CHECK-NEXT: llvm.store %[[F2]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][3]
// CHECK-NEXT: llvm.store %[[F3]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][4]
// CHECK-NEXT: llvm.store %[[F4]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][5]
// CHECK-NEXT: llvm.store %[[F5]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][6]
// CHECK-NEXT: llvm.store %[[F6]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][7]
// CHECK-NEXT: llvm.store %[[F7]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][8]
// CHECK-NEXT: llvm.store %[[F8]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][9]
// CHECK-NEXT: llvm.store %[[DENSE]]
// CHECK: llvm.call @dcrt_attention_bwd(%[[DESC]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT: dc.attention_grad_into
func.func @backward(%q: memref<6x8x16xf16>, %k: memref<2x12x16xf16>,
                    %o: memref<6x8x16xf16>, %lse: memref<6x8xf32>,
                    %dq: memref<6x8x16xf16>, %dk: memref<2x12x16xf16>,
                    %dv: memref<2x12x16xf16>) {
  dc.attention_grad_into %q, %k, %k, %o, %lse, %o into %dq, %dk, %dv
      scale = 0.25 : memref<6x8x16xf16>, memref<2x12x16xf16>,
        memref<2x12x16xf16>, memref<6x8x16xf16>, memref<6x8xf32>,
        memref<6x8x16xf16> into memref<6x8x16xf16>, memref<2x12x16xf16>,
        memref<2x12x16xf16>
  return
}
