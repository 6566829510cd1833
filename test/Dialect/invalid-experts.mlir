// RUN: dc-opt %s -split-input-file -verify-diagnostics

// Verifiers of the mixture-of-experts ops, one rejected op per case.

func.func @topk_k_too_large(%s: tensor<16x4xf32>) {
  // expected-error @+1 {{'dc.topk' op k = 5 must be in [1, 4] (the size of the scores' last dim)}}
  %v, %i = dc.topk %s k = 5 : tensor<16x4xf32> -> tensor<16x5xf32>, tensor<16x5xi64>
  return
}

// -----

func.func @topk_scalar(%s: tensor<f32>) {
  // expected-error @+1 {{'dc.topk' op scores must have rank >= 1 (top-k runs along the last dim)}}
  %v, %i = dc.topk %s k = 1 : tensor<f32> -> tensor<1xf32>, tensor<1xi64>
  return
}

// -----

func.func @topk_values_type(%s: tensor<16x4xf32>) {
  // expected-error @+1 {{'dc.topk' op values (the scores' shape with k last) must have element type 'f32', got 'bf16'}}
  %v, %i = dc.topk %s k = 2 : tensor<16x4xf32> -> tensor<16x2xbf16>, tensor<16x2xi64>
  return
}

// -----

func.func @topk_indices_shape(%s: tensor<16x4xf32>) {
  // expected-error @+1 {{'dc.topk' op indices (the shape of values) must be [16, 2], got [16, 4]}}
  %v, %i = dc.topk %s k = 2 : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x4xi64>
  return
}

// -----

func.func @topk_index_width(%s: tensor<16x4xf32>) {
  // expected-error @+1 {{result #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %v, %i = dc.topk %s k = 2 : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi16>
  return
}

// -----

func.func @group_no_experts(%ids: tensor<16x2xi64>) {
  // expected-error @+1 {{'dc.group_by_expert' op experts = 0 must be >= 1}}
  %o, %e = dc.group_by_expert %ids experts = 0 : tensor<16x2xi64> -> tensor<32xi64>, tensor<0xi64>
  return
}

// -----

func.func @group_order_size(%ids: tensor<16x2xi64>) {
  // expected-error @+1 {{'dc.group_by_expert' op order (one entry per id) must be [32], got [16]}}
  %o, %e = dc.group_by_expert %ids experts = 4 : tensor<16x2xi64> -> tensor<16xi64>, tensor<4xi64>
  return
}

// -----

func.func @group_ends_size(%ids: tensor<16x2xi64>) {
  // expected-error @+1 {{'dc.group_by_expert' op ends (one entry per expert) must be [4], got [5]}}
  %o, %e = dc.group_by_expert %ids experts = 4 : tensor<16x2xi64> -> tensor<32xi64>, tensor<5xi64>
  return
}

// -----

func.func @gather_index_rank(%x: tensor<16x8xf32>, %idx: tensor<4x8xi64>) {
  // expected-error @+1 {{'dc.gather_rows' op index must have rank 1, got 2}}
  %r = dc.gather_rows %x[%idx] : tensor<16x8xf32>, tensor<4x8xi64> -> tensor<32x8xf32>
  return
}

// -----

func.func @gather_rows_count(%x: tensor<16x8xf32>, %idx: tensor<32xi64>) {
  // expected-error @+1 {{'dc.gather_rows' op index has 32 entries; it must have one per result row}}
  %r = dc.gather_rows %x[%idx] : tensor<16x8xf32>, tensor<32xi64> -> tensor<30x8xf32>
  return
}

// -----

func.func @gather_row_shape(%x: tensor<16x8xf32>, %idx: tensor<32xi64>) {
  // expected-error @+1 {{'dc.gather_rows' op result must be [rows, [8]...] like the source, got [32, 4]}}
  %r = dc.gather_rows %x[%idx] : tensor<16x8xf32>, tensor<32xi64> -> tensor<32x4xf32>
  return
}

// -----

func.func @gather_element(%x: tensor<16x8xf32>, %idx: tensor<32xi64>) {
  // expected-error @+1 {{'dc.gather_rows' op result must have the source's element type 'f32', got 'bf16'}}
  %r = dc.gather_rows %x[%idx] : tensor<16x8xf32>, tensor<32xi64> -> tensor<32x8xbf16>
  return
}

// -----

func.func @scatter_rows_count(%y: tensor<32x8xf32>, %idx: tensor<16xi64>) {
  // expected-error @+1 {{'dc.scatter_add_rows' op index has 16 entries; it must have one per source row}}
  %r = dc.scatter_add_rows %y[%idx] : tensor<32x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return
}

// -----

func.func @scatter_scalar(%y: tensor<f32>, %idx: tensor<1xi64>) {
  // expected-error @+1 {{'dc.scatter_add_rows' op source must have rank >= 1 (rows first)}}
  %r = dc.scatter_add_rows %y[%idx] : tensor<f32>, tensor<1xi64> -> tensor<f32>
  return
}

// -----

func.func @grouped_reduced_dim(%x: tensor<32x8xf32>, %w: tensor<4x12x8xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op rhs's middle dim (12) must equal lhs's columns (8)}}
  %y = dc.grouped_matmul %x, %w, %ends : tensor<32x8xf32>, tensor<4x12x8xf32>, tensor<4xi64> -> tensor<32x8xf32>
  return
}

// -----

func.func @grouped_transposed_dim(%x: tensor<32x8xf32>, %w: tensor<4x8x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op rhs's last dim (12) must equal lhs's columns (8)}}
  %y = dc.grouped_matmul %x, %w, %ends transpose_rhs : tensor<32x8xf32>, tensor<4x8x12xf32>, tensor<4xi64> -> tensor<32x8xf32>
  return
}

// -----

func.func @grouped_ends(%x: tensor<32x8xf32>, %w: tensor<4x8x12xf32>, %ends: tensor<3xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op ends has 3 entries; it must have one per expert of rhs (4)}}
  %y = dc.grouped_matmul %x, %w, %ends : tensor<32x8xf32>, tensor<4x8x12xf32>, tensor<3xi64> -> tensor<32x12xf32>
  return
}

// -----

func.func @grouped_result(%x: tensor<32x8xf32>, %w: tensor<4x8x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op result ([lhs rows, rhs columns]) must be [32, 12], got [32, 8]}}
  %y = dc.grouped_matmul %x, %w, %ends : tensor<32x8xf32>, tensor<4x8x12xf32>, tensor<4xi64> -> tensor<32x8xf32>
  return
}

// -----

func.func @grouped_mixed_types(%x: tensor<32x8xbf16>, %w: tensor<4x8x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op rhs must have lhs's element type 'bf16', got 'f32'}}
  %y = dc.grouped_matmul %x, %w, %ends : tensor<32x8xbf16>, tensor<4x8x12xf32>, tensor<4xi64> -> tensor<32x12xbf16>
  return
}

// -----

func.func @grouped_rank(%x: tensor<32x8xf32>, %w: tensor<8x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_matmul' op rhs must have rank 3, got 2}}
  %y = dc.grouped_matmul %x, %w, %ends : tensor<32x8xf32>, tensor<8x12xf32>, tensor<4xi64> -> tensor<32x12xf32>
  return
}

// -----

func.func @weight_grad_rows(%a: tensor<32x8xf32>, %b: tensor<30x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_weight_grad' op lhs and rhs must have the same rows, got 32 and 30}}
  %dw = dc.grouped_weight_grad %a, %b, %ends : tensor<32x8xf32>, tensor<30x12xf32>, tensor<4xi64> -> tensor<4x8x12xf32>
  return
}

// -----

func.func @weight_grad_result(%a: tensor<32x8xf32>, %b: tensor<32x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_weight_grad' op result ([experts, lhs columns, rhs columns]) must be [4, 8, 12], got [4, 12, 8]}}
  %dw = dc.grouped_weight_grad %a, %b, %ends : tensor<32x8xf32>, tensor<32x12xf32>, tensor<4xi64> -> tensor<4x12x8xf32>
  return
}

// -----

func.func @weight_grad_types(%a: tensor<32x8xf32>, %b: tensor<32x12xf32>, %ends: tensor<4xi64>) {
  // expected-error @+1 {{'dc.grouped_weight_grad' op result ([experts, lhs columns, rhs columns]) must have element type 'f32', got 'bf16'}}
  %dw = dc.grouped_weight_grad %a, %b, %ends : tensor<32x8xf32>, tensor<32x12xf32>, tensor<4xi64> -> tensor<4x8x12xbf16>
  return
}
