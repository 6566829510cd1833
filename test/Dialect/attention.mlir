// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s
// RUN: dc-opt %s --cse --canonicalize | FileCheck %s --check-prefix=PURE

// The fused attention ops: [B*H, S, Dh] as dc-gen-llama emits them, and
// [B, H, S, Dh] with a non-causal mask and as many keys as queries.

!qkv = tensor<8x16x4xbf16>
!lse = tensor<8x16xf32>

// CHECK-LABEL: func.func @causal_bf16
// CHECK: %[[O:.*]], %[[LSE:.*]] = dc.attention %[[Q:.*]], %[[K:.*]], %[[V:.*]] causal scale = 5.000000e-01 : tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16> -> tensor<8x16x4xbf16>, tensor<8x16xf32>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = dc.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %{{.*}} causal scale = 5.000000e-01 : tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16xf32>, tensor<8x16x4xbf16> -> tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16>
func.func @causal_bf16(%q: !qkv, %k: !qkv, %v: !qkv, %do: !qkv) -> (!qkv, !qkv, !qkv, !qkv) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.5 : !qkv, !qkv, !qkv -> !qkv, !lse
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal scale = 0.5 : !qkv, !qkv, !qkv, !qkv, !lse, !qkv -> !qkv, !qkv, !qkv
  return %o, %dq, %dk, %dv : !qkv, !qkv, !qkv, !qkv
}

// CHECK-LABEL: func.func @cross_4d
// CHECK: dc.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32> -> tensor<2x3x5x8xf32>, tensor<2x3x5xf32>
// CHECK: dc.attention_grad {{.*}} scale = 1.250000e-01 : {{.*}} -> tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>
func.func @cross_4d(%q: tensor<2x3x5x8xf32>, %kv: tensor<2x3x7x8xf32>)
    -> (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>) {
  %o, %lse = dc.attention %q, %kv, %kv scale = 0.125 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32> -> tensor<2x3x5x8xf32>, tensor<2x3x5xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %o, %lse, %o scale = 0.125 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5xf32>, tensor<2x3x5x8xf32> -> tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>
  return %dq, %dk : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>
}

// Grouped-query attention: 2 key/value heads for 6 query heads; dk and dv
// have k's and v's types.
// CHECK-LABEL: func.func @grouped_query
// CHECK: dc.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale = 2.500000e-01 : tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16> -> tensor<2x6x8x4xbf16>, tensor<2x6x8xf32>
// CHECK: dc.attention_grad {{.*}} -> tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>
func.func @grouped_query(%q: tensor<2x6x8x4xbf16>, %kv: tensor<2x2x8x4xbf16>)
    -> (tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>) {
  %o, %lse = dc.attention %q, %kv, %kv causal scale = 0.25 : tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16> -> tensor<2x6x8x4xbf16>, tensor<2x6x8xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %o, %lse, %o causal scale = 0.25 : tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x6x8x4xbf16>, tensor<2x6x8xf32>, tensor<2x6x8x4xbf16> -> tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>, tensor<2x2x8x4xbf16>
  return %dq, %dk : tensor<2x6x8x4xbf16>, tensor<2x2x8x4xbf16>
}

// Empty batch dims still verify (no heads to group).
// CHECK-LABEL: func.func @empty_heads
// CHECK: dc.attention {{.*}} : tensor<2x0x8x4xf32>, tensor<2x0x8x4xf32>, tensor<2x0x8x4xf32>
func.func @empty_heads(%q: tensor<2x0x8x4xf32>) -> tensor<2x0x8x4xf32> {
  %o, %lse = dc.attention %q, %q, %q scale = 0.25 : tensor<2x0x8x4xf32>, tensor<2x0x8x4xf32>, tensor<2x0x8x4xf32> -> tensor<2x0x8x4xf32>, tensor<2x0x8xf32>
  return %o : tensor<2x0x8x4xf32>
}

// Pure: an unused attention goes away, and two identical ones are one.
// PURE-LABEL: func.func @unused
// PURE-NEXT: return
func.func @unused(%q: !qkv) {
  %o, %lse = dc.attention %q, %q, %q causal scale = 0.5 : !qkv, !qkv, !qkv -> !qkv, !lse
  return
}

// PURE-LABEL: func.func @twice
// PURE-COUNT-1: dc.attention
// PURE-NOT: dc.attention
func.func @twice(%q: !qkv) -> (!qkv, !qkv) {
  %o1, %lse1 = dc.attention %q, %q, %q scale = 0.5 : !qkv, !qkv, !qkv -> !qkv, !lse
  %o2, %lse2 = dc.attention %q, %q, %q scale = 0.5 : !qkv, !qkv, !qkv -> !qkv, !lse
  return %o1, %o2 : !qkv, !qkv
}
