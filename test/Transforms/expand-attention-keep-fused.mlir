// RUN: dc-opt %s --pass-pipeline="builtin.module(func.func(dc-expand-attention{keep-fused}))" | FileCheck %s
// RUN: dc-opt %s --dc-expand-attention | FileCheck %s --check-prefix=ALL

// keep-fused (what dc-lower-to-llvm sets for target=h200): bf16 and f16
// ops stay fused for the runtime's flash attention; f32 ones, which it has
// no kernel for, are expanded. Without the option everything is expanded.

// CHECK-LABEL: func.func @mixed
// CHECK: dc.attention %{{.*}} : tensor<2x4x8xbf16>
// CHECK: dc.attention_grad %{{.*}} : tensor<2x4x8xf16>
// CHECK-NOT: dc.attention
// CHECK: linalg.generic
// CHECK-NOT: dc.attention
// CHECK: return
// ALL-LABEL: func.func @mixed
// ALL-NOT: dc.attention
// ALL: return
func.func @mixed(%b: tensor<2x4x8xbf16>, %h: tensor<2x4x8xf16>, %hl: tensor<2x4xf32>,
                 %f: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xbf16>, tensor<2x4x8xf16>, tensor<2x4x8xf32>) {
  %o, %lse = dc.attention %b, %b, %b causal scale = 0.5
      : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4xf32>
  %dq, %dk, %dv = dc.attention_grad %h, %h, %h, %h, %hl, %h scale = 0.5
      : tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x4xf32>, tensor<2x4x8xf16> -> tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x4x8xf16>
  %fo, %flse = dc.attention %f, %f, %f scale = 0.5
      : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>, tensor<2x4xf32>
  return %o, %dq, %fo : tensor<2x4x8xbf16>, tensor<2x4x8xf16>, tensor<2x4x8xf32>
}
