/* Stand-in for the gnulib <intprops.h> that glibc's sources include: the integer-type
   limits and the overflow-checked arithmetic its test harness uses, on GCC's builtins. */
#ifndef LFHEAP_PEERS_INTPROPS_H
#define LFHEAP_PEERS_INTPROPS_H

#include <limits.h>

#define TYPE_SIGNED(type) (!((type)0 < (type)-1))
#define TYPE_WIDTH(type)  (sizeof(type) * CHAR_BIT)
#define TYPE_MINIMUM(type)                                                                         \
    ((type)(TYPE_SIGNED(type) ? ~(type)0 << (TYPE_WIDTH(type) - 1) : (type)0))
#define TYPE_MAXIMUM(type) ((type)~TYPE_MINIMUM(type))

/* Characters needed for the decimal form of a value of the integer type: 146/485 is
   just above log10(2); one more for the sign. */
#define INT_STRLEN_BOUND(type)                                                                     \
    ((TYPE_WIDTH(type) - TYPE_SIGNED(type)) * 146 / 485 + 1 + TYPE_SIGNED(type))
#define INT_BUFSIZE_BOUND(type) (INT_STRLEN_BOUND(type) + 1)

/* Store a op b in *r; true if the result did not fit. */
#define INT_ADD_WRAPV(a, b, r)      __builtin_add_overflow(a, b, r)
#define INT_SUBTRACT_WRAPV(a, b, r) __builtin_sub_overflow(a, b, r)
#define INT_MULTIPLY_WRAPV(a, b, r) __builtin_mul_overflow(a, b, r)
#define INT_ADD_OVERFLOW(a, b)      __builtin_add_overflow_p(a, b, (__typeof__((a) + (b)))0)
#define INT_SUBTRACT_OVERFLOW(a, b) __builtin_sub_overflow_p(a, b, (__typeof__((a) - (b)))0)
#define INT_MULTIPLY_OVERFLOW(a, b) __builtin_mul_overflow_p(a, b, (__typeof__((a) * (b)))0)

#endif
