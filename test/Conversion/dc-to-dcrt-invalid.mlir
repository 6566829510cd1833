// RUN: dc-opt %s --split-input-file --dc-to-dcrt --verify-diagnostics

func.func @wait_in_other_block(%w: memref<15xf32>, %c: i1) {
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<30xf32>>
  cf.cond_br %c, ^a, ^b
^a:
  // expected-error @+1 {{waits a future made outside its block; dc-to-dcrt needs each start op and its waits in one block}}
  %full = dc.wait %f : !dc.future<memref<30xf32>>
  dc.release %full : memref<30xf32>
  return
^b:
  return
}

// -----

// expected-error @+1 {{@dcrt_wait: names dcrt_* are reserved for the runtime}}
func.func private @dcrt_wait(i32)

// -----

shard.grid @world(shape = 2)

func.func @tensor_form(%g: tensor<16xf32>) {
  // expected-error @+1 {{failed to legalize operation 'dc.all_reduce_start'}}
  %f = dc.all_reduce_start average %g on @world[0] : tensor<16xf32>
  return
}

// -----

// A declaration of a dcrt function with another type than dcrt.h's.
// expected-error @+1 {{redefinition of reserved function 'dcrt_wait' of different type '!llvm.func<void (i32)>' is prohibited}}
llvm.func @dcrt_wait(i32)

func.func @wait_declared_wrong(%w: memref<15xf32>) {
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<30xf32>>
  // expected-error @+1 {{failed to legalize operation 'dc.wait' that was explicitly marked illegal}}
  %full = dc.wait %f : !dc.future<memref<30xf32>>
  dc.release %full : memref<30xf32>
  return
}

