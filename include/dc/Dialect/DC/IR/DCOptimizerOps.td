//===- DCOptimizerOps.td - the optimizer inside the step ---*- tablegen -*-===//
//
// AdamW as ops of the step (dc-optimizer-in-step), so that the scheduler,
// the memory timeline and the cost model see the update with everything
// else: the global gradient norm as each gradient's share of it, and each
// parameter's update. Both are library calls of the runtime (dcrt.h:
// dcrt_grad_squares, dcrt_adamw), exact against dc-run's trainer on the
// host backend.
//
//===----------------------------------------------------------------------===//
#ifndef DC_OPTIMIZER_OPS_TD
#define DC_OPTIMIZER_OPS_TD

include "dc/Dialect/DC/IR/DCBase.td"
include "dc/Dialect/DC/IR/DCInterfaces.td"
include "dc/Dialect/DC/IR/DCTypes.td"

// A parameter's tensors in the step: its shard, or the whole tensor where
// it is not sharded.
def DC_OptimizerTensor : AnyTypeOf<[DC_AnyShard, AnyStaticShapeTensor]>;
def DC_F64Scalar : 0DTensorOf<[F64]>;
def DC_I64Scalar : 0DTensorOf<[I64]>;

def DC_GradSquaresOp : DC_Op<"grad_squares", [Pure,
    AllTypesMatch<["squares", "result"]>,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "add a gradient's share of the squared global norm";
  let description = [{
    `result = squares + s`, where `s` is the sum of the squares of this
    rank's real elements of `grad` (a shard's padding excluded), summed in
    order in f64, on the one rank of those holding the same slot that
    counts it (coordinate 0 on the axes the gradient is not split over; a
    gradient that is not sharded counts on rank 0), and 0 elsewhere (NaN
    where the slot is not finite). Chained over a step's gradients in
    parameter order and all-reduced, it is the squared global L2 norm that
    dc-run's trainer computes, bit for bit on the host backend.

    `expert_axis`: the gradient of a block of experts (dc-expert-parallel):
    ranks at different coordinates on that grid axis hold different
    experts, so each counts its own. `micro_batches` > 1: `grad` is the sum
    of that many micro-batches' gradients, and `s` is of their mean (the
    sum's squares over `micro_batches`^2).

    ```mlir
    %s1 = dc.grad_squares %g, %s0
        : !dc.shard<tensor<16x32xf32>, @world[0], local = 256>, tensor<f64>
    ```
  }];
  let arguments = (ins DC_OptimizerTensor:$grad, DC_F64Scalar:$squares,
                       OptionalAttr<I64Attr>:$expert_axis,
                       DefaultValuedAttr<I64Attr, "1">:$micro_batches);
  let results = (outs DC_F64Scalar:$result);
  let assemblyFormat = [{
    $grad `,` $squares attr-dict `:` type($grad) `,` type($squares)
  }];
  let hasVerifier = 1;
}

def DC_AdamWOp : DC_Op<"adamw", [Pure,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "one AdamW step of a parameter";
  let description = [{
    torch.optim.AdamW's update (decoupled weight decay, bias-corrected
    moments) of `param` by `grad`, with the moments `exp_avg` and
    `exp_avg_sq` (f32 or bf16) and, where the parameter is not its own
    master copy, an f32 `master`. The gradient is scaled by
    `min(1, max_grad_norm / (sqrt(squares) + 1e-6))` first when
    `max_grad_norm` > 0 (`squares`: the all-reduced squared global norm).
    `lr` and `step` (counting from 1) are scalars of the step, so a
    learning-rate schedule needs no recompilation. A non-finite `squares`
    skips the update: every result is its operand. Results: the parameter
    (in its own element type), the moments, and the master when there is
    one.

    All operands have the parameter's shape and sharding; the gradient,
    the master and the moments may differ in element type only. Without a
    master, the parameter must be f32, or bf16 with bf16 moments.
    `micro_batches` > 1: `grad` is the sum of that many micro-batches'
    gradients (an fp32 sum, dc.grad_accumulate), and the update uses their
    mean.

    ```mlir
    %p1, %m1, %v1 = dc.adamw %p, %g, %m, %v, %lr, %step, %sq
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
         weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64}
        : !s, !s, !s, !s, tensor<f64>, tensor<i64>, tensor<f64>
          -> !s, !s, !s
    ```
    where `!s` is `!dc.shard<tensor<16x32xf32>, @world[0], local = 256>`.
  }];
  let arguments = (ins DC_OptimizerTensor:$param, DC_OptimizerTensor:$grad,
                       DC_OptimizerTensor:$exp_avg,
                       DC_OptimizerTensor:$exp_avg_sq,
                       Optional<DC_OptimizerTensor>:$master,
                       DC_F64Scalar:$lr, DC_I64Scalar:$step,
                       DC_F64Scalar:$squares,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, F64Attr:$max_grad_norm,
                       DefaultValuedAttr<I64Attr, "1">:$micro_batches);
  let results = (outs DC_OptimizerTensor:$new_param,
                      DC_OptimizerTensor:$new_exp_avg,
                      DC_OptimizerTensor:$new_exp_avg_sq,
                      Optional<DC_OptimizerTensor>:$new_master);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq (`master` $master^)? `,`
    $lr `,` $step `,` $squares attr-dict `:` type($param) `,` type($grad) `,`
    type($exp_avg) `,` type($exp_avg_sq) `,` type($lr) `,` type($step) `,`
    type($squares) (`master` type($master)^)? `->` type($new_param) `,`
    type($new_exp_avg) `,` type($new_exp_avg_sq)
    (`master` type($new_master)^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$param, "::mlir::Value":$grad,
                   "::mlir::Value":$expAvg, "::mlir::Value":$expAvgSq,
                   "::mlir::Value":$master, "::mlir::Value":$lr,
                   "::mlir::Value":$step, "::mlir::Value":$squares,
                   "double":$beta1, "double":$beta2, "double":$eps,
                   "double":$weightDecay, "double":$maxGradNorm,
                   CArg<"int64_t", "1">:$microBatches)>
  ];
  let hasVerifier = 1;
}

def DC_GradAccumulateOp : DC_Op<"grad_accumulate", [Pure,
    AllTypesMatch<["sum", "result"]>,
    DeclareOpInterfaceMethods<DC_ComputeOpInterface>]> {
  let summary = "add a micro-batch's gradient into its fp32 sum";
  let description = [{
    `result = sum + grad`, elementwise in fp32 (the gradient converted
    first), over this rank's elements: how a step that runs its optimizer
    sums a reduced gradient over the micro-batches of gradient
    accumulation, as dc-run's trainer sums the shards it is given. `sum`
    is the gradient's shape and sharding in f32. The caller keeps the sum
    across micro-batches (an accumulator argument, `dc.accumulator`).

    ```mlir
    %s1 = dc.grad_accumulate %g, %s0
        : !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
          !dc.shard<tensor<16x32xf32>, @world[0], local = 256>
    ```
  }];
  let arguments = (ins DC_OptimizerTensor:$grad, DC_OptimizerTensor:$sum);
  let results = (outs DC_OptimizerTensor:$result);
  let assemblyFormat = [{
    $grad `,` $sum attr-dict `:` type($grad) `,` type($sum)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffer forms. Shards are flat buffers of their local elements: the ops
// keep what the runtime needs to find this rank's real elements (the
// parameter's element count and the axis it is split over; kAllGridAxes
// for every axis, -2 where it is not sharded).
//===----------------------------------------------------------------------===//

defvar DC_OptimizerSlotArgs = (ins I64Attr:$full_numel, I64Attr:$shard_axis);
defvar DC_MicroBatchesArg = (ins DefaultValuedAttr<I64Attr, "1">:$micro_batches);

def DC_GradSquaresIntoOp : DC_Op<"grad_squares_into"> {
  let summary = "dc.grad_squares in buffer form (overwrites result)";
  let description = [{
    ```mlir
    dc.grad_squares_into %g, %s0 into %s1 full_numel = 512 shard_axis = 0
        : memref<256xf32>, memref<f64> into memref<f64>
    ```
  }];
  let arguments = !con((ins Arg<DC_DeviceBuffer, "", [MemRead]>:$grad,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$squares,
                            Arg<DC_DeviceBuffer, "", [MemWrite]>:$result),
                       DC_OptimizerSlotArgs,
                       (ins OptionalAttr<I64Attr>:$expert_axis),
                       DC_MicroBatchesArg);
  let assemblyFormat = [{
    $grad `,` $squares `into` $result `full_numel` `=` $full_numel
    `shard_axis` `=` $shard_axis attr-dict `:` type($grad) `,` type($squares)
    `into` type($result)
  }];
  let hasVerifier = 1;
}

def DC_AdamWIntoOp : DC_Op<"adamw_into", [AttrSizedOperandSegments]> {
  let summary = "dc.adamw in buffer form (overwrites its outputs)";
  let description = [{
    Reads the parameter, gradient, moments, master and scalars, and writes
    the updated parameter, moments and master into the output buffers
    (which a caller may alias with the inputs: the update is elementwise).

    ```mlir
    dc.adamw_into %p, %g, %m, %v, %lr, %step, %sq into %p1, %m1, %v1
        full_numel = 512 shard_axis = 0
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
         weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64}
        : memref<256xf32>, memref<256xf32>, memref<256xf32>, memref<256xf32>,
          memref<f64>, memref<i64>, memref<f64>
          into memref<256xf32>, memref<256xf32>, memref<256xf32>
    ```
  }];
  let arguments = !con((ins Arg<DC_DeviceBuffer, "", [MemRead]>:$param,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$grad,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$exp_avg,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$exp_avg_sq,
                            Arg<Optional<DC_DeviceBuffer>, "", [MemRead]>:$master,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$lr,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$step,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$squares,
                            Arg<DC_DeviceBuffer, "", [MemWrite]>:$new_param,
                            Arg<DC_DeviceBuffer, "", [MemWrite]>:$new_exp_avg,
                            Arg<DC_DeviceBuffer, "", [MemWrite]>:$new_exp_avg_sq,
                            Arg<Optional<DC_DeviceBuffer>, "", [MemWrite]>:$new_master),
                       DC_OptimizerSlotArgs,
                       (ins F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                            F64Attr:$weight_decay, F64Attr:$max_grad_norm),
                       DC_MicroBatchesArg);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq (`master` $master^)? `,`
    $lr `,` $step `,` $squares `into` $new_param `,` $new_exp_avg `,`
    $new_exp_avg_sq (`master` $new_master^)? `full_numel` `=` $full_numel
    `shard_axis` `=` $shard_axis attr-dict `:` type($param) `,` type($grad) `,`
    type($exp_avg) `,` type($exp_avg_sq) `,` type($lr) `,` type($step) `,`
    type($squares) (`master` type($master)^)? `into` type($new_param) `,`
    type($new_exp_avg) `,` type($new_exp_avg_sq)
    (`master` type($new_master)^)?
  }];
  let hasVerifier = 1;
}

def DC_GradAccumulateIntoOp : DC_Op<"grad_accumulate_into"> {
  let summary = "dc.grad_accumulate in buffer form (overwrites result)";
  let description = [{
    ```mlir
    dc.grad_accumulate_into %g, %s0 into %s1 full_numel = 512 shard_axis = 0
        : memref<256xbf16>, memref<256xf32> into memref<256xf32>
    ```
  }];
  let arguments = !con((ins Arg<DC_DeviceBuffer, "", [MemRead]>:$grad,
                            Arg<DC_DeviceBuffer, "", [MemRead]>:$sum,
                            Arg<DC_DeviceBuffer, "", [MemWrite]>:$result),
                       DC_OptimizerSlotArgs);
  let assemblyFormat = [{
    $grad `,` $sum `into` $result `full_numel` `=` $full_numel
    `shard_axis` `=` $shard_axis attr-dict `:` type($grad) `,` type($sum)
    `into` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DC_OPTIMIZER_OPS_TD
