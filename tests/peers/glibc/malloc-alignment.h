/* Stand-in for glibc's internal <malloc-alignment.h>: the alignment glibc's malloc
   guarantees on x86-64 (that of long double), which every malloc must give. */
#ifndef LFHEAP_PEERS_MALLOC_ALIGNMENT_H
#define LFHEAP_PEERS_MALLOC_ALIGNMENT_H

#define MALLOC_ALIGNMENT                                                                           \
    (__alignof__(long double) > 2 * sizeof(size_t) ? __alignof__(long double) : 2 * sizeof(size_t))

#endif
