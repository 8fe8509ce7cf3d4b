/*
 * api_cxx: C++'s replaceable global allocation functions (every operator new and delete
 * of C++17 and C++20: plain, array, nothrow, aligned, sized), so that a C++ program that
 * preloads or links lfheap gets all its objects from lfheap. The operators are thin:
 * new is one direct call of the malloc family (api.h) and a test for NULL, delete is a
 * jump to free; only out of memory goes further.
 *
 * Why C: the library builds with a C compiler alone, and a C program that preloads it
 * must not load a C++ runtime. So the operators are C functions exported under their
 * Itanium-ABI mangled names (aliases with asm labels; the names spell size_t as unsigned
 * long, as on x86-64 and aarch64), and the C++ runtime is reached only through weak
 * references to two functions that libstdc++ and libc++/libc++abi both export under the
 * same names (they live in namespace std, outside libc++'s versioned namespace):
 * std::get_new_handler() (libstdc++ since GCC 4.9) and std::__throw_bad_alloc(). A weak
 * reference adds no NEEDED entry; the dynamic linker binds it when it loads lfheap, to
 * the runtime if the program has one in its global scope, and to null otherwise.
 *
 * Out of memory follows the standard ([new.delete.single]): while the allocation fails,
 * call the installed new-handler and try again; with none (left), the throwing forms
 * throw std::bad_alloc and the nothrow forms return null, as if they had called the
 * throwing form and caught the exception. So a new-handler that throws std::bad_alloc in
 * a nothrow form, and a program's replacement of the throwing form that a nothrow form
 * calls, must be caught, which C cannot do: those calls go through
 * api_cxx_call_catching (api_cxx_catch.S), one frame whose hand-written exception table
 * says `catch (const std::bad_alloc &)`. The other frames need no catch: the file is
 * compiled with -fexceptions, so its frames have unwind tables and exceptions from the
 * handler or from __throw_bad_alloc unwind through them (there is nothing to clean up).
 * Without a C++ runtime no handler can have been installed, and a throwing form that
 * cannot throw writes a message and aborts. That happens to a C program calling the
 * mangled names; to C++ code that a C program loads with dlopen after start-up (its C++
 * plugins, Python's extension modules), whose runtime came after the references were
 * bound, so that its new-handler is not seen either (finding that runtime later would
 * take the dynamic linker's lock); and to a static link whose libstdc++.a pulls in no
 * __throw_bad_alloc (weak references pull in no archive member).
 *
 * Every delete frees the block, which free finds through the page map (the builds that
 * check pointers check the size and alignment given, too): correct for any block lfheap
 * handed out, whatever size or alignment it is given. The forms the standard defines by
 * others (operator new[], the nothrow news, the array, sized and nothrow deletes) call
 * the base forms through the GOT, so that a program's replacements of those get them
 * (the comment before cxx_new_array). An alignment that is not a power of two (undefined
 * in C++) fails at once, without the new-handler, as libstdc++ does.
 * Defined only in builds that define the standard names.
 */
#include "config.h"

#if API_STANDARD_NAMES

#include "api.h"
#include "common.h"
#include "platform.h"

#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

_Static_assert(_Generic((size_t)0, unsigned long : 1, default : 0),
               "the mangled names below spell size_t as unsigned long (m)");

typedef void (*cxx_new_handler)(void);

/* The C++ runtime's, when the process has one; null otherwise. */
extern cxx_new_handler cxx_get_new_handler(void) __asm__("_ZSt15get_new_handlerv")
    __attribute__((weak, visibility("default")));
extern void cxx_throw_bad_alloc(void) __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak, noreturn, visibility("default")));

#if defined(__x86_64__) || defined(__aarch64__)
/* Calls fn(arg): 0 if it returned, 1 if it threw std::bad_alloc, which is then caught. */
int api_cxx_call_catching(void (*fn)(void *), void *arg) API_INTERNAL;
#else
/* No catching frame for this architecture in api_cxx_catch.S: std::bad_alloc leaves a
 * nothrow form instead of making it return null. */
static int api_cxx_call_catching(void (*fn)(void *), void *arg)
{
    fn(arg);
    return 0;
}
#endif

static void cxx_run_handler(void *handler)
{
    (*(cxx_new_handler *)handler)();
}

/* What the slow path needs to know about the form that failed. */
#define CXX_NOTHROW 1u /* returns null instead of throwing */
#define CXX_ALIGNED 2u /* takes an alignment */

static LFH_NOINLINE __attribute__((noreturn)) void cxx_bad_alloc(void)
{
    if (cxx_throw_bad_alloc)
        cxx_throw_bad_alloc();
    static const char msg[] = "lfheap: operator new: out of memory, and no C++ runtime to "
                              "throw std::bad_alloc\n";
    platform_write(STDERR_FILENO, msg, sizeof msg - 1);
    abort();
}

/* The standard's loop after a failed allocation: the block, or NULL (nothrow forms) once
 * no new-handler is installed. */
static LFH_NOINLINE void *cxx_retry(size_t size, size_t align, unsigned form)
{
    if (!(form & CXX_ALIGNED) || (align != 0 && (align & (align - 1)) == 0)) {
        cxx_new_handler handler;
        while (cxx_get_new_handler && (handler = cxx_get_new_handler()) != NULL) {
            if (!(form & CXX_NOTHROW))
                handler();
            else if (api_cxx_call_catching(cxx_run_handler, &handler) != 0)
                return NULL;
            void *block = (form & CXX_ALIGNED) ? api_aligned_alloc(align, size) : api_malloc(size);
            if (block)
                return block;
        }
    }
    if (!(form & CXX_NOTHROW))
        cxx_bad_alloc();
    return NULL;
}

/* ---- the base forms ----------------------------------------------------------------- */

/* What lfheap's operator new of the given form returns (`form` a constant, so each
 * operator compiles to its one call and test); new(0) gets a unique block, like
 * malloc(0). */
LFH_INLINE void *cxx_alloc(size_t size, size_t align, unsigned form)
{
    void *block = (form & CXX_ALIGNED) ? api_aligned_alloc(align, size) : api_malloc(size);
    return LFH_LIKELY(block != NULL) ? block : cxx_retry(size, align, form);
}

static void *cxx_new(size_t size)
{
    return cxx_alloc(size, 0, 0);
}

static void *cxx_new_aligned(size_t size, size_t align)
{
    return cxx_alloc(size, align, CXX_ALIGNED);
}

/* Every delete frees the block; only the builds that check pointers read the size and
 * alignment (an alignment of 0 is no power of two: the check reports it as wrong), and
 * they name the operator in their reports. */
LFH_INLINE void delete_block(const char *operator_name, void *ptr, bool sized, size_t size,
                             size_t align)
{
    if (API_INSTRUMENTED)
        api_delete_instrumented(ptr, operator_name, sized, size, align);
    else
        api_free(ptr);
}

static void cxx_delete(void *ptr)
{
    delete_block("operator delete", ptr, false, 0, 0);
}

static void cxx_delete_aligned(void *ptr, size_t align)
{
    delete_block("operator delete", ptr, false, 0, align ? align : 1);
}

/* ---- their mangled names ------------------------------------------------------------ */

#define CXX_OPERATOR(mangled, target)                                                              \
    extern __typeof(target) cxx_operator_##mangled __asm__(#mangled)                               \
        __attribute__((alias(#target), visibility("default")))

/* operator new (size_t), (size_t, std::align_val_t) */
CXX_OPERATOR(_Znwm, cxx_new);
CXX_OPERATOR(_ZnwmSt11align_val_t, cxx_new_aligned);
/* operator delete (void *), (void *, std::align_val_t) */
CXX_OPERATOR(_ZdlPv, cxx_delete);
CXX_OPERATOR(_ZdlPvSt11align_val_t, cxx_delete_aligned);

/* ---- the forms the standard defines by others ---------------------------------------- */

/* operator new[] calls operator new, the nothrow forms of new call the throwing ones,
 * and every other delete calls operator delete or operator delete[] ([new.delete]): a
 * program that replaces a base form (a leak counter replaces operator new and operator
 * delete) gets the calls of the forms it leaves to lfheap too, as with the C++ runtime's
 * own operators, and frees through its own operator delete what its operator new made.
 * So these call the base forms by their exported names, which this file (compiled with
 * -fsemantic-interposition, Makefile) reaches through the GOT: it holds the program's
 * replacement if there is one (the dynamic linker looks in the program first; the static
 * archive's operators are weak), else lfheap's own. In the release build that is one
 * more jump (a nothrow new compares the GOT's entry with lfheap's own instead); the
 * builds that check pointers keep their checks of the size and alignment, and name the
 * operator in their reports, while the base form is lfheap's own. */
#define CXX_BASE_IS_OWN(base, own) ((void *)&(base) == (void *)&(own))

static void *cxx_new_array(size_t size)
{
    return cxx_operator__Znwm(size);
}

static void *cxx_new_array_aligned(size_t size, size_t align)
{
    return cxx_operator__ZnwmSt11align_val_t(size, align);
}

/* delete[] (void *) calls delete (void *); its sized and nothrow forms call it. */
static void cxx_delete_array(void *ptr)
{
    if (API_INSTRUMENTED && CXX_BASE_IS_OWN(cxx_operator__ZdlPv, cxx_delete))
        delete_block("operator delete[]", ptr, false, 0, 0);
    else
        cxx_operator__ZdlPv(ptr);
}

static void cxx_delete_array_aligned(void *ptr, size_t align)
{
    if (API_INSTRUMENTED && CXX_BASE_IS_OWN(cxx_operator__ZdlPvSt11align_val_t, cxx_delete_aligned))
        delete_block("operator delete[]", ptr, false, 0, align ? align : 1);
    else
        cxx_operator__ZdlPvSt11align_val_t(ptr, align);
}

CXX_OPERATOR(_Znam, cxx_new_array);
CXX_OPERATOR(_ZnamSt11align_val_t, cxx_new_array_aligned);
CXX_OPERATOR(_ZdaPv, cxx_delete_array);
CXX_OPERATOR(_ZdaPvSt11align_val_t, cxx_delete_array_aligned);

/* A nothrow new returns what its throwing form returns, or null where that throws
 * std::bad_alloc ([new.delete.single]). While the throwing form is lfheap's own, it
 * allocates as that would and returns null where that would throw; else it calls it in
 * api_cxx_call_catching's frame, which catches (api_cxx_catch.S). */
struct cxx_nothrow_call {
    void *(*plain)(size_t);           /* the throwing form: this one, or... */
    void *(*aligned)(size_t, size_t); /* ...this one */
    size_t size, align;
    void *block; /* what it returned */
};

static void cxx_call_throwing_form(void *arg)
{
    struct cxx_nothrow_call *call = arg;
    call->block = call->plain ? call->plain(call->size) : call->aligned(call->size, call->align);
}

static LFH_NOINLINE void *cxx_new_nothrow_by(void *(*plain)(size_t),
                                             void *(*aligned)(size_t, size_t), size_t size,
                                             size_t align)
{
    struct cxx_nothrow_call call = {plain, aligned, size, align, NULL};
    return api_cxx_call_catching(cxx_call_throwing_form, &call) == 0 ? call.block : NULL;
}

static void *cxx_new_nothrow(size_t size, const void *nothrow_tag)
{
    (void)nothrow_tag;
    if (LFH_LIKELY(CXX_BASE_IS_OWN(cxx_operator__Znwm, cxx_new)))
        return cxx_alloc(size, 0, CXX_NOTHROW);
    return cxx_new_nothrow_by(cxx_operator__Znwm, NULL, size, 0);
}

static void *cxx_new_array_nothrow(size_t size, const void *nothrow_tag)
{
    (void)nothrow_tag;
    if (LFH_LIKELY(CXX_BASE_IS_OWN(cxx_operator__Znam, cxx_new_array) &&
                   CXX_BASE_IS_OWN(cxx_operator__Znwm, cxx_new)))
        return cxx_alloc(size, 0, CXX_NOTHROW);
    return cxx_new_nothrow_by(cxx_operator__Znam, NULL, size, 0);
}

static void *cxx_new_aligned_nothrow(size_t size, size_t align, const void *nothrow_tag)
{
    (void)nothrow_tag;
    if (LFH_LIKELY(CXX_BASE_IS_OWN(cxx_operator__ZnwmSt11align_val_t, cxx_new_aligned)))
        return cxx_alloc(size, align, CXX_ALIGNED | CXX_NOTHROW);
    return cxx_new_nothrow_by(NULL, cxx_operator__ZnwmSt11align_val_t, size, align);
}

static void *cxx_new_array_aligned_nothrow(size_t size, size_t align, const void *nothrow_tag)
{
    (void)nothrow_tag;
    if (LFH_LIKELY(CXX_BASE_IS_OWN(cxx_operator__ZnamSt11align_val_t, cxx_new_array_aligned) &&
                   CXX_BASE_IS_OWN(cxx_operator__ZnwmSt11align_val_t, cxx_new_aligned)))
        return cxx_alloc(size, align, CXX_ALIGNED | CXX_NOTHROW);
    return cxx_new_nothrow_by(NULL, cxx_operator__ZnamSt11align_val_t, size, align);
}

/* (size_t, const std::nothrow_t &), (size_t, std::align_val_t, const std::nothrow_t &) */
CXX_OPERATOR(_ZnwmRKSt9nothrow_t, cxx_new_nothrow);
CXX_OPERATOR(_ZnamRKSt9nothrow_t, cxx_new_array_nothrow);
CXX_OPERATOR(_ZnwmSt11align_val_tRKSt9nothrow_t, cxx_new_aligned_nothrow);
CXX_OPERATOR(_ZnamSt11align_val_tRKSt9nothrow_t, cxx_new_array_aligned_nothrow);

static void cxx_delete_nothrow(void *ptr, const void *nothrow_tag)
{
    (void)nothrow_tag;
    cxx_operator__ZdlPv(ptr);
}

static void cxx_delete_array_nothrow(void *ptr, const void *nothrow_tag)
{
    (void)nothrow_tag;
    cxx_operator__ZdaPv(ptr);
}

static void cxx_delete_aligned_nothrow(void *ptr, size_t align, const void *nothrow_tag)
{
    (void)nothrow_tag;
    cxx_operator__ZdlPvSt11align_val_t(ptr, align);
}

static void cxx_delete_array_aligned_nothrow(void *ptr, size_t align, const void *nothrow_tag)
{
    (void)nothrow_tag;
    cxx_operator__ZdaPvSt11align_val_t(ptr, align);
}

static void cxx_delete_sized(void *ptr, size_t size)
{
    if (API_INSTRUMENTED && CXX_BASE_IS_OWN(cxx_operator__ZdlPv, cxx_delete))
        delete_block("operator delete", ptr, true, size, 0);
    else
        cxx_operator__ZdlPv(ptr);
}

static void cxx_delete_array_sized(void *ptr, size_t size)
{
    if (API_INSTRUMENTED && CXX_BASE_IS_OWN(cxx_operator__ZdaPv, cxx_delete_array) &&
        CXX_BASE_IS_OWN(cxx_operator__ZdlPv, cxx_delete))
        delete_block("operator delete[]", ptr, true, size, 0);
    else
        cxx_operator__ZdaPv(ptr);
}

static void cxx_delete_aligned_sized(void *ptr, size_t size, size_t align)
{
    if (API_INSTRUMENTED && CXX_BASE_IS_OWN(cxx_operator__ZdlPvSt11align_val_t, cxx_delete_aligned))
        delete_block("operator delete", ptr, true, size, align ? align : 1);
    else
        cxx_operator__ZdlPvSt11align_val_t(ptr, align);
}

static void cxx_delete_array_aligned_sized(void *ptr, size_t size, size_t align)
{
    if (API_INSTRUMENTED &&
        CXX_BASE_IS_OWN(cxx_operator__ZdaPvSt11align_val_t, cxx_delete_array_aligned) &&
        CXX_BASE_IS_OWN(cxx_operator__ZdlPvSt11align_val_t, cxx_delete_aligned))
        delete_block("operator delete[]", ptr, true, size, align ? align : 1);
    else
        cxx_operator__ZdaPvSt11align_val_t(ptr, align);
}

/* (void *, const std::nothrow_t &) */
CXX_OPERATOR(_ZdlPvRKSt9nothrow_t, cxx_delete_nothrow);
CXX_OPERATOR(_ZdaPvRKSt9nothrow_t, cxx_delete_array_nothrow);
/* (void *, std::align_val_t, const std::nothrow_t &) */
CXX_OPERATOR(_ZdlPvSt11align_val_tRKSt9nothrow_t, cxx_delete_aligned_nothrow);
CXX_OPERATOR(_ZdaPvSt11align_val_tRKSt9nothrow_t, cxx_delete_array_aligned_nothrow);
/* (void *, size_t) */
CXX_OPERATOR(_ZdlPvm, cxx_delete_sized);
CXX_OPERATOR(_ZdaPvm, cxx_delete_array_sized);
/* (void *, size_t, std::align_val_t) */
CXX_OPERATOR(_ZdlPvmSt11align_val_t, cxx_delete_aligned_sized);
CXX_OPERATOR(_ZdaPvmSt11align_val_t, cxx_delete_array_aligned_sized);

#endif
