//===- DC.td - the whole dc dialect (for docs) -----------------*- tablegen -*-===//
include "dc/Dialect/DC/IR/DCOps.td"
include "dc/Dialect/DC/IR/DCAttentionOps.td"
include "dc/Dialect/DC/IR/DCExpertOps.td"
include "dc/Dialect/DC/IR/DCOptimizerOps.td"
