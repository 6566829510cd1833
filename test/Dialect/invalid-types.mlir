// RUN: dc-opt %s -split-input-file -verify-diagnostics

// Verifiers of the dc types and attributes: each case is rejected while the
// type or attribute is parsed, at its own location.

// expected-error @+1 {{shard of a dynamically shaped tensor 'tensor<?x4xf32>' (dc needs static shapes)}}
func.func private @dynamic_shard(!dc.shard<tensor<?x4xf32>, @world[0], local = 2>)

// -----

// expected-error @+1 {{shard element type must be an integer or float, got 'complex<f32>'}}
func.func private @complex_shard(!dc.shard<tensor<8xcomplex<f32>>, @world[0], local = 4>)

// -----

// expected-error @+1 {{shard element type must be an integer or float, got 'index'}}
func.func private @index_shard(!dc.shard<tensor<8xindex>, @world[0], local = 4>)

// -----

// expected-error @+1 {{cannot shard 'tensor<0x4xf32>', which has no elements}}
func.func private @empty_shard(!dc.shard<tensor<0x4xf32>, @world[0], local = 1>)

// -----

// The element count alone would wrap here.
// expected-error @+1 {{'tensor<9223372036854775807x4xf32>' is too large: its size in bytes overflows int64_t}}
func.func private @huge_shard(!dc.shard<tensor<9223372036854775807x4xf32>, @world[0], local = 2>)

// -----

// 2^61 f32 elements are 2^63 bytes, one past int64_t.
// expected-error @+1 {{'tensor<2305843009213693952xf32>' is too large: its size in bytes overflows int64_t}}
func.func private @huge_bytes(!dc.shard<tensor<2305843009213693952xf32>, @world[0], local = 2>)

// -----

// One element fewer fits.
func.func private @largest_f32_shard(!dc.shard<tensor<2305843009213693951xf32>, @world[0], local = 2>)

// -----

// expected-error @+1 {{grid axis must be non-negative, got -1}}
func.func private @negative_axis(!dc.shard<tensor<8xf32>, @world[-1], local = 4>)

// -----

// expected-error @+1 {{grid axes must be increasing, each named once; got 1 before 0}}
func.func private @decreasing_axes(!dc.shard<tensor<8xf32>, @world[1, 0], local = 2>)

// -----

// expected-error @+1 {{grid axes must be increasing, each named once; got 0 before 0}}
func.func private @repeated_axis(!dc.shard<tensor<8xf32>, @world[0, 0], local = 2>)

// -----

// expected-error @+1 {{grid axis must be non-negative, got -1}}
func.func private @negative_second_axis(!dc.shard<tensor<8xf32>, @world[0, -1], local = 2>)

// -----

// expected-error @+1 {{local size must be positive, got 0}}
func.func private @zero_local(!dc.shard<tensor<8xf32>, @world[0], local = 0>)

// -----

// expected-error @+1 {{local size must be positive, got -4}}
func.func private @negative_local(!dc.shard<tensor<8xf32>, @world[0], local = -4>)

// -----

// expected-error @+1 {{local size 9 exceeds the tensor's 8 elements}}
func.func private @local_too_big(!dc.shard<tensor<2x4xf32>, @world[0], local = 9>)

// -----

// A shard may hold the whole tensor (an axis of size 1).
func.func private @local_is_whole(!dc.shard<tensor<2x4xf32>, @world[0], local = 8>)

// -----

// expected-error @+1 {{host value must be a statically shaped tensor or a !dc.shard, got 'f32'}}
func.func private @host_scalar(!dc.host<f32>)

// -----

// expected-error @+1 {{host value must be a statically shaped tensor or a !dc.shard, got 'tensor<?xf32>'}}
func.func private @host_dynamic(!dc.host<tensor<?xf32>>)

// -----

// expected-error @+1 {{host value must be a statically shaped tensor or a !dc.shard, got 'tensor<*xf32>'}}
func.func private @host_unranked(!dc.host<tensor<*xf32>>)

// -----

// expected-error @+1 {{host value must be a statically shaped tensor or a !dc.shard, got '!dc.host<tensor<4xf32>>'}}
func.func private @host_of_host(!dc.host<!dc.host<tensor<4xf32>>>)

// -----

// expected-error @+1 {{host value must be a statically shaped tensor or a !dc.shard, got '!dc.future<tensor<4xf32>>'}}
func.func private @host_of_future(!dc.host<!dc.future<tensor<4xf32>>>)

// -----

// expected-error @+1 {{future must hold a statically shaped tensor, a !dc.shard, a !dc.host value or a statically shaped identity-layout memref, got 'i32'}}
func.func private @future_scalar(!dc.future<i32>)

// -----

// expected-error @+1 {{future must hold a statically shaped tensor, a !dc.shard, a !dc.host value or a statically shaped identity-layout memref, got 'tensor<4x?xbf16>'}}
func.func private @future_dynamic(!dc.future<tensor<4x?xbf16>>)

// -----

// expected-error @+1 {{future must hold a statically shaped tensor, a !dc.shard, a !dc.host value or a statically shaped identity-layout memref, got '!dc.future<tensor<4xf32>>'}}
func.func private @future_of_future(!dc.future<!dc.future<tensor<4xf32>>>)

// -----

// expected-error @+1 {{future must hold a statically shaped tensor, a !dc.shard, a !dc.host value or a statically shaped identity-layout memref, got 'memref<4xf32, strided<[2]>>'}}
func.func private @future_strided_memref(!dc.future<memref<4xf32, strided<[2]>>>)

// -----

// The inner type is checked even when it is nested in a valid one; the
// enclosing types then fail to parse too.
// expected-error @+3 {{local size must be positive, got 0}}
// expected-error @+2 {{failed to parse DC_HostType parameter 'value'}}
// expected-error @+1 {{failed to parse DC_FutureType parameter 'value'}}
func.func private @future_of_bad_shard(!dc.future<!dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 0>>>)

// -----

// expected-error @+1 {{parameter id must be non-negative, got -1}}
func.func private @negative_param(tensor<4xf32> {dc.param = #dc.param<id = -1>})

// -----

// expected-error @+1 {{parameter id must be non-negative, got -3}}
func.func private @negative_named_param(tensor<4xf32> {dc.param = #dc.param<id = -3, name = "fc.bias">})

// -----

// expected-error @+1 {{parameter name must not be empty; omit it instead}}
func.func private @empty_param_name(tensor<4xf32> {dc.param = #dc.param<id = 0, name = "">})

// -----

// expected-error @+1 {{gradient must name a non-negative parameter id, got -2}}
func.func private @negative_grad() -> (tensor<4xf32> {dc.grad = #dc.grad<param = -2>})
