// RUN: dc-opt %s --dc-compute-constants --split-input-file --verify-diagnostics | FileCheck %s

// The GPU target cannot read the artifact's globals: a splat constant is a
// fill, a small one a pick by its row-major index; scalar constants stay.
// CHECK-LABEL: func.func @mask_value
// CHECK-NOT: dense<
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK: linalg.generic
// CHECK: linalg.index 0 : index
// CHECK: linalg.index 1 : index
// CHECK: arith.constant 4.000000e+00 : f32
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK: arith.select
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: arith.select
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: arith.select
// CHECK-NOT: arith.select
// CHECK: linalg.yield
// CHECK: } -> tensor<2x2xf32>
func.func @mask_value() -> (tensor<f32>, tensor<2x2xf32>) {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %table = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  return %zero, %table : tensor<f32>, tensor<2x2xf32>
}

// -----

func.func @too_large() -> tensor<17xi32> {
  // expected-error @+1 {{a constant tensor of 17 elements in the step ('tensor<17xi32>'): the GPU target makes constants of up to 16 elements in the step; pass larger ones as a parameter or compute them from indices}}
  %t = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]> : tensor<17xi32>
  return %t : tensor<17xi32>
}
