/*
 * api_cxx_catch: int api_cxx_call_catching(void (*fn)(void *), void *arg) calls fn(arg)
 * and returns 0 if it returned, 1 if it threw std::bad_alloc (or a class derived from
 * it), which is then caught and destroyed: in C++,
 *
 *     try { fn(arg); } catch (const std::bad_alloc &) { return 1; } return 0;
 *
 * api_cxx.c needs this for the nothrow forms of operator new, which return null where
 * the throwing form would throw: when a new-handler throws, and when the program's own
 * operator new, which they call, throws. C has no catch. The frame carries what a C++
 * compiler would emit for it, written by hand after the Itanium C++ ABI's exception
 * handling chapter and the LSB's .eh_frame and LSDA formats: the C++ runtime's
 * personality routine (__gxx_personality_v0, libstdc++ and libc++abi alike) and an
 * exception table with one call site, the call of fn, whose landing pad catches one
 * type, std::bad_alloc. Every runtime symbol is a weak reference, like api_cxx.c's, so
 * the library needs no C++ runtime: without one the personality is null and the unwinder
 * treats the frame as one without handlers, and nothing can throw anyway. Only
 * std::bad_alloc is caught (the only exception operator new and a new-handler may
 * throw), so other exceptions, and the forced unwinding of a cancelled thread, pass
 * through untouched.
 *
 * Encodings (DWARF pointer encodings, as GCC uses them): the personality is
 * DW_EH_PE_indirect | pcrel | sdata4 (0x9b), a pc-relative offset to a word that holds
 * its address; the LSDA pointer is DW_EH_PE_pcrel | sdata4 (0x1b); the type table uses
 * 0x9b like the personality; call sites are ULEB128 (0x01) offsets from the function's
 * start. x86-64 and aarch64; api_cxx.c does without on other architectures.
 */
#include "config.h"

#if API_STANDARD_NAMES
#if defined(__x86_64__) || defined(__aarch64__)

	.weak	__gxx_personality_v0
	.weak	__cxa_begin_catch
	.weak	__cxa_end_catch
	.weak	_ZTISt9bad_alloc

	.text
	.p2align 4
	.globl	api_cxx_call_catching
	.hidden	api_cxx_call_catching
	.type	api_cxx_call_catching, %function
api_cxx_call_catching:
	.cfi_startproc
	.cfi_personality 0x9b, .Lpersonality
	.cfi_lsda 0x1b, .Llsda
#if defined(__x86_64__)
	subq	$8, %rsp		/* the call needs a 16-byte aligned stack */
	.cfi_def_cfa_offset 16
	movq	%rdi, %rax
	movq	%rsi, %rdi		/* fn(arg) */
.Lcall:
	call	*%rax
.Lcall_end:
	xorl	%eax, %eax
	addq	$8, %rsp
	.cfi_remember_state
	.cfi_def_cfa_offset 8
	ret
.Lcaught:				/* the personality routine puts the exception in %rax */
	.cfi_restore_state
	movq	%rax, %rdi
	call	__cxa_begin_catch@PLT
	call	__cxa_end_catch@PLT	/* destroys the exception */
	movl	$1, %eax
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
#else
	stp	x29, x30, [sp, -16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	mov	x16, x0
	mov	x0, x1			/* fn(arg) */
.Lcall:
	blr	x16
.Lcall_end:
	mov	w0, 0
	ldp	x29, x30, [sp], 16
	.cfi_remember_state
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
.Lcaught:				/* the personality routine puts the exception in x0 */
	.cfi_restore_state
	bl	__cxa_begin_catch
	bl	__cxa_end_catch		/* destroys the exception */
	mov	w0, 1
	ldp	x29, x30, [sp], 16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	ret
#endif
	.cfi_endproc
	.size	api_cxx_call_catching, . - api_cxx_call_catching

/* The exception table (LSDA) of api_cxx_call_catching. */
	.section .gcc_except_table, "a", %progbits
	.p2align 2
.Llsda:
	.byte	0xff			/* landing pads are relative to the function's start */
	.byte	0x9b			/* type table encoding */
	.uleb128 .Ltypes - .Ltypes_offset
.Ltypes_offset:
	.byte	0x01			/* call-site encoding: ULEB128 */
	.uleb128 .Lsites_end - .Lsites
.Lsites:
	.uleb128 .Lcall - api_cxx_call_catching		/* the call of fn... */
	.uleb128 .Lcall_end - .Lcall
	.uleb128 .Lcaught - api_cxx_call_catching	/* ...lands here... */
	.uleb128 1					/* ...for action record 1 */
.Lsites_end:
	.byte	1			/* action record 1: catch type 1, */
	.byte	0			/* and no other */
	.p2align 2
	.4byte	.Lbad_alloc_ref - .	/* type 1 (type indices count down from .Ltypes) */
.Ltypes:

/* The words the indirect encodings point to; the dynamic linker fills them in. */
	.section .data.rel.ro, "aw", %progbits
	.p2align 3
.Lpersonality:
	.8byte	__gxx_personality_v0
.Lbad_alloc_ref:
	.8byte	_ZTISt9bad_alloc

#endif
#endif

	.section .note.GNU-stack, "", %progbits
