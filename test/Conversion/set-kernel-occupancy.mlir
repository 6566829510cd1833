// RUN: dc-opt %s --split-input-file --dc-set-kernel-occupancy --verify-diagnostics | FileCheck %s

// After outlining: @folded holds two loops that ask for 4 and 2 blocks an
// SM (the largest wins), @plain none. @folded gets nvvm.minctasm = 4 and
// its loops lose the markers; @plain gets nothing.
// CHECK-LABEL: gpu.module @kernels
// CHECK: gpu.func @folded(%{{.*}}: memref<4xf32>) kernel attributes {nvvm.minctasm = 4 : i32}
// CHECK-NOT: dc.min_blocks_per_sm
// CHECK: gpu.func @plain(%{{.*}}: memref<4xf32>) kernel {
// CHECK-NOT: nvvm.minctasm
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @folded(%m: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        scf.yield
      } {dc.min_blocks_per_sm = 2 : i64}
      scf.for %i = %c0 to %c4 step %c1 {
        scf.yield
      } {dc.min_blocks_per_sm = 4 : i64}
      gpu.return
    }
    gpu.func @plain(%m: memref<4xf32>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @bad(%m: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      // expected-error @+1 {{dc-set-kernel-occupancy: dc.min_blocks_per_sm must be a positive 32-bit integer, got 0 : i64}}
      scf.for %i = %c0 to %c1 step %c1 {
        scf.yield
      } {dc.min_blocks_per_sm = 0 : i64}
      gpu.return
    }
  }
}
