//===- DC.td - the whole dc dialect (for docs) -----------------*- tablegen -*-===//
include "DC/DCOps.td"
include "DC/DCAttentionOps.td"
