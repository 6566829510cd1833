// RUN: dc-opt %s --dc-simplify-math | FileCheck %s

// PyTorch's backward of an RMSNorm's `x.pow(2)` raises the activations,
// of either sign, to 1.0, and its backward of `rsqrt` cubes the result:
// powers by constants become what they equal, so no target evaluates
// them as exp(y log x) (NaN for a negative base).
// CHECK-LABEL: func.func @rms_norm_backward_powers
// CHECK-NOT: math.powf
// CHECK: ^bb0(%[[X:.*]]: f32, %[[R:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[R2:.*]] = arith.mulf %[[R]], %[[R]] : f32
// CHECK: %[[R3:.*]] = arith.mulf %[[R]], %[[R2]] : f32
// CHECK: %[[S:.*]] = arith.mulf %[[X]], %[[R3]] : f32
// CHECK: linalg.yield %[[S]] : f32
func.func @rms_norm_backward_powers(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %r : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %three = arith.constant 3.0 : f32
    %p1 = math.powf %a, %one : f32
    %p3 = math.powf %b, %three : f32
    %s = arith.mulf %p1, %p3 : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Square roots and reciprocals; a power by a tensor's value and one by a
// constant with no simpler form stay powers.
// CHECK-LABEL: func.func @other_exponents
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-DAG: math.sqrt %[[X]] : f32
// CHECK-DAG: math.rsqrt %[[X]] : f32
// CHECK-DAG: arith.divf %[[ONE]], %[[X]] : f32
// CHECK-DAG: math.powf %[[X]], %[[Y]] : f32
// CHECK-DAG: math.powf %[[X]], %{{.*}} : f32
func.func @other_exponents(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32, f32) {
  %c2 = arith.constant 2.0 : f32
  %half = arith.constant 0.5 : f32
  %mhalf = arith.constant -0.5 : f32
  %m1 = arith.constant -1.0 : f32
  %c17 = arith.constant 1.7 : f32
  %a = math.powf %x, %c2 : f32
  %b = math.powf %x, %half : f32
  %c = math.powf %x, %mhalf : f32
  %d = math.powf %x, %m1 : f32
  %e = math.powf %x, %y : f32
  %f = math.powf %x, %c17 : f32
  return %a, %b, %c, %d, %e, %f : f32, f32, f32, f32, f32, f32
}
