// RUN: dc-opt %s --dc-expand-strided-copies | FileCheck %s
// RUN: dc-opt %s --dc-expand-strided-copies=all | FileCheck %s --check-prefix=ALL

// With `all` (the GPU target: no host memcpy on device memory) every copy
// becomes linalg.copy, contiguous ones too.
// ALL-NOT: memref.copy
// ALL-COUNT-3: linalg.copy
// ALL-NOT: memref.copy

// A copy into a column slice is strided: it becomes linalg.copy, which
// lowers to loops (finalize-memref-to-llvm would call memrefCopy).
// CHECK-LABEL: func.func @into_slice
// CHECK: %[[VIEW:.*]] = memref.subview
// CHECK-NEXT: linalg.copy ins(%{{.*}} : memref<4x2xf32>) outs(%[[VIEW]] : memref<4x2xf32, strided<[6, 1], offset: 2>>)
// CHECK-NOT: memref.copy
func.func @into_slice(%src: memref<4x2xf32>, %dst: memref<4x6xf32>) {
  %view = memref.subview %dst[0, 2] [4, 2] [1, 1] : memref<4x6xf32> to memref<4x2xf32, strided<[6, 1], offset: 2>>
  memref.copy %src, %view : memref<4x2xf32> to memref<4x2xf32, strided<[6, 1], offset: 2>>
  return
}

// Contiguous copies stay: they lower to llvm.memcpy. A row slice is
// contiguous although its type has a strided layout.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4x6xf32> to memref<4x6xf32>
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<2x6xf32> to memref<2x6xf32, strided<[6, 1], offset: 12>>
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<4x6xf32>, %b: memref<4x6xf32>, %rows: memref<2x6xf32>) {
  memref.copy %a, %b : memref<4x6xf32> to memref<4x6xf32>
  %view = memref.subview %b[2, 0] [2, 6] [1, 1] : memref<4x6xf32> to memref<2x6xf32, strided<[6, 1], offset: 12>>
  memref.copy %rows, %view : memref<2x6xf32> to memref<2x6xf32, strided<[6, 1], offset: 12>>
  return
}
