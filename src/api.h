/*
 * api: hidden names of the malloc family's entry points, for the other front ends of this
 * library (api_cxx.c, C++'s operator new and delete). The exported names (lfh_malloc,
 * malloc, ...) may be interposed by another object, so a call to them from another file
 * goes through the PLT; these aliases are bound inside the library, so the call is direct.
 * They are the same code as the exported routines, so whatever a build adds to those (say
 * statistics or checks) applies to every front end alike. Only builds that define the
 * standard names have them (not LFHEAP_PREFIX_ONLY); the export table (api_exports.h)
 * lists them with the rest.
 */
#ifndef LFHEAP_API_H
#define LFHEAP_API_H

#include "common.h"

#include <stdbool.h>
#include <stddef.h>

#define API_INTERNAL __attribute__((visibility("hidden")))

void *api_malloc(size_t size) API_INTERNAL;
void *api_aligned_alloc(size_t alignment, size_t size) API_INTERNAL;
void api_free(void *ptr) API_INTERNAL;
void api_delete_instrumented(void *ptr, const char *operator_name, bool sized, size_t size,
                             size_t align) API_INTERNAL;

#endif
