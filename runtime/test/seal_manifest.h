/*===- seal_manifest.h - the manifest checksum of hand-written artifacts ---===*
 *
 * dc-compile ends every manifest with "checksum": the FNV-1a 64-bit hash of
 * the text before that member, in 16 lowercase hex digits (dcrt.h), and
 * dc-run refuses a manifest whose text does not match it. The hand-written
 * test artifacts seal theirs the same way.
 *===----------------------------------------------------------------------===*/
#ifndef DC_TEST_SEAL_MANIFEST_H
#define DC_TEST_SEAL_MANIFEST_H

#include "dcrt/checksum.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Replaces the closing brace of the JSON object in `manifest` (of
 * `capacity` bytes) by the checksum member and the brace. */
static inline void sealManifest(char *manifest, size_t capacity) {
  size_t length = strlen(manifest);
  if (length == 0 || manifest[length - 1] != '}')
    return; /* not an object: dc-run says so when it parses it */
  uint64_t hash = dcrt_fnv1a64(DCRT_FNV1A64_SEED, manifest, length - 1);
  snprintf(manifest + length - 1, capacity - (length - 1),
           ",\"checksum\":\"%016llx\"}", (unsigned long long)hash);
}

#endif /* DC_TEST_SEAL_MANIFEST_H */
