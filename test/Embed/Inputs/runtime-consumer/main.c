/* Joins a one-rank job on the backend DCRT_BACKEND names (host by default)
 * through the installed libdcrt and says which backend runs it. */
#include "dcrt/dcrt.h"

#include <stdio.h>

int main(void) {
  dcrt_init_options options = {0};
  options.struct_size = sizeof(options);
  options.backend = DCRT_BACKEND_AUTO;
  options.device = -1;
  dcrt_init(&options);
  printf("dcrt abi %d backend %s world %d\n", (int)dcrt_abi_version(),
         dcrt_backend_name(), (int)dcrt_world_size());
  dcrt_finalize();
  return 0;
}
