// RUN: dc-opt %s -split-input-file -verify-diagnostics

// dc.name, the name the artifact manifest gives an argument that is no
// parameter (the data): a non-empty string, on no #dc.param argument, and
// no two arguments of one function share it. The function's verifier
// rejects each case, on the function.

// expected-error @+1 {{'func.func' op argument #0: dc.name must be a non-empty string, got ""}}
func.func private @empty_name(tensor<4xf32> {dc.name = ""})

// -----

// expected-error @+1 {{'func.func' op argument #1: dc.name must be a non-empty string, got 3 : i64}}
func.func private @integer_name(tensor<4xf32> {dc.name = "x"}, tensor<4xi32> {dc.name = 3 : i64})

// -----

// A parameter is named by its #dc.param.
// expected-error @+1 {{'func.func' op argument #0: dc.name on a parameter; a parameter is named by its #dc.param}}
func.func private @named_param(tensor<4xf32> {dc.param = #dc.param<id = 0, name = "w">, dc.name = "w"})

// -----

// Even one whose #dc.param has no name.
// expected-error @+1 {{'func.func' op argument #1: dc.name on a parameter; a parameter is named by its #dc.param}}
func.func private @named_unnamed_param(tensor<4xf32> {dc.name = "x"}, tensor<4xf32> {dc.param = #dc.param<id = 0>, dc.name = "w"})

// -----

// The later argument is reported, naming the earlier.
// expected-error @+1 {{'func.func' op arguments #0 and #2 have the same dc.name "x"}}
func.func @same_name(%a: tensor<4xf32> {dc.name = "x"},
                     %b: tensor<4xf32> {dc.name = "y"},
                     %c: tensor<4xf32> {dc.name = "x"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
