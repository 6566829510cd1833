// RUN: dc-opt %s --split-input-file --verify-diagnostics --dc-merge-kernel-modules | FileCheck %s

// Two kernel modules, each with a kernel @k and its own device global
// @tickets (outlining gives every module its own copy of a global its
// kernel reads): one module; the second's clashing names are renamed, the
// global together with the kernel's use of it, the kernel together with
// its launch.
// CHECK-LABEL: func.func @step
// CHECK: gpu.launch_func @a::@k blocks
// CHECK: gpu.launch_func @a::@[[K2:k_[0-9]+]] blocks
// CHECK: gpu.module @a
// CHECK: memref.global "private" @tickets : memref<1xi64> = dense<0>
// CHECK: gpu.func @k(
// CHECK: memref.get_global @tickets :
// CHECK: memref.global "private" @[[T2:tickets_[0-9]+]] : memref<1xi64> = dense<7>
// CHECK: gpu.func @[[K2]](
// CHECK: memref.get_global @[[T2]] :
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @step(%out: memref<1xi64>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<1xi64>)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<1xi64>)
    return
  }
  gpu.module @a {
    memref.global "private" @tickets : memref<1xi64> = dense<0>
    gpu.func @k(%out: memref<1xi64>) kernel {
      %c0 = arith.constant 0 : index
      %g = memref.get_global @tickets : memref<1xi64>
      %v = memref.load %g[%c0] : memref<1xi64>
      memref.store %v, %out[%c0] : memref<1xi64>
      gpu.return
    }
  }
  gpu.module @b {
    memref.global "private" @tickets : memref<1xi64> = dense<7>
    gpu.func @k(%out: memref<1xi64>) kernel {
      %c0 = arith.constant 0 : index
      %g = memref.get_global @tickets : memref<1xi64>
      %v = memref.load %g[%c0] : memref<1xi64>
      memref.store %v, %out[%c0] : memref<1xi64>
      gpu.return
    }
  }
}

// -----

// Kernel modules for different targets stay apart: an error.
module attributes {gpu.container_module} {
  gpu.module @a [#nvvm.target<chip = "sm_90">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  // expected-error @below {{dc-merge-kernel-modules: kernel modules for different targets}}
  gpu.module @b [#nvvm.target<chip = "sm_80">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}
