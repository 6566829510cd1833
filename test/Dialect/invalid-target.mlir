// RUN: dc-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{memory_budget must be positive, got 0}}
module attributes {dc.target = #dc.target<name = "cpu", lowering = host, memory_budget = 0, numbers = {}>} {}

// -----

// expected-error @+1 {{target name must not be empty}}
module attributes {dc.target = #dc.target<name = "", lowering = host, memory_budget = 1, numbers = {}>} {}

// -----

// The numbers are those of the target's JSON form, checked by its parser.
// expected-error @+1 {{target numbers: unknown field "zzz" in target description}}
module attributes {dc.target = #dc.target<name = "x", lowering = host, memory_budget = 1, numbers = {zzz = 1 : i64}>} {}

// -----

// expected-error @+1 {{target numbers: missing fields "matmulFlops16"}}
module attributes {dc.target = #dc.target<name = "x", lowering = host, memory_budget = 1, numbers = {}>} {}

// -----

// expected-error @+1 {{target numbers: numbers must not repeat the parameter 'lowering'}}
module attributes {dc.target = #dc.target<name = "x", lowering = host, memory_budget = 1, numbers = {lowering = "host"}>} {}

// -----

// expected-error @+2 {{unknown lowering 'rocm' (host, cuda_sm90)}}
// expected-error @+1 {{failed to parse DC_TargetAttr parameter 'lowering'}}
module attributes {dc.target = #dc.target<name = "x", lowering = rocm, memory_budget = 1, numbers = {}>} {}

// -----

// expected-error @+1 {{'dc.target' must be a #dc.target, got "h200"}}
module attributes {dc.target = "h200"} {}

// -----

module {
  // expected-error @+1 {{'dc.target' belongs on a module, not on 'func.func'}}
  func.func @f() attributes {dc.target = 1 : i64} {
    return
  }
}
