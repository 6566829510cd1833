// RUN: dc-opt %s --dc-zero3="world-size=2" -split-input-file -verify-diagnostics

func.func @dynamic(%w: tensor<?x4xf32> {dc.param = #dc.param<id = 0>}) -> tensor<?x4xf32> {
  // expected-error @above {{argument #0 has dynamic shape 'tensor<?x4xf32>'; dc needs static shapes}}
  return %w : tensor<?x4xf32>
}

// -----

func.func @returns_param(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}) -> tensor<4xf32> {
  // expected-error @+1 {{returns parameter #0 itself; dc-zero3 cannot return a sharded parameter}}
  return %w : tensor<4xf32>
}

// -----

func.func @duplicate_ids(%a: tensor<4xf32> {dc.param = #dc.param<id = 3>},
                         // expected-error @+1 {{parameter id 3 is used by arguments #0 and #1}}
                         %b: tensor<4xf32> {dc.param = #dc.param<id = 3>}) {
  return
}

// -----

func.func @grad_of_unknown(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %g: tensor<4xf32>)
    -> (tensor<4xf32> {dc.grad = #dc.grad<param = 7>}) {
  %s = arith.addf %w, %g : tensor<4xf32>
  // expected-error @+1 {{result #0 is the gradient of parameter id 7, which no argument declares}}
  return %s : tensor<4xf32>
}

// -----

func.func @grad_type_mismatch(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %g: tensor<4xf16>)
    -> (tensor<4xf16> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.truncf %w : tensor<4xf32> to tensor<4xf16>
  %s = arith.addf %c, %g : tensor<4xf16>
  // expected-error @+1 {{gradient result #0 has type 'tensor<4xf16>' but parameter id 0 is 'tensor<4xf32>'}}
  return %s : tensor<4xf16>
}

// -----

func.func @multi_block(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}) {
  // expected-error @above {{dc-zero3 needs a step function with a single block; @multi_block has 2}}
  cf.br ^next
^next:
  return
}

// -----

// expected-error @below {{dc-zero3: world-size=2 but this grid's axis 0 has 4 ranks}}
shard.grid @world(shape = 4)
func.func @grid_mismatch(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}) {
  return
}
