/* Stand-in for glibc's internal <malloc-size.h>: the size of a chunk-header word and the
   alignment mask derived from MALLOC_ALIGNMENT. */
#ifndef LFHEAP_PEERS_MALLOC_SIZE_H
#define LFHEAP_PEERS_MALLOC_SIZE_H

#include <stddef.h>

#include <malloc-alignment.h>

#define INTERNAL_SIZE_T   size_t
#define SIZE_SZ           (sizeof(INTERNAL_SIZE_T))
#define MALLOC_ALIGN_MASK (MALLOC_ALIGNMENT - 1)

#endif
