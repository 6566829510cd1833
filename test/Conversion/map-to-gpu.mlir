// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s
// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda --gpu-launch-sink-index-computations --gpu-kernel-outlining --dc-merge-kernel-modules | FileCheck %s --check-prefix=OUTLINED
// RUN: not dc-opt %s --split-input-file --dc-map-to-gpu 2>&1 | FileCheck %s --check-prefix=NO-TOOLKIT

// NO-TOOLKIT: error: the GPU target (h200) compiles kernels with the CUDA toolkit's ptxas, and this dc was configured without a CUDA toolkit

// One step, each kind of dispatch:
// - the zero fill of a matrix product's output folds into it (overwrite);
// - a column reduction (reduction dim first) becomes a kernel parallel over
//   its 16 columns, the 8 rows summed in each thread;
// - a 0-d fill runs in one thread;
// - a scatter loop with loads and stores runs in one thread.
// CHECK-LABEL: func.func @step
// CHECK-NOT: linalg.fill
// CHECK: linalg.matmul {dc.gemm_overwrite}
// CHECK: %[[C16:c16_[0-9]+]] = arith.constant 16 : index
// CHECK-NEXT: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %[[C16]],
// CHECK: scf.if
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK: memref.store {{.*}}, %arg3
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %arg4[] : memref<f32>
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %arg6
// CHECK-NOT: gpu.launch
// CHECK: return
// Outlined: every kernel in one module (one ptxas run), launched from it.
// OUTLINED-COUNT-3: gpu.launch_func @step_kernel::@
// OUTLINED: gpu.module @step_kernel
// OUTLINED-COUNT-3: gpu.func @step_kernel
// OUTLINED-NOT: gpu.module @step_kernel_
func.func @step(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>,
                %colsum: memref<16xf32>, %loss: memref<f32>, %idx: memref<3xi32>, %emb: memref<10x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x4xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%colsum : memref<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%loss : memref<f32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %t = memref.load %idx[%i] : memref<3xi32>
    %row = arith.index_cast %t : i32 to index
    %v = memref.load %c[%i, %c0] : memref<8x4xf32>
    memref.store %v, %emb[%row, %c0] : memref<10x4xf32>
  }
  return
}

// -----

// An elementwise op over 3 x 300 points: 900 threads in 4 blocks of 256,
// the thread id split innermost-first into (row, column).
// CHECK-LABEL: func.func @elementwise
// CHECK-DAG: %[[GRID:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[BLOCK:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[GRID]], {{.*}}) threads({{.*}}) in ({{.*}} = %[[BLOCK]],
// CHECK: arith.cmpi ult, %{{.*}}, %c900
// CHECK: arith.remui %{{.*}}, %c300
// CHECK: arith.divui %{{.*}}, %c300
// CHECK: arith.remui %{{.*}}, %c3
// CHECK: math.exp
func.func @elementwise(%x: memref<3x300xf32>, %y: memref<3x300xf32>) {
  linalg.exp ins(%x : memref<3x300xf32>) outs(%y : memref<3x300xf32>)
  return
}

