// RUN: dc-opt %s --dc-expert-parallel="expert-parallel=2" -split-input-file -verify-diagnostics

// 2 ranks cannot each hold half of 3 experts.
func.func @indivisible(%x: tensor<4x8xf32>, %ids: tensor<4xi64>,
                       %w: tensor<3x8x8xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<4x8xf32> {dc.loss}) {
  // expected-error @+1 {{dc-expert-parallel: 2 ranks on the expert axis do not divide this routing's 3 experts}}
  %order, %ends = dc.group_by_expert %ids experts = 3 : tensor<4xi64> -> tensor<4xi64>, tensor<3xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<4x8xf32>, tensor<3x8x8xf32>, tensor<3xi64> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Weights the step computes (here: an argument that is not a parameter)
// cannot be divided: only the trainer's parameters are.
func.func @weights_not_a_param(%x: tensor<4x8xf32>, %ids: tensor<4xi64>,
                               %w: tensor<4x8x8xf32>)
    -> (tensor<4x8xf32> {dc.loss}) {
  %order, %ends = dc.group_by_expert %ids experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  // expected-error @+1 {{dc-expert-parallel: the stacked expert weights of this grouped product are not a parameter argument (or a cast of one)}}
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The group ends are the rank's own counts: an op other than a grouped
// product reading them would read the experts' ranks' after the split.
func.func @ends_read(%x: tensor<4x8xf32>, %ids: tensor<4xi64>,
                     %w: tensor<4x8x8xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<4x8xf32> {dc.loss}, tensor<4xi64>) {
  %order, %ends = dc.group_by_expert %ids experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  // expected-error @+1 {{dc-expert-parallel: reads the ends of a routing's expert groups, which only the grouped products may read}}
  return %y, %ends : tensor<4x8xf32>, tensor<4xi64>
}

// -----

// The stacked weights used whole (a sum over the experts) cannot be split.
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sum = affine_map<(d0, d1, d2) -> (d1, d2)>
func.func @weights_used_whole(%x: tensor<4x8xf32>, %ids: tensor<4xi64>,
                              %w: tensor<4x8x8xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<4x8xf32> {dc.loss}, tensor<8x8xf32>) {
  %order, %ends = dc.group_by_expert %ids experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-error @+1 {{dc-expert-parallel: uses stacked expert weights (or their gradient) in an op that does not work on each expert apart}}
  %s = linalg.generic {indexing_maps = [#id3, #sum], iterator_types = ["reduction", "parallel", "parallel"]} ins(%w : tensor<4x8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %a = arith.addf %v, %o : f32
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  return %y, %s : tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// A dense step has no experts to divide.
// expected-error @+1 {{dc-expert-parallel: no step has a mixture-of-experts routing (dc.group_by_expert feeding grouped products) to divide over 2 ranks}}
module {
  func.func @dense(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {dc.loss}) {
    return %x : tensor<4x8xf32>
  }
}

// -----

// Sequence parallelism and expert parallelism do not compose yet.
func.func @sequence_parallel(%x: tensor<4x8xf32>,
                             // expected-error @+1 {{dc-expert-parallel: a sequence-parallel step (dc-ulysses) cannot be made expert-parallel yet}}
                             %ids: tensor<4xi64> {dc.seq_axis = 0 : i64},
                             %w: tensor<4x8x8xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<4x8xf32> {dc.loss}) {
  %order, %ends = dc.group_by_expert %ids experts = 4 : tensor<4xi64> -> tensor<4xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %y = dc.grouped_matmul %rows, %w, %ends : tensor<4x8xf32>, tensor<4x8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// An existing grid whose axis is not the size asked for.
// expected-error @+1 {{dc-expert-parallel: expert-parallel=2 but this grid's axis 0 has 4 ranks}}
shard.grid @world(shape = 4)
func.func @grid_mismatch(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {dc.loss}) {
  return %x : tensor<4x8xf32>
}
