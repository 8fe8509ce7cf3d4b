/* Included first in every file of glibc's test harness and malloc tests that
   tests/peers/run.sh compiles outside glibc's build: the few definitions glibc's build
   gives every file of its own (through its internal headers), none of which applies to
   a program linked against the installed libc. */
#ifndef LFHEAP_PEERS_PRELUDE_H
#define LFHEAP_PEERS_PRELUDE_H

#include <errno.h>
#include <limits.h>

/* Symbol visibility inside libc.so: nothing to do in a program. */
#define libc_hidden_proto(name)
#define libc_hidden_def(name)
#define attribute_hidden

#define __set_errno(value) (errno = (value))

#endif
