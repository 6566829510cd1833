// RUN: dc-opt %s -split-input-file -verify-diagnostics

// Verifiers of dc.attention and dc.attention_grad, one rejected op per case.

func.func @no_batch_dim(%q: tensor<16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op q must be [batch..., seq, head_dim] with at least one batch dim, got 'tensor<16x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32> -> tensor<16x4xf32>, tensor<16xf32>
  return
}

// -----

func.func @rank_mismatch(%q: tensor<8x16x4xf32>, %k: tensor<2x4x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op k has rank 4 but q has rank 3}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<8x16x4xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @v_not_k(%q: tensor<8x16x4xf32>, %v: tensor<8x16x2xf32>) {
  // expected-error @+1 {{'dc.attention' op v must have the type of k ('tensor<8x16x4xf32>'), got 'tensor<8x16x2xf32>'}}
  %o, %lse = dc.attention %q, %q, %v scale = 0.5 : tensor<8x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x2xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @mixed_element_types(%q: tensor<8x16x4xf32>, %k: tensor<8x16x4xbf16>) {
  // expected-error @+1 {{'dc.attention' op q, k and v must have one element type, got 'f32' and 'bf16'}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<8x16x4xf32>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @batch_mismatch(%q: tensor<2x8x16x4xf32>, %k: tensor<4x4x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op q 'tensor<2x8x16x4xf32>' and k 'tensor<4x4x16x4xf32>' must have the same batch dims but the innermost}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<2x8x16x4xf32>, tensor<4x4x16x4xf32>, tensor<4x4x16x4xf32> -> tensor<2x8x16x4xf32>, tensor<2x8x16xf32>
  return
}

// -----

// Grouped-query attention: k and v may have fewer heads than q, a divisor.
func.func @heads_not_a_multiple(%q: tensor<2x8x16x4xf32>, %k: tensor<2x3x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op the innermost batch dim of q (8, query heads) must be a multiple of k's (3, key/value heads), got q 'tensor<2x8x16x4xf32>' and k 'tensor<2x3x16x4xf32>'}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<2x8x16x4xf32>, tensor<2x3x16x4xf32>, tensor<2x3x16x4xf32> -> tensor<2x8x16x4xf32>, tensor<2x8x16xf32>
  return
}

// -----

// More key/value heads than query heads is not grouping either.
func.func @more_kv_heads(%q: tensor<4x16x4xf32>, %k: tensor<8x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op the innermost batch dim of q (4, query heads) must be a multiple of k's (8, key/value heads)}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<4x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x4xf32> -> tensor<4x16x4xf32>, tensor<4x16xf32>
  return
}

// -----

// With grouping, dk and dv still have the types of k and v, not q's.
func.func @gqa_dk_like_q(%q: tensor<2x4x8x4xf32>, %k: tensor<2x2x8x4xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'dc.attention_grad' op dk (the type of k) must be 'tensor<2x2x8x4xf32>', got 'tensor<2x4x8x4xf32>'}}
  %dq, %dk, %dv = "dc.attention_grad"(%q, %k, %k, %q, %lse, %q) {scale = 0.5 : f32} : (tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8x4xf32>) -> (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>)
  return
}

// -----

// The buffer forms share the rule.
func.func @gqa_into_not_a_multiple(%q: memref<6x8x4xbf16>, %k: memref<4x8x4xbf16>, %lse: memref<6x8xf32>) {
  // expected-error @+1 {{'dc.attention_into' op the innermost batch dim of q (6, query heads) must be a multiple of k's (4, key/value heads)}}
  dc.attention_into %q, %k, %k into %q, %lse scale = 0.5 : memref<6x8x4xbf16>, memref<4x8x4xbf16>, memref<4x8x4xbf16> into memref<6x8x4xbf16>, memref<6x8xf32>
  return
}

// -----

func.func @head_dim_mismatch(%q: tensor<8x16x4xf32>, %k: tensor<8x16x8xf32>) {
  // expected-error @+1 {{'dc.attention' op q head dim 4 differs from k head dim 8}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<8x16x4xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @causal_not_square(%q: tensor<8x16x4xf32>, %k: tensor<8x12x4xf32>) {
  // expected-error @+1 {{'dc.attention' op causal attention needs as many queries as keys, got 16 and 12}}
  %o, %lse = dc.attention %q, %k, %k causal scale = 0.5 : tensor<8x16x4xf32>, tensor<8x12x4xf32>, tensor<8x12x4xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @scale_not_finite(%q: tensor<8x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op scale must be finite}}
  %o, %lse = dc.attention %q, %q, %q scale = 0x7F800000 : tensor<8x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x4xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @o_type(%q: tensor<8x16x4xbf16>) {
  // expected-error @+1 {{'dc.attention' op o (the type of q) must be 'tensor<8x16x4xbf16>', got 'tensor<8x16x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @lse_shape(%q: tensor<8x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op lse ([batch..., seq] of q, f32) must be 'tensor<8x16xf32>', got 'tensor<8x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<8x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x4xf32> -> tensor<8x16x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @lse_not_f32(%q: tensor<8x16x4xbf16>) {
  // expected-error @+1 {{'dc.attention' op result #1 must be statically shaped tensor of 32-bit float values, but got 'tensor<8x16xbf16>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<8x16x4xbf16>, tensor<8x16x4xbf16>, tensor<8x16x4xbf16> -> tensor<8x16x4xbf16>, tensor<8x16xbf16>
  return
}

// -----

func.func @dynamic_shape(%q: tensor<8x?x4xf32>) {
  // expected-error @+1 {{'dc.attention' op operand #0 must be statically shaped tensor of floating-point values, but got 'tensor<8x?x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<8x?x4xf32>, tensor<8x?x4xf32>, tensor<8x?x4xf32> -> tensor<8x?x4xf32>, tensor<8x?xf32>
  return
}

// -----

func.func @integer_operands(%q: tensor<8x16x4xi32>) {
  // expected-error @+1 {{'dc.attention' op operand #0 must be statically shaped tensor of floating-point values, but got 'tensor<8x16x4xi32>'}}
  %o, %lse = dc.attention %q, %q, %q scale = 0.5 : tensor<8x16x4xi32>, tensor<8x16x4xi32>, tensor<8x16x4xi32> -> tensor<8x16x4xi32>, tensor<8x16xf32>
  return
}

// -----

func.func @missing_scale(%q: tensor<8x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op requires attribute 'scale'}}
  %o, %lse = "dc.attention"(%q, %q, %q) : (tensor<8x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x4xf32>) -> (tensor<8x16x4xf32>, tensor<8x16xf32>)
  return
}

//===----------------------------------------------------------------------===//
// dc.attention_grad: the operand checks are shared; the types of o, lse,
// do and the gradients are its own.
//===----------------------------------------------------------------------===//

// -----

!t = tensor<8x16x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_causal_not_square(%q: !t, %k: tensor<8x12x4xf32>, %lse: !lse) {
  // expected-error @+1 {{'dc.attention_grad' op causal attention needs as many queries as keys, got 16 and 12}}
  %dq, %dk, %dv = dc.attention_grad %q, %k, %k, %q, %lse, %q causal scale = 0.5 : !t, tensor<8x12x4xf32>, tensor<8x12x4xf32>, !t, !lse, !t -> !t, tensor<8x12x4xf32>, tensor<8x12x4xf32>
  return
}

// -----

!t = tensor<8x16x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_o_type(%q: !t, %o: tensor<8x16x4xbf16>, %lse: !lse) {
  // expected-error @+1 {{'dc.attention_grad' op o (the type of q) must be 'tensor<8x16x4xf32>', got 'tensor<8x16x4xbf16>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %o, %lse, %q scale = 0.5 : !t, !t, !t, tensor<8x16x4xbf16>, !lse, !t -> !t, !t, !t
  return
}

// -----

!t = tensor<8x16x4xf32>

func.func @grad_lse_shape(%q: !t, %lse: tensor<16x8xf32>) {
  // expected-error @+1 {{'dc.attention_grad' op lse ([batch..., seq] of q, f32) must be 'tensor<8x16xf32>', got 'tensor<16x8xf32>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %q scale = 0.5 : !t, !t, !t, !t, tensor<16x8xf32>, !t -> !t, !t, !t
  return
}

// -----

!t = tensor<8x16x4xf32>

func.func @grad_lse_not_f32(%q: !t, %lse: tensor<8x16xf16>) {
  // expected-error @+1 {{'dc.attention_grad' op operand #4 must be statically shaped tensor of 32-bit float values, but got 'tensor<8x16xf16>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %q scale = 0.5 : !t, !t, !t, !t, tensor<8x16xf16>, !t -> !t, !t, !t
  return
}

// -----

!t = tensor<8x16x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_do_type(%q: !t, %lse: !lse, %do: tensor<8x16x8xf32>) {
  // expected-error @+1 {{'dc.attention_grad' op do (the type of q) must be 'tensor<8x16x4xf32>', got 'tensor<8x16x8xf32>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %do scale = 0.5 : !t, !t, !t, !t, !lse, tensor<8x16x8xf32> -> !t, !t, !t
  return
}

// -----

!t = tensor<8x16x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_dq_type(%q: !t, %lse: !lse) {
  // expected-error @+1 {{'dc.attention_grad' op dq (the type of q) must be 'tensor<8x16x4xf32>', got 'tensor<8x16x4xf16>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %q scale = 0.5 : !t, !t, !t, !t, !lse, !t -> tensor<8x16x4xf16>, !t, !t
  return
}

// -----

!q = tensor<8x16x4xf32>
!kv = tensor<8x12x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_dk_type(%q: !q, %kv: !kv, %lse: !lse) {
  // expected-error @+1 {{'dc.attention_grad' op dk (the type of k) must be 'tensor<8x12x4xf32>', got 'tensor<8x16x4xf32>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %q, %lse, %q scale = 0.5 : !q, !kv, !kv, !q, !lse, !q -> !q, !q, !kv
  return
}

// -----

!q = tensor<8x16x4xf32>
!kv = tensor<8x12x4xf32>
!lse = tensor<8x16xf32>

func.func @grad_dv_type(%q: !q, %kv: !kv, %lse: !lse) {
  // expected-error @+1 {{'dc.attention_grad' op dv (the type of v) must be 'tensor<8x12x4xf32>', got 'tensor<8x16x4xf32>'}}
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %q, %lse, %q scale = 0.5 : !q, !kv, !kv, !q, !lse, !q -> !q, !kv, !q
  return
}

// -----

// The buffer forms share the checks and take only dense buffers (strided
// views in the bshd form, below).

func.func @into_strided(%q: memref<2x4x3xbf16, strided<[24, 6, 1]>>, %k: memref<2x4x3xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'dc.attention_into' op without bshd, every buffer must be dense (identity layout), got 'memref<2x4x3xbf16, strided<[24, 6, 1]>>'}}
  dc.attention_into %q, %k, %k into %k, %lse scale = 0.5 : memref<2x4x3xbf16, strided<[24, 6, 1]>>, memref<2x4x3xbf16>, memref<2x4x3xbf16> into memref<2x4x3xbf16>, memref<2x4xf32>
  return
}

// -----

func.func @into_bad_lse(%q: memref<2x4x3xbf16>, %lse: memref<2x4xbf16>) {
  // expected-error @+1 {{'dc.attention_into' op lse ([batch..., seq] of q, f32) must be 'memref<2x4xf32>', got 'memref<2x4xbf16>'}}
  dc.attention_into %q, %q, %q into %q, %lse scale = 0.5 : memref<2x4x3xbf16>, memref<2x4x3xbf16>, memref<2x4x3xbf16> into memref<2x4x3xbf16>, memref<2x4xbf16>
  return
}

// -----

func.func @grad_into_causal_rectangle(%q: memref<2x4x3xbf16>, %k: memref<2x5x3xbf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'dc.attention_grad_into' op causal attention needs as many queries as keys, got 4 and 5}}
  dc.attention_grad_into %q, %k, %k, %q, %lse, %q into %q, %k, %k causal scale = 0.5 : memref<2x4x3xbf16>, memref<2x5x3xbf16>, memref<2x5x3xbf16>, memref<2x4x3xbf16>, memref<2x4xf32>, memref<2x4x3xbf16> into memref<2x4x3xbf16>, memref<2x5x3xbf16>, memref<2x5x3xbf16>
  return
}

// -----

func.func @grad_into_bad_dk(%q: memref<2x4x3xbf16>, %dk: memref<2x4x3xf16>, %lse: memref<2x4xf32>) {
  // expected-error @+1 {{'dc.attention_grad_into' op dk (the type of k) must be 'memref<2x4x3xbf16>', got 'memref<2x4x3xf16>'}}
  dc.attention_grad_into %q, %q, %q, %q, %lse, %q into %q, %dk, %q scale = 0.5 : memref<2x4x3xbf16>, memref<2x4x3xbf16>, memref<2x4x3xbf16>, memref<2x4x3xbf16>, memref<2x4xf32>, memref<2x4x3xbf16> into memref<2x4x3xbf16>, memref<2x4x3xf16>, memref<2x4x3xbf16>
  return
}

// -----

// Query heads against no key/value heads.
func.func @no_kv_heads(%q: tensor<2x4x8x4xf32>, %k: tensor<2x0x8x4xf32>) {
  // expected-error @+1 {{'dc.attention' op the innermost batch dim of q (4, query heads) must be a multiple of k's (0, key/value heads)}}
  %o, %lse = dc.attention %q, %k, %k scale = 0.5 : tensor<2x4x8x4xf32>, tensor<2x0x8x4xf32>, tensor<2x0x8x4xf32> -> tensor<2x4x8x4xf32>, tensor<2x4x8xf32>
  return
}

// -----

// The bshd form: [B, S, H, D] operands, lse [B, H, S].

func.func @bshd_rank(%q: tensor<8x16x4xf32>) {
  // expected-error @+1 {{'dc.attention' op bshd needs q as [batch, seq, heads, head_dim], got 'tensor<8x16x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q bshd scale = 0.5 : tensor<8x16x4xf32>, tensor<8x16x4xf32>, tensor<8x16x4xf32> -> tensor<8x16x4xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @bshd_lse(%q: tensor<2x16x4x8xf32>) {
  // expected-error @+1 {{'dc.attention' op lse ([batch..., seq] of q, f32) must be 'tensor<2x4x16xf32>', got 'tensor<2x16x4xf32>'}}
  %o, %lse = dc.attention %q, %q, %q bshd scale = 0.5 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32> -> tensor<2x16x4x8xf32>, tensor<2x16x4xf32>
  return
}

// -----

// Heads are dim 2 in the bshd form: 4 query heads over 3 key/value heads.
func.func @bshd_heads(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x3x8xf32>) {
  // expected-error @+1 {{'dc.attention' op the innermost batch dim of q (4, query heads) must be a multiple of k's (3, key/value heads)}}
  %o, %lse = dc.attention %q, %k, %k bshd scale = 0.5 : tensor<2x16x4x8xf32>, tensor<2x16x3x8xf32>, tensor<2x16x3x8xf32> -> tensor<2x16x4x8xf32>, tensor<2x4x16xf32>
  return
}

// -----

// The sequence is dim 1: 16 queries against 12 keys cannot be causal.
func.func @bshd_causal(%q: tensor<2x16x4x8xf32>, %k: tensor<2x12x4x8xf32>, %lse: tensor<2x4x16xf32>) {
  // expected-error @+1 {{'dc.attention_grad' op causal attention needs as many queries as keys, got 16 and 12}}
  %dq, %dk, %dv = dc.attention_grad %q, %k, %k, %q, %lse, %q causal bshd scale = 0.5 : tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16xf32>, tensor<2x16x4x8xf32> -> tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x8xf32>
  return
}

// -----

func.func @bshd_into_strided_head_dim(%q: memref<2x16x4x8xbf16, strided<[1024, 64, 16, 2]>>, %o: memref<2x16x4x8xbf16>, %lse: memref<2x4x16xf32>) {
  // expected-error @+1 {{'dc.attention_into' op bshd buffers need a unit stride over head_dim, got 'memref<2x16x4x8xbf16, strided<[1024, 64, 16, 2]>>'}}
  dc.attention_into %q, %q, %q into %o, %lse bshd scale = 0.5 : memref<2x16x4x8xbf16, strided<[1024, 64, 16, 2]>>, memref<2x16x4x8xbf16, strided<[1024, 64, 16, 2]>>, memref<2x16x4x8xbf16, strided<[1024, 64, 16, 2]>> into memref<2x16x4x8xbf16>, memref<2x4x16xf32>
  return
}

// -----

func.func @bshd_into_strided_lse(%q: memref<2x16x4x8xbf16>, %lse: memref<2x4x16xf32, strided<[128, 32, 1]>>) {
  // expected-error @+1 {{'dc.attention_into' op lse must be dense (identity layout), got 'memref<2x4x16xf32, strided<[128, 32, 1]>>'}}
  dc.attention_into %q, %q, %q into %q, %lse bshd scale = 0.5 : memref<2x16x4x8xbf16>, memref<2x16x4x8xbf16>, memref<2x16x4x8xbf16> into memref<2x16x4x8xbf16>, memref<2x4x16xf32, strided<[128, 32, 1]>>
  return
}

// -----

func.func @bshd_into_host(%q: memref<2x16x4x8xbf16, #dc.host_memory>, %o: memref<2x16x4x8xbf16>, %lse: memref<2x4x16xf32>) {
  // expected-error @+1 {{'dc.attention_into' op operand #0 must be statically shaped strided float memref (device)}}
  dc.attention_into %q, %q, %q into %o, %lse bshd scale = 0.5 : memref<2x16x4x8xbf16, #dc.host_memory>, memref<2x16x4x8xbf16, #dc.host_memory>, memref<2x16x4x8xbf16, #dc.host_memory> into memref<2x16x4x8xbf16>, memref<2x4x16xf32>
  return
}
