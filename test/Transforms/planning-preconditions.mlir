// Every planning pass (and dc-report) checks each step with dc-verify-
// schedule's own checks before it plans, and reports a located error
// instead of planning what its analyses cannot read. The first three cases
// crashed once (issue 13): a segfault in the cost model on buffer-form ops,
// heap corruption in dc-prefetch on a future never waited, and a segfault
// after dc-selective-gather erased an op a second wait still used.

// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-prefetch -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-selective-gather -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-report -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-offload-activations -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-offload-params -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-attach-target=memory-budget=1GiB --dc-wait-reductions-early -o /dev/null
// RUN: dc-opt %s -split-input-file -verify-diagnostics --dc-zero3-pipeline="world-size=2 memory-budget=1GiB" -o /dev/null

// The error names the pass that refused to plan.
// RUN: not dc-opt %s -split-input-file --dc-zero3-pipeline="world-size=2 memory-budget=1GiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not dc-opt %s -split-input-file --dc-selective-gather -o /dev/null 2>&1 | FileCheck %s --check-prefix=SELECTIVE
// PIPELINE: planning-preconditions.mlir:[[# @LINE + 4]]:20: error: dc-wait-reductions-early cannot plan this step: argument #0 of 'buffers' is a buffer ('memref<15xf32>'); dc plans steps in tensor form, before bufferization
// SELECTIVE: planning-preconditions.mlir:[[# @LINE + 3]]:20: error: dc-selective-gather cannot plan this step: argument #0

// expected-error @+1 {{cannot plan this step: argument #0 of 'buffers' is a buffer ('memref<15xf32>'); dc plans steps in tensor form, before bufferization}}
func.func @buffers(%w: memref<15xf32>) {
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<30xf32>>
  return
}

// -----

// A dc op on a buffer inside an otherwise tensor step.
func.func @buffer_op() {
  %w = memref.alloc() : memref<15xf32>
  // expected-error @+1 {{cannot plan this step: 'dc.gather_start' works on a buffer ('memref<15xf32>'); dc plans steps in tensor form, before bufferization}}
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<30xf32>>
  %full = dc.wait %f : !dc.future<memref<30xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @never_waited(%w: !w) {
  // expected-error @+1 {{cannot plan this step: future #0 is never waited}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @waited_twice(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{cannot plan this step: future #0 is waited 2 times; it must be waited exactly once}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{waited here}}
  %a = dc.wait %f : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %a, %x : tensor<8x8xf32>
  dc.release %a : tensor<8x8xf32>
  // expected-note @+1 {{waited here}}
  %b = dc.wait %f : !dc.future<tensor<8x8xf32>>
  %z = arith.addf %b, %y : tensor<8x8xf32>
  dc.release %b : tensor<8x8xf32>
  return %z : tensor<8x8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @used_after_release(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  %a = dc.wait %f : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{released here}}
  dc.release %a : tensor<8x8xf32>
  // expected-error @+1 {{cannot plan this step: uses a gathered parameter after its dc.release}}
  %y = arith.addf %a, %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @nested(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %y = scf.execute_region -> tensor<8x8xf32> {
    // expected-error @+1 {{cannot plan this step: 'dc.gather_start' is nested in 'scf.execute_region'; dc schedules transfers only in the function body itself}}
    %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
    %a = dc.wait %f : !dc.future<tensor<8x8xf32>>
    %s = arith.addf %a, %x : tensor<8x8xf32>
    dc.release %a : tensor<8x8xf32>
    scf.yield %s : tensor<8x8xf32>
  }
  return %y : tensor<8x8xf32>
}

// -----

// expected-error @+1 {{cannot plan this step: 'blocks' has 2 blocks; dc plans straight-line steps (one block)}}
func.func @blocks(%x: tensor<8xf32>) -> tensor<8xf32> {
  cf.br ^next
^next:
  return %x : tensor<8xf32>
}

// -----

// expected-error @+1 {{cannot plan this step: argument #0 of 'dynamic' has the dynamically shaped type 'tensor<?xf32>'; dc plans static shapes}}
func.func @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}

// -----

func.func @dynamic_result(%x: tensor<8xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{cannot plan this step: result #0 has the dynamically shaped type 'tensor<?xf32>'; dc plans static shapes}}
  %c = tensor.cast %x : tensor<8xf32> to tensor<?xf32>
  return %c : tensor<?xf32>
}
