// RUN: dc-opt %s --split-input-file --verify-diagnostics --dc-assign-step-arena -o /dev/null

// A manifest naming fewer results than the step has.
module {
  // expected-error @+1 {{the manifest's step 'step' has fewer than 2 results}}
  llvm.mlir.global internal constant @dc_manifest_json("{\22abi\22:4,\22plan\22:{\22step_arena_bytes\22:0},\22steps\22:[{\22name\22:\22step\22,\22entry\22:\22dc_entry_step\22,\22args\22:[],\22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22}]}]}\00") {addr_space = 0 : i32}
  func.func @step(%loss: memref<f32> {bufferize.result}, %grad: memref<64xf32> {bufferize.result}) {
    %cst = arith.constant 1.0 : f32
    linalg.fill ins(%cst : f32) outs(%grad : memref<64xf32>)
    linalg.fill ins(%cst : f32) outs(%loss : memref<f32>)
    return
  }
}

// -----

// A manifest without the step.
module {
  // expected-error @+1 {{the manifest has no results of step 'step'}}
  llvm.mlir.global internal constant @dc_manifest_json("{\22abi\22:4,\22plan\22:{\22step_arena_bytes\22:0},\22steps\22:[{\22name\22:\22other\22,\22entry\22:\22dc_entry_other\22,\22args\22:[],\22results\22:[]}]}\00") {addr_space = 0 : i32}
  func.func @step(%grad: memref<64xf32> {bufferize.result}) {
    %cst = arith.constant 1.0 : f32
    linalg.fill ins(%cst : f32) outs(%grad : memref<64xf32>)
    return
  }
}
