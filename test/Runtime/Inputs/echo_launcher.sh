#!/bin/sh
# Stands in for mpirun: shows how dc-run would start its ranks.
echo "launcher: $*"
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
