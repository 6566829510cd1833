// RUN: not dc-opt %s --dc-optimizer-in-step="master-dtype=bf16" 2>&1 | FileCheck %s

// master-dtype=bf16 makes each parameter its own master: an f32 one is
// refused, at the parameter.
// CHECK: optimizer-in-step-bf16-master.mlir:[[@LINE+2]]:5: error: dc-optimizer-in-step: parameter 'w' is not bf16: master-dtype=bf16 makes each parameter its own master, which needs bf16 parameters
func.func @f32_param(
    %w: tensor<8xf32> {dc.param = #dc.param<id = 0, name = "w">},
    %g: tensor<8xf32>)
    -> (tensor<f32> {dc.loss}, tensor<8xf32> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, tensor<8xf32>
}
