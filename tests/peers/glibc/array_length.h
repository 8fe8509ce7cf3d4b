/* Stand-in for glibc's internal <array_length.h>: the number of elements of an array. */
#ifndef LFHEAP_PEERS_ARRAY_LENGTH_H
#define LFHEAP_PEERS_ARRAY_LENGTH_H

#define array_length(array) (sizeof(array) / sizeof((array)[0]))
#define array_end(array)    (&(array)[array_length(array)])

#endif
