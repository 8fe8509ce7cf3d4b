/*
 * park: the hook of the parking points (park.h). Compiled only into the parking variant
 * (mk/park.mk); the Makefile leaves this file out of every other build.
 */
#include "park.h"

#if !PARK_ENABLED
/* cppcheck-suppress preprocessorErrorDirective */
#error "park.c belongs to the parking variant only (-DLFHEAP_PARKING)"
#endif

#define PARK_NAME(point, name) name,
const char *const park_point_names[PARK_POINT_COUNT] = {PARK_POINTS(PARK_NAME)};

_Atomic(park_hook_fn) park_hook;
