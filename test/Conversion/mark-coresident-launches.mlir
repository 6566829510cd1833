// RUN: dc-opt %s --split-input-file --dc-mark-coresident-launches --verify-diagnostics | FileCheck %s

// After outlining: @finish reads a ticket counter whose 64 blocks wait
// (and another global with a smaller count: the largest wins), @plain
// reads a global without a count. Every launch of @finish gets the count;
// @plain's launch and the host's copy of a counter get nothing.
// CHECK-LABEL: func.func @step
// CHECK: gpu.launch_func @kernels::@finish {{.*}} {dc.coresident_blocks = 64 : i64}
// CHECK: gpu.launch_func @kernels::@plain
// CHECK-NOT: dc.coresident_blocks
// CHECK: gpu.launch_func @kernels::@finish {{.*}} {dc.coresident_blocks = 64 : i64}
// CHECK: return
module attributes {gpu.container_module} {
  memref.global "private" @host_copy : memref<1xi64> = dense<0> {dc.coresident_blocks = 8 : i64}
  func.func @step(%m: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kernels::@finish blocks in (%c256, %c1, %c1) threads in (%c256, %c1, %c1) args(%m : memref<4xf32>)
    gpu.launch_func @kernels::@plain blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%m : memref<4xf32>)
    gpu.launch_func @kernels::@finish blocks in (%c256, %c1, %c1) threads in (%c256, %c1, %c1) args(%m : memref<4xf32>)
    return
  }
  gpu.module @kernels {
    memref.global "private" @tickets : memref<1xi64> = dense<0> {dc.coresident_blocks = 64 : i64}
    memref.global "private" @other : memref<1xi64> = dense<0> {dc.coresident_blocks = 16 : i64}
    memref.global "private" @table : memref<4xf32> = dense<1.0>
    gpu.func @finish(%m: memref<4xf32>) kernel {
      %t = memref.get_global @tickets : memref<1xi64>
      %o = memref.get_global @other : memref<1xi64>
      gpu.return
    }
    gpu.func @plain(%m: memref<4xf32>) kernel {
      %t = memref.get_global @table : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// A count that is not a positive integer is an error at the global.
module attributes {gpu.container_module} {
  func.func @step() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@finish blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @kernels {
    // expected-error @below {{dc-mark-coresident-launches: dc.coresident_blocks must be a positive integer, got 0 : i64}}
    memref.global "private" @tickets : memref<1xi64> = dense<0> {dc.coresident_blocks = 0 : i64}
    gpu.func @finish() kernel {
      %t = memref.get_global @tickets : memref<1xi64>
      gpu.return
    }
  }
}

// -----

// The waiting blocks are the launch's last ones: a launch of fewer blocks
// than wait is an error at the launch.
module attributes {gpu.container_module} {
  func.func @step() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    // expected-error @below {{dc-mark-coresident-launches: kernel finish has 64 blocks that wait for the others, but this launch has 8 blocks}}
    gpu.launch_func @kernels::@finish blocks in (%c8, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @kernels {
    memref.global "private" @tickets : memref<1xi64> = dense<0> {dc.coresident_blocks = 64 : i64}
    gpu.func @finish() kernel {
      %t = memref.get_global @tickets : memref<1xi64>
      gpu.return
    }
  }
}
