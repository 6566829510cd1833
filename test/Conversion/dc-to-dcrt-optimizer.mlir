// RUN: dc-opt %s --split-input-file --dc-to-dcrt | FileCheck %s

// The optimizer's buffer ops: one libdcrt call each, its descriptor
// (dcrt_adamw_desc, 120 bytes: struct_size, full_numel, local_numel,
// shard_axis, param, grad, master and moment dtypes, the five
// hyperparameters' doubles by their bits, distinct_axes, micro_batches) on
// the stack, then the buffers' addresses in the call's order, null for an
// absent master.

// A bf16 gradient shard of 256 elements of 512 over axis 0: the norm's
// call reads only the gradient (its dtype also as the parameter's, no
// master, f32 moments, no hyperparameters).
// CHECK-LABEL: func.func @update
// CHECK: llvm.mlir.constant(120 : i64)
// CHECK-NEXT: llvm.mlir.constant(512 : i64)
// CHECK-NEXT: llvm.mlir.constant(256 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(-1 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK: llvm.call @dcrt_grad_squares(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// The update of the bf16 parameter with an fp32 master and f32 moments:
// dtypes 1, 1, 0 (a master, f32), 0; beta1 0.9 is 0x3FECCCCCCCCCCCCD =
// 4606281698874543309, max_grad_norm 1.0 is 0x3FF0000000000000; no
// distinct axes, one micro-batch.
// CHECK: llvm.mlir.constant(120 : i64)
// CHECK-NEXT: llvm.mlir.constant(512 : i64)
// CHECK-NEXT: llvm.mlir.constant(256 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(4606281698874543309 : i64)
// CHECK-NEXT: llvm.mlir.constant(4607173411600762667 : i64)
// CHECK-NEXT: llvm.mlir.constant(4487126258331716666 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(4607182418800017408 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK: llvm.call @dcrt_adamw({{(%[^,]*, )+}}%{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT: dc.adamw
func.func @update(%p: memref<256xbf16>, %g: memref<256xbf16>,
                  %m: memref<256xf32>, %v: memref<256xf32>,
                  %w: memref<256xf32>, %s: memref<f64>, %lr: memref<f64>,
                  %step: memref<i64>) {
  dc.grad_squares_into %g, %s into %s full_numel = 512 shard_axis = 0
      : memref<256xbf16>, memref<f64> into memref<f64>
  dc.adamw_into %p, %g, %m, %v master %w, %lr, %step, %s
      into %p, %m, %v master %w full_numel = 512 shard_axis = 0
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64}
      : memref<256xbf16>, memref<256xbf16>, memref<256xf32>,
        memref<256xf32>, memref<f64>, memref<i64>, memref<f64>
        master memref<256xf32> into memref<256xbf16>, memref<256xf32>,
        memref<256xf32> master memref<256xf32>
  return
}

// -----

// No master (an f32 parameter, its own master), not sharded (-2): the
// master's dtype is -1 and its two addresses are null.
// CHECK-LABEL: func.func @whole
// CHECK: llvm.mlir.constant(120 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK-NEXT: llvm.mlir.constant(-2 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(-1 : i64)
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NULL2:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: llvm.call @dcrt_adamw(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL2]])
func.func @whole(%p: memref<4xf32>, %s: memref<f64>, %lr: memref<f64>,
                 %step: memref<i64>) {
  dc.adamw_into %p, %p, %p, %p, %lr, %step, %s into %p, %p, %p
      full_numel = 4 shard_axis = -2
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64}
      : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>,
        memref<f64>, memref<i64>, memref<f64> into memref<4xf32>,
        memref<4xf32>, memref<4xf32>
  return
}

// -----

// A block of experts' norm share (expert axis 1: distinct_axes 1 << 1) of
// a sum over 4 micro-batches, and that sum's accumulation: the gradient
// into its fp32 sum, in place.
// CHECK-LABEL: func.func @accumulated_experts
// CHECK: llvm.mlir.constant(120 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-COUNT-7: llvm.mlir.constant
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK: llvm.call @dcrt_grad_accumulate(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.mlir.constant(120 : i64)
// CHECK-NEXT: llvm.mlir.constant(16 : i64)
// CHECK-NEXT: llvm.mlir.constant(8 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i64)
// CHECK-COUNT-7: llvm.mlir.constant
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.mlir.constant(4 : i64)
// CHECK: llvm.call @dcrt_grad_squares(
func.func @accumulated_experts(%g: memref<8xbf16>, %sum: memref<8xf32>,
                               %s: memref<f64>) {
  dc.grad_accumulate_into %g, %sum into %sum full_numel = 16 shard_axis = 0
      : memref<8xbf16>, memref<8xf32> into memref<8xf32>
  dc.grad_squares_into %sum, %s into %s full_numel = 16 shard_axis = 0
      {expert_axis = 1 : i64, micro_batches = 4 : i64}
      : memref<8xf32>, memref<f64> into memref<f64>
  return
}
