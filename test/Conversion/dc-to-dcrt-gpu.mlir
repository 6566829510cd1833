// RUN: dc-opt %s --split-input-file --dc-to-dcrt=matmul-calls | FileCheck %s
// RUN: dc-opt %s --split-input-file --dc-to-dcrt | FileCheck %s --check-prefix=NO-CALLS

// A matrix product with B transposed (x W^T) whose output needs no
// accumulation: dcrt_matmul with its sixteen-field descriptor.
// CHECK-LABEL: func.func @gemm
// CHECK: %[[DESC:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[M:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(4 : i64)
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[TA:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: %[[TB:.*]] = llvm.mlir.constant(1 : i64)
// CHECK-NEXT: %[[ACC:.*]] = llvm.mlir.constant(0 : i64)
// CHECK: llvm.getelementptr %[[DESC]][1]
// CHECK-NEXT: llvm.store %[[M]]
// CHECK: llvm.getelementptr %[[DESC]][2]
// CHECK-NEXT: llvm.store %[[N]]
// CHECK: llvm.getelementptr %[[DESC]][3]
// CHECK-NEXT: llvm.store %[[K]]
// CHECK: llvm.getelementptr %[[DESC]][10]
// CHECK-NEXT: llvm.store %[[TA]]
// CHECK: llvm.getelementptr %[[DESC]][11]
// CHECK-NEXT: llvm.store %[[TB]]
// CHECK: llvm.getelementptr %[[DESC]][15]
// CHECK-NEXT: llvm.store %[[ACC]]
// CHECK: llvm.call @dcrt_matmul(%[[DESC]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: linalg.matmul
// NO-CALLS-LABEL: func.func @gemm
// NO-CALLS: linalg.matmul
func.func @gemm(%x: memref<8x16xbf16>, %w: memref<4x16xbf16>, %y: memref<8x4xf32>) {
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                       affine_map<(m, n, k) -> (n, k)>,
                       affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xbf16>, memref<4x16xbf16>)
      outs(%y : memref<8x4xf32>) {dc.gemm_overwrite}
  return
}

// -----

// A batched product written as a linalg.generic (attention's q k^T: bf16
// widened to f32, k transposed by its map): dcrt_matmul with batch 4,
// m = n = 8, k = 16, B transposed, batch strides of the buffers, and
// accumulation into the output (no overwrite attribute).
// CHECK-LABEL: func.func @generic_batched
// CHECK: %[[DESC:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[B:.*]] = llvm.mlir.constant(4 : i64)
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[TA:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: %[[TB:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: %[[ACC:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: llvm.getelementptr %[[DESC]][0]
// CHECK-NEXT: llvm.store %[[B]]
// CHECK: llvm.getelementptr %[[DESC]][3]
// CHECK-NEXT: llvm.store %[[K]]
// CHECK: llvm.getelementptr %[[DESC]][11]
// CHECK-NEXT: llvm.store %[[TB]]
// CHECK: llvm.getelementptr %[[DESC]][15]
// CHECK-NEXT: llvm.store %[[ACC]]
// CHECK: llvm.call @dcrt_matmul(%[[DESC]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: linalg.generic
func.func @generic_batched(%q: memref<4x8x16xbf16>, %k: memref<4x8x16xbf16>, %s: memref<4x8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>,
                                   affine_map<(b, i, j, d) -> (b, j, d)>,
                                   affine_map<(b, i, j, d) -> (b, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<4x8x16xbf16>, memref<4x8x16xbf16>) outs(%s : memref<4x8x8xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %ea = arith.extf %a : bf16 to f32
    %eb = arith.extf %b : bf16 to f32
    %m = arith.mulf %ea, %eb : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A product in a form cuBLASLt does not take (an integer matmul) stays a
// linalg op, for loops or a kernel.
// CHECK-LABEL: func.func @not_a_library_gemm
// CHECK: linalg.matmul
func.func @not_a_library_gemm(%a: memref<2x3xi32>, %b: memref<3x2xi32>, %c: memref<2x2xi32>) {
  linalg.matmul ins(%a, %b : memref<2x3xi32>, memref<3x2xi32>) outs(%c : memref<2x2xi32>)
  return
}

// -----

// A kernel launch: the binary becomes a constant global, the launch
// dcrt_launch_kernel with the grid and block, and one slot per kernel
// parameter: a 1-D buffer passes its five descriptor fields, then the
// scalar.
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, "FATBIN-BYTES">]
  // CHECK-LABEL: func.func @launch
  // CHECK: %[[DIMS:.*]] = llvm.alloca %{{.*}} x i64
  // CHECK: %[[ARGS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
  // CHECK: %[[BIN:.*]] = llvm.mlir.addressof @dc_kernels_kernels
  // CHECK: %[[NAME:.*]] = llvm.mlir.addressof @dc_kernel_name_kernels_add
  // CHECK-COUNT-5: llvm.extractvalue
  // CHECK: llvm.store %arg1
  // CHECK-COUNT-6: llvm.getelementptr %[[ARGS]][
  // CHECK: %[[SIZE:.*]] = llvm.mlir.constant(12 : i64)
  // CHECK-COUNT-6: llvm.getelementptr %[[DIMS]][
  // CHECK: llvm.call @dcrt_launch_kernel(%[[BIN]], %[[SIZE]], %[[NAME]], %[[DIMS]], %{{.*}}, %[[ARGS]])
  // CHECK-NOT: gpu.
  // CHECK: llvm.mlir.global internal constant @dc_kernels_kernels("FATBIN-BYTES")
  // CHECK: llvm.mlir.global internal constant @dc_kernel_name_kernels_add("add\00")
  func.func @launch(%m: memref<4xf32>, %s: f32) {
    %c3 = arith.constant 3 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    gpu.launch_func @kernels::@add blocks in (%c3, %c1, %c1) threads in (%c128, %c1, %c1) args(%m : memref<4xf32>, %s : f32)
    return
  }
}

// -----

// A kernel whose last 2 blocks wait for the others (a finishing pass,
// marked by dc-mark-coresident-launches): dcrt_launch_kernel_coresident,
// the count last, for the runtime to check before it launches.
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, "FATBIN-BYTES">]
  // CHECK: llvm.func @dcrt_launch_kernel_coresident(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i64)
  // CHECK-LABEL: func.func @launch_coresident
  // CHECK: %[[DIMS:.*]] = llvm.alloca %{{.*}} x i64
  // CHECK: %[[ARGS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
  // CHECK: %[[BIN:.*]] = llvm.mlir.addressof @dc_kernels_kernels
  // CHECK: %[[NAME:.*]] = llvm.mlir.addressof @dc_kernel_name_kernels_finish
  // CHECK: %[[RESIDENT:.*]] = llvm.mlir.constant(2 : i64)
  // CHECK: llvm.call @dcrt_launch_kernel_coresident(%[[BIN]], %{{.*}}, %[[NAME]], %[[DIMS]], %{{.*}}, %[[ARGS]], %[[RESIDENT]])
  // CHECK-NOT: llvm.call @dcrt_launch_kernel(
  func.func @launch_coresident(%m: memref<4xf32>) {
    %c3 = arith.constant 3 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    gpu.launch_func @kernels::@finish blocks in (%c3, %c1, %c1) threads in (%c128, %c1, %c1) args(%m : memref<4xf32>) {dc.coresident_blocks = 2 : i64}
    return
  }
}
