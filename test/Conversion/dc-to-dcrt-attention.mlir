// RUN: dc-opt %s --split-input-file --dc-to-dcrt | FileCheck %s

// dc.attention_into: dcrt_attention_fwd with its descriptor
// (struct_size 272, dtype bf16 = 1, batch = 2 * 4 leading dims, seq_q,
// seq_k, head_dim, causal, the scale's f32 bits: 0.5 = 0x3F000000,
// batch_kv = batch: as many key/value heads as query heads, heads 0: the
// dense layout, whose stride fields are zero) and the five buffers.
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
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(0 : i64)
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
// CHECK-NEXT: llvm.store %[[HEADS]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][10]
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
// CHECK-NEXT: %[[HEADS:.*]] = llvm.mlir.constant(0 : i64)
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
// CHECK-NEXT: llvm.store %[[HEADS]]
// CHECK-NEXT: llvm.getelementptr %[[DESC]][10]
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

// -----

// The bshd form on column slices of a fused [B*S, 3*H*D] projection
// (B 2, S 16, H 4, D 8: q, k, v at columns 0, 32 and 64 of 96): batch is
// B*H, seq_q and seq_k dim 1, heads 4, then each view's {B, H, S} strides
// (memref dims 0, 2 and 1), read from its descriptor: q, k, v, o, and the
// backward's zeros.
// CHECK-LABEL: func.func @forward_bshd
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1]>>
// CHECK-DAG: %[[QD:.*]] = builtin.unrealized_conversion_cast %[[Q]]
// CHECK-DAG: %[[F2:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-DAG: %[[F3:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-DAG: %[[HEADS:.*]] = llvm.mlir.constant(4 : i64)
// CHECK: %[[QB:.*]] = llvm.extractvalue %[[QD]][4, 0]
// CHECK-NEXT: %[[QH:.*]] = llvm.extractvalue %[[QD]][4, 2]
// CHECK-NEXT: %[[QS:.*]] = llvm.extractvalue %[[QD]][4, 1]
// CHECK-COUNT-6: llvm.extractvalue %{{.*}}[4, {{[0-2]}}]
// CHECK-NEXT: %[[OB:.*]] = llvm.extractvalue %{{.*}}[4, 0]
// CHECK-NEXT: %[[OH:.*]] = llvm.extractvalue %{{.*}}[4, 2]
// CHECK-NEXT: %[[OS:.*]] = llvm.extractvalue %{{.*}}[4, 1]
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i64)
// CHECK: llvm.getelementptr %{{.*}}[2]
// CHECK-NEXT: llvm.store %[[F2]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[3]
// CHECK-NEXT: llvm.store %[[F3]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[4]
// CHECK-NEXT: llvm.store
// CHECK: llvm.getelementptr %{{.*}}[9]
// CHECK-NEXT: llvm.store %[[HEADS]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[10]
// CHECK-NEXT: llvm.store %[[QB]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[11]
// CHECK-NEXT: llvm.store %[[QH]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[12]
// CHECK-NEXT: llvm.store %[[QS]]
// CHECK: llvm.getelementptr %{{.*}}[19]
// CHECK-NEXT: llvm.store %[[OB]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[20]
// CHECK-NEXT: llvm.store %[[OH]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[21]
// CHECK-NEXT: llvm.store %[[OS]]
// CHECK-NEXT: llvm.getelementptr %{{.*}}[22]
// CHECK-NEXT: llvm.store %[[ZERO]]
// CHECK: llvm.getelementptr %{{.*}}[33]
// CHECK-NEXT: llvm.store %[[ZERO]]
// CHECK-NOT: llvm.getelementptr %{{.*}}[34]
// CHECK: llvm.call @dcrt_attention_fwd
func.func @forward_bshd(%q: memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1]>>,
                        %k: memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1], offset: 32>>,
                        %v: memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1], offset: 64>>,
                        %o: memref<2x16x4x8xbf16>, %lse: memref<2x4x16xf32>) {
  dc.attention_into %q, %k, %v into %o, %lse causal bshd scale = 0.5
      : memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1]>>,
        memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1], offset: 32>>,
        memref<2x16x4x8xbf16, strided<[1536, 96, 8, 1], offset: 64>>
        into memref<2x16x4x8xbf16>, memref<2x4x16xf32>
  return
}
