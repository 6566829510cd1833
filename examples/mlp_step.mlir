// A hand-written training step in dc's input form: a 2-layer MLP
//   y = relu(x W1 + b1) W2 + b2,   loss = mean((y - target)^2)
// with forward and hand-derived backward in one function. Parameters are the
// arguments marked #dc.param (ids in argument order), then the data, named
// by dc.name for the artifact manifest; results are the loss, then one
// gradient per parameter in parameter order.
//
// Backward (N = 8 * 4 loss terms):
//   dy  = 2 (y - target) / N        dW2 = h^T dy     db2 = sum_rows(dy)
//   dh  = dy W2^T                   dz1 = dh * [z1 > 0]
//   dW1 = x^T dz1                   db1 = sum_rows(dz1)

#lhs_t = affine_map<(m, n, k) -> (k, m)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#out = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

func.func @train_step(
    %w1: tensor<16x32xf32> {dc.param = #dc.param<id = 0, name = "fc1.weight">},
    %b1: tensor<32xf32> {dc.param = #dc.param<id = 1, name = "fc1.bias">},
    %w2: tensor<32x4xf32> {dc.param = #dc.param<id = 2, name = "fc2.weight">},
    %b2: tensor<4xf32> {dc.param = #dc.param<id = 3, name = "fc2.bias">},
    %x: tensor<8x16xf32> {dc.name = "x"},
    %target: tensor<8x4xf32> {dc.name = "target"})
    -> (tensor<f32> {dc.loss},
        tensor<16x32xf32> {dc.grad = #dc.grad<param = 0>},
        tensor<32xf32> {dc.grad = #dc.grad<param = 1>},
        tensor<32x4xf32> {dc.grad = #dc.grad<param = 2>},
        tensor<4xf32> {dc.grad = #dc.grad<param = 3>}) {
  %zero = arith.constant 0.0 : f32
  // 2 / N for the gradient of the mean, 1 / N for the loss itself.
  %two_over_n = arith.constant 0.0625 : f32
  %one_over_n = arith.constant 0.03125 : f32

  // ---- forward ----
  // z1 = x W1 + b1: the matmul accumulates into the broadcast bias.
  %z1_init = tensor.empty() : tensor<8x32xf32>
  %b1_rows = linalg.broadcast ins(%b1 : tensor<32xf32>)
      outs(%z1_init : tensor<8x32xf32>) dimensions = [0]
  %z1 = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>)
      outs(%b1_rows : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h_init = tensor.empty() : tensor<8x32xf32>
  %h = linalg.generic {indexing_maps = [#id2, #id2],
                       iterator_types = ["parallel", "parallel"]}
      ins(%z1 : tensor<8x32xf32>) outs(%h_init : tensor<8x32xf32>) {
  ^bb0(%z: f32, %o: f32):
    %r = arith.maximumf %z, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  %y_init = tensor.empty() : tensor<8x4xf32>
  %b2_rows = linalg.broadcast ins(%b2 : tensor<4xf32>)
      outs(%y_init : tensor<8x4xf32>) dimensions = [0]
  %y = linalg.matmul ins(%h, %w2 : tensor<8x32xf32>, tensor<32x4xf32>)
      outs(%b2_rows : tensor<8x4xf32>) -> tensor<8x4xf32>

  // loss = sum((y - target)^2) / N
  %loss_init = tensor.empty() : tensor<f32>
  %loss_zero = linalg.fill ins(%zero : f32) outs(%loss_init : tensor<f32>) -> tensor<f32>
  %sq_sum = linalg.generic {indexing_maps = [#id2, #id2, #all],
                            iterator_types = ["reduction", "reduction"]}
      ins(%y, %target : tensor<8x4xf32>, tensor<8x4xf32>)
      outs(%loss_zero : tensor<f32>) {
  ^bb0(%yv: f32, %tv: f32, %acc: f32):
    %d = arith.subf %yv, %tv : f32
    %d2 = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %d2 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>],
                          iterator_types = []}
      ins(%sq_sum : tensor<f32>) outs(%loss_init : tensor<f32>) {
  ^bb0(%s: f32, %o: f32):
    %m = arith.mulf %s, %one_over_n : f32
    linalg.yield %m : f32
  } -> tensor<f32>

  // ---- backward ----
  %dy_init = tensor.empty() : tensor<8x4xf32>
  %dy = linalg.generic {indexing_maps = [#id2, #id2, #id2],
                        iterator_types = ["parallel", "parallel"]}
      ins(%y, %target : tensor<8x4xf32>, tensor<8x4xf32>)
      outs(%dy_init : tensor<8x4xf32>) {
  ^bb0(%yv: f32, %tv: f32, %o: f32):
    %d = arith.subf %yv, %tv : f32
    %g = arith.mulf %d, %two_over_n : f32
    linalg.yield %g : f32
  } -> tensor<8x4xf32>

  // dW2 = h^T dy, db2 = sum over rows of dy.
  %dw2_init = tensor.empty() : tensor<32x4xf32>
  %dw2_zero = linalg.fill ins(%zero : f32) outs(%dw2_init : tensor<32x4xf32>) -> tensor<32x4xf32>
  %dw2 = linalg.matmul indexing_maps = [#lhs_t, #rhs, #out]
      ins(%h, %dy : tensor<8x32xf32>, tensor<8x4xf32>)
      outs(%dw2_zero : tensor<32x4xf32>) -> tensor<32x4xf32>
  %db2_init = tensor.empty() : tensor<4xf32>
  %db2_zero = linalg.fill ins(%zero : f32) outs(%db2_init : tensor<4xf32>) -> tensor<4xf32>
  %db2 = linalg.reduce ins(%dy : tensor<8x4xf32>) outs(%db2_zero : tensor<4xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }

  // dh = dy W2^T, then through the ReLU: dz1 = dh where z1 > 0, else 0.
  %dh_init = tensor.empty() : tensor<8x32xf32>
  %dh_zero = linalg.fill ins(%zero : f32) outs(%dh_init : tensor<8x32xf32>) -> tensor<8x32xf32>
  %dh = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
      ins(%dy, %w2 : tensor<8x4xf32>, tensor<32x4xf32>)
      outs(%dh_zero : tensor<8x32xf32>) -> tensor<8x32xf32>
  %dz1_init = tensor.empty() : tensor<8x32xf32>
  %dz1 = linalg.generic {indexing_maps = [#id2, #id2, #id2],
                         iterator_types = ["parallel", "parallel"]}
      ins(%dh, %z1 : tensor<8x32xf32>, tensor<8x32xf32>)
      outs(%dz1_init : tensor<8x32xf32>) {
  ^bb0(%g: f32, %z: f32, %o: f32):
    %active = arith.cmpf ogt, %z, %zero : f32
    %r = arith.select %active, %g, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>

  // dW1 = x^T dz1, db1 = sum over rows of dz1.
  %dw1_init = tensor.empty() : tensor<16x32xf32>
  %dw1_zero = linalg.fill ins(%zero : f32) outs(%dw1_init : tensor<16x32xf32>) -> tensor<16x32xf32>
  %dw1 = linalg.matmul indexing_maps = [#lhs_t, #rhs, #out]
      ins(%x, %dz1 : tensor<8x16xf32>, tensor<8x32xf32>)
      outs(%dw1_zero : tensor<16x32xf32>) -> tensor<16x32xf32>
  %db1_init = tensor.empty() : tensor<32xf32>
  %db1_zero = linalg.fill ins(%zero : f32) outs(%db1_init : tensor<32xf32>) -> tensor<32xf32>
  %db1 = linalg.reduce ins(%dz1 : tensor<8x32xf32>) outs(%db1_zero : tensor<32xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }

  return %loss, %dw1, %db1, %dw2, %db2
      : tensor<f32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32x4xf32>, tensor<4xf32>
}
