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

func.func @group_no_capacity(%ids: tensor<16x2xi64>) {
  // expected-error @+1 {{'dc.group_by_expert' op capacity = 0 must be >= 1 (each expert keeps at most that many assignments)}}
  %o, %e = dc.group_by_expert %ids experts = 4 capacity = 0 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
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

// -----

// The buffer forms share their tensor ops' shape rules, and take views only
// where the runtime reads a row stride.

func.func @topk_into_values_shape(%s: memref<16x4xf32>, %v: memref<16x3xf32>, %i: memref<16x2xi64>) {
  // expected-error @+1 {{'dc.topk_into' op values (the scores' shape with k last) must be [16, 2], got [16, 3]}}
  dc.topk_into %s into %v, %i k = 2 : memref<16x4xf32> into memref<16x3xf32>, memref<16x2xi64>
  return
}

// -----

func.func @topk_into_strided_rank3(%s: memref<2x8x4xf32, strided<[64, 4, 1]>>, %v: memref<2x8x2xf32>, %i: memref<2x8x2xi64>) {
  // expected-error @+1 {{'dc.topk_into' op scores of rank > 2 must be a dense buffer (one row stride for every row)}}
  dc.topk_into %s into %v, %i k = 2 : memref<2x8x4xf32, strided<[64, 4, 1]>> into memref<2x8x2xf32>, memref<2x8x2xi64>
  return
}

// -----

func.func @group_into_ends(%ids: memref<6x2xi64>, %order: memref<12xi64>, %ends: memref<3xi64>) {
  // expected-error @+1 {{'dc.group_by_expert_into' op ends (one entry per expert) must be [4], got [3]}}
  dc.group_by_expert_into %ids into %order, %ends experts = 4 : memref<6x2xi64> into memref<12xi64>, memref<3xi64>
  return
}

// -----

func.func @group_into_float_ids(%ids: memref<6x2xf32>, %order: memref<12xi64>, %ends: memref<4xi64>) {
  // expected-error @+1 {{'dc.group_by_expert_into' op operand #0 must be statically shaped identity-layout memref of i32 or i64 (device)}}
  dc.group_by_expert_into %ids into %order, %ends experts = 4 : memref<6x2xf32> into memref<12xi64>, memref<4xi64>
  return
}

// -----

func.func @gather_into_columns_strided(%x: memref<6x8xf32, strided<[1, 6]>>, %i: memref<12xi64>, %r: memref<12x8xf32>) {
  // expected-error @+1 {{'dc.gather_rows_into' op operand #0 must be statically shaped float memref (device) whose dims after the first are dense}}
  dc.gather_rows_into %x[%i] into %r : memref<6x8xf32, strided<[1, 6]>>, memref<12xi64> into memref<12x8xf32>
  return
}

// -----

func.func @gather_into_index_rows(%x: memref<6x8xf32>, %i: memref<10xi64>, %r: memref<12x8xf32>) {
  // expected-error @+1 {{'dc.gather_rows_into' op index has 10 entries; it must have one per result row}}
  dc.gather_rows_into %x[%i] into %r : memref<6x8xf32>, memref<10xi64> into memref<12x8xf32>
  return
}

// -----

func.func @scatter_into_strided_result(%y: memref<12x8xf32>, %i: memref<12xi64>, %r: memref<6x8xf32, strided<[16, 1]>>) {
  // expected-error @+1 {{'dc.scatter_add_rows_into' op operand #2 must be statically shaped identity-layout float memref (device)}}
  dc.scatter_add_rows_into %y[%i] into %r : memref<12x8xf32>, memref<12xi64> into memref<6x8xf32, strided<[16, 1]>>
  return
}

// -----

func.func @matmul_into_reduced_dim(%l: memref<12x8xbf16>, %w: memref<4x6x8xbf16>, %e: memref<4xi64>, %o: memref<12x6xbf16>) {
  // expected-error @+1 {{'dc.grouped_matmul_into' op rhs's middle dim (6) must equal lhs's columns (8)}}
  dc.grouped_matmul_into %l, %w, %e into %o : memref<12x8xbf16>, memref<4x6x8xbf16>, memref<4xi64> into memref<12x6xbf16>
  return
}

// -----

func.func @matmul_into_row_stride_too_small(%l: memref<12x8xbf16, strided<[4, 1]>>, %w: memref<4x8x6xbf16>, %e: memref<4xi64>, %o: memref<12x6xbf16>) {
  // expected-error @+1 {{'dc.grouped_matmul_into' op operand #0 must be statically shaped float memref (device) whose dims after the first are dense}}
  dc.grouped_matmul_into %l, %w, %e into %o : memref<12x8xbf16, strided<[4, 1]>>, memref<4x8x6xbf16>, memref<4xi64> into memref<12x6xbf16>
  return
}

// -----

func.func @weight_grad_into_result(%l: memref<12x8xbf16>, %r: memref<12x6xbf16>, %e: memref<4xi64>, %o: memref<4x6x8xbf16>) {
  // expected-error @+1 {{'dc.grouped_weight_grad_into' op result ([experts, lhs columns, rhs columns]) must be [4, 8, 6], got [4, 6, 8]}}
  dc.grouped_weight_grad_into %l, %r, %e into %o : memref<12x8xbf16>, memref<12x6xbf16>, memref<4xi64> into memref<4x6x8xbf16>
  return
}
