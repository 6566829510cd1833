/*===- checksum.h - the FNV-1a checksum of checkpoints and manifests -*- C
 * -*-===*
 *
 * The 64-bit FNV-1a hash: checkpoints' per-tensor checksums and the
 * manifest's seal (dcrt.h) are this function of their bytes. Header-only
 * and C, so that the compiler, dc-run and hand-written artifacts compute it
 * the same way.
 *===----------------------------------------------------------------------===*/
#ifndef DCRT_CHECKSUM_H
#define DCRT_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The hash of no bytes: where a checksum starts. */
#define DCRT_FNV1A64_SEED 0xcbf29ce484222325ull

/* The hash continued from `hash` over `bytes` more bytes at `data`. */
static inline uint64_t dcrt_fnv1a64(uint64_t hash, const void *data,
                                    size_t bytes) {
  const unsigned char *byte = (const unsigned char *)data;
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= byte[i];
    hash *= 0x100000001b3ull; /* the 64-bit FNV prime */
  }
  return hash;
}

#endif /* DCRT_CHECKSUM_H */
