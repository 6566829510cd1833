// RUN: dc-opt %s --pass-pipeline='builtin.module(gpu.module(dc-align-workgroup-memory))' | FileCheck %s

// Shared-memory globals (address space 3) get an alignment of at least 16:
// an 8-byte ticket before four-byte partials no longer leaves them 8 bytes
// off. One already wider keeps its own; globals in other address spaces
// (a finishing pass's counter) keep theirs.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.mlir.global internal @ticket() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1 x i64>
// CHECK: llvm.mlir.global internal @partials() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<512 x f32>
// CHECK: llvm.mlir.global internal @wide() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<64 x f32>
// CHECK: llvm.mlir.global private @counter(dense<0> : tensor<1xi64>) {addr_space = 0 : i32} : !llvm.array<1 x i64>
gpu.module @kernels {
  llvm.mlir.global internal @ticket() {addr_space = 3 : i32} : !llvm.array<1 x i64>
  llvm.mlir.global internal @partials() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<512 x f32>
  llvm.mlir.global internal @wide() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<64 x f32>
  llvm.mlir.global private @counter(dense<0> : tensor<1xi64>) {addr_space = 0 : i32} : !llvm.array<1 x i64>
}
