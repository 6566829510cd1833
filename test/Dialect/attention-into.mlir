// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s
// RUN: dc-opt %s --cse --canonicalize | FileCheck %s --check-prefix=EFFECTS

// The buffer forms of the fused attention ops: they read and write memory,
// so CSE and canonicalization keep both calls even without uses.

!qkv = memref<8x16x4xbf16>
!lse = memref<8x16xf32>

// CHECK-LABEL: func.func @buffers
// CHECK: dc.attention_into %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} causal scale = 5.000000e-01 : memref<8x16x4xbf16>, memref<8x16x4xbf16>, memref<8x16x4xbf16> into memref<8x16x4xbf16>, memref<8x16xf32>
// CHECK: dc.attention_grad_into %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 : memref<8x16x4xbf16>, memref<8x16x4xbf16>, memref<8x16x4xbf16>, memref<8x16x4xbf16>, memref<8x16xf32>, memref<8x16x4xbf16> into memref<8x16x4xbf16>, memref<8x16x4xbf16>, memref<8x16x4xbf16>
// EFFECTS-LABEL: func.func @buffers
// EFFECTS: dc.attention_into
// EFFECTS: dc.attention_into
// EFFECTS: dc.attention_grad_into
func.func @buffers(%q: !qkv, %k: !qkv, %v: !qkv, %o: !qkv, %lse: !lse,
                   %do: !qkv, %dq: !qkv, %dk: !qkv, %dv: !qkv) {
  dc.attention_into %q, %k, %v into %o, %lse causal scale = 0.5
      : !qkv, !qkv, !qkv into !qkv, !lse
  dc.attention_into %q, %k, %v into %o, %lse causal scale = 0.5
      : !qkv, !qkv, !qkv into !qkv, !lse
  dc.attention_grad_into %q, %k, %v, %o, %lse, %do into %dq, %dk, %dv
      scale = 0.25 : !qkv, !qkv, !qkv, !qkv, !lse, !qkv into !qkv, !qkv, !qkv
  return
}

// The bshd form on strided views (column slices of a fused projection).
!view = memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>
!bshd = memref<2x8x2x8xbf16>
!lse3 = memref<2x2x8xf32>
// CHECK-LABEL: func.func @bshd_views
// CHECK: dc.attention_into %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} causal bshd scale = 5.000000e-01 : memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>, memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>, memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>> into memref<2x8x2x8xbf16>, memref<2x2x8xf32>
// CHECK: dc.attention_grad_into {{.*}} causal bshd scale = 5.000000e-01
func.func @bshd_views(%q: !view, %o: !bshd, %lse: !lse3, %dq: !view) {
  dc.attention_into %q, %q, %q into %o, %lse causal bshd scale = 0.5
      : !view, !view, !view into !bshd, !lse3
  dc.attention_grad_into %q, %q, %q, %o, %lse, %o into %dq, %dq, %dq
      causal bshd scale = 0.5 : !view, !view, !view, !bshd, !lse3, !bshd
        into !view, !view, !view
  return
}
