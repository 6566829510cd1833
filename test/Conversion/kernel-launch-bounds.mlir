// RUN: dc-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(dc-kernel-launch-bounds))' | FileCheck %s
// RUN: dc-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(dc-kernel-launch-bounds{multiprocessors=64}))' | FileCheck %s --check-prefix=SMALL
// RUN: not dc-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(dc-kernel-launch-bounds{multiprocessors=0}))' 2>&1 | FileCheck %s --check-prefix=INVALID

// INVALID: error: dc-kernel-launch-bounds: every option must be positive

// A's folded norm backward: 512 blocks of 128 threads over 132 SMs want 4
// blocks per SM, 128 registers each; one wave. On 64 SMs they would want
// 8 (64 registers): left alone.
// CHECK-LABEL: gpu.module @folded
// CHECK: gpu.func @norm_backward
// CHECK-SAME: nvvm.minctasm = 4 : i32
// SMALL-LABEL: gpu.module @folded
// SMALL-NOT: nvvm.minctasm
gpu.module @folded {
  gpu.func @norm_backward() kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_grid_size = array<i32: 512, 1, 1>} {
    gpu.return
  }
}

// -----

// One block per SM or fewer (a grid that is one wave at any registers),
// many waves whatever the registers, blocks too large for 128 registers at
// the blocks per SM the grid wants, a grid of unknown size, and a function
// that is not a kernel: none is bounded.
// CHECK-LABEL: gpu.module @unbounded
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @one_per_sm
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @many_waves
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @wide_blocks
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @unknown_grid
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @not_a_kernel
// CHECK-NOT: nvvm.minctasm
gpu.module @unbounded {
  gpu.func @one_per_sm() kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 132, 1, 1>} {
    gpu.return
  }
  gpu.func @many_waves() kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_grid_size = array<i32: 8192, 1, 1>} {
    gpu.return
  }
  gpu.func @wide_blocks() kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 32, 16, 1>} {
    gpu.return
  }
  gpu.func @unknown_grid() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    gpu.return
  }
  gpu.func @not_a_kernel() {
    gpu.return
  }
}
