// RUN: dc-opt %s --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s
// RUN: dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda approximate-math=false" | FileCheck %s --check-prefix=PRECISE
// RUN: dc-opt %s --dc-map-to-gpu=cuda-toolkit=/cuda --gpu-kernel-outlining --convert-gpu-to-nvvm | FileCheck %s --check-prefix=NVVM

// Kernels take the hardware's approximate transcendental functions and f32
// division (fastmath afn), which the NVVM lowering turns into
// __nv_fast_expf and an afn fdiv (div.approx.f32); other arithmetic keeps
// its flags. With approximate-math=false, libdevice's accurate versions.
// The host's code (none here) is never marked.
// CHECK-LABEL: func.func @silu
// CHECK: gpu.launch
// CHECK: math.exp %{{.*}} fastmath<afn> : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<afn> : f32
// PRECISE-LABEL: func.func @silu
// PRECISE-NOT: fastmath
// PRECISE: return
// NVVM: llvm.call @__nv_fast_expf
// NVVM: llvm.fdiv {{.*}} {fastmathFlags = #llvm.fastmath<afn>} : f32
// NVVM-NOT: @__nv_expf
func.func @silu(%x: memref<3x301xf32>, %y: memref<3x301xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<3x301xf32>) outs(%y : memref<3x301xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.negf %a : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %s = arith.divf %a, %d : f32
    linalg.yield %s : f32
  }
  return
}

// A power keeps its accurate form (libdevice's __nv_powf): the fast one,
// exp2(y * log2(x)), is NaN for a negative base, where a power by an
// integer is defined. Its neighbours are still approximated.
// CHECK-LABEL: func.func @power
// CHECK: gpu.launch
// CHECK: math.powf %{{.*}}, %{{.*}} : f32
// CHECK: math.exp %{{.*}} fastmath<afn> : f32
// NVVM-LABEL: gpu.module @power_kernel
// NVVM: llvm.call @__nv_powf
// NVVM-NOT: @__nv_fast_powf
func.func @power(%x: memref<3x301xf32>, %p: memref<3x301xf32>, %y: memref<3x301xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %p : memref<3x301xf32>, memref<3x301xf32>) outs(%y : memref<3x301xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %w = math.powf %a, %b : f32
    %e = math.exp %w : f32
    linalg.yield %e : f32
  }
  return
}
