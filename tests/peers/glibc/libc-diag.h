/* Stand-in for glibc's internal <libc-diag.h>: turning a compiler warning off around a
   few lines. The version argument (the newest GCC known to warn) only documents. */
#ifndef LFHEAP_PEERS_LIBC_DIAG_H
#define LFHEAP_PEERS_LIBC_DIAG_H

#define LFHEAP_PEERS_PRAGMA(text) _Pragma(#text)
#define DIAG_PUSH_NEEDS_COMMENT   _Pragma("GCC diagnostic push")
#define DIAG_POP_NEEDS_COMMENT    _Pragma("GCC diagnostic pop")
#define DIAG_IGNORE_NEEDS_COMMENT(version, option)                                                 \
    LFHEAP_PEERS_PRAGMA(GCC diagnostic ignored option)
#define DIAG_IGNORE_Os_NEEDS_COMMENT(version, option) DIAG_IGNORE_NEEDS_COMMENT(version, option)

/* Discard a result that a cast to void would not silence (warn_unused_result). */
#define ignore_value(expr)                                                                         \
    do {                                                                                           \
        __typeof__(expr) ignored_value_ = (expr);                                                  \
        (void)ignored_value_;                                                                      \
    } while (0)

#endif
