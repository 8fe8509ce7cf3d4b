# lfheap build. `make` builds the release libraries; `make test` builds and runs every
# test; `make bench` runs the benchmark comparison. Components add their own rules in
# mk/*.mk (tests, benchmarks, extra variants) so that this file stays small.

CC      ?= gcc
ifeq ($(origin CC),default)
CC      := gcc
endif
CXX     ?= g++
PREFIX  ?= /usr/local
BUILD   := build

WARN    := -Wall -Wextra -Werror
# GNU C11: C11 plus the extensions lfheap relies on (__thread, attributes, and the
# __seg_fs address space of the thread-cache fast path, which strict -std=c11 disables).
CSTD    := -std=gnu11 -D_GNU_SOURCE
# -Wundef: the build switches are 0/1 values from src/config.h, tested with #if, so a
# switch tested where config.h is not included (or misspelt) is an error, not a silent 0.
# -fno-plt: lfheap's calls into libc go through the GOT, which the dynamic linker fills
# at load time, also in a program linked with liblfheap.a and lazy binding. Through the
# PLT, the first call of a libc function resolved it there and then, and glibc's
# resolver saves the CPU's whole extended state on the stack (about 11 KiB with AMX): a
# handler on an 8 KiB alternate stack whose call was the first to decommit a batch of
# runs overflowed it (allocating_handlers_fit_sigstksz in tests/test_signals.c).
# The libraries honour the usual CFLAGS, CPPFLAGS and LDFLAGS (a distribution's build flags,
# say): CFLAGS replaces the default optimisation and debug flags and may turn the stack
# protector back on; the flags after it are what lfheap needs to work (hidden internals,
# initial-exec TLS, -fno-plt) and cannot be overridden. -fno-lto among them: a link-time
# optimisation (-flto in a distribution's CFLAGS) generates the code again at the link, in
# .text, out of the section lfheap_text that the signal wrapper tells lfheap's code by, and
# a handler that allocated while its thread was inside malloc crashed (suite signals,
# one-code-section checks the library itself).
# Debug information in DWARF 4: valgrind 3.19 (Debian 12's) cannot read the DWARF 5 that
# clang 14 writes by default and gives up on the whole process, so a library or test
# built with CC=clang could not run under memcheck.
DEBUG_INFO := -g -gdwarf-4
CFLAGS  ?= -O2 $(DEBUG_INFO)
LDFLAGS ?=
LIBFLAGS := $(CSTD) $(WARN) -Wundef -fno-stack-protector $(CPPFLAGS) $(CFLAGS) -fPIC \
            -fvisibility=hidden -ftls-model=initial-exec -fno-semantic-interposition \
            -fno-math-errno -fno-plt -fno-lto -Iinclude -Isrc
# The ABI version: the shared libraries' sonames are liblfheap.so.$(ABI_VERSION) (and
# liblfheap-stats.so.$(ABI_VERSION), ...); it changes only when a change to include/*.h
# breaks programs linked with an earlier version.
VERSION     := 0.1.0
ABI_VERSION := 1
# src/park.c holds the hook of the test-only parking points (src/park.h): only the
# parking variants of mk/park.mk compile it.
LIB_SRC := $(filter-out src/park.c,$(wildcard src/*.c)) $(wildcard src/*.S)
LIB_HDR := $(wildcard src/*.h) $(wildcard include/*.h)

# Library variants: name, extra flags. The release one overrides malloc; "prefix" exports
# only the lfh_* names (for tests beside the system allocator and under sanitizers);
# "fault" adds the OS layer's failure injection (src/os.h) for the out-of-memory tests.
# The tests' variants assert lfheap's invariants (-DLFHEAP_CHECKS, src/invariant.h), as
# the debug builds do; "bench" is "prefix" without them, for the back-end benchmark.
# llheap's eight builds are {shared, static} x {release, stats, debug, stats-debug}:
# liblfheap{,-stats,-debug,-stats-debug}.{so,a} (`make variants`).
VARIANTS := release prefix tsan asan fault stats debug stats-debug secure bench
FLAGS_release :=
FLAGS_prefix  := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS
FLAGS_tsan    := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS -fsanitize=thread -O1
FLAGS_asan    := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS -fsanitize=address,undefined \
                 -fno-sanitize-recover=all -O1
FLAGS_bench   := -DLFHEAP_PREFIX_ONLY
FLAGS_stats   := -DLFHEAP_STATS
FLAGS_debug   := -DLFHEAP_DEBUG
FLAGS_stats-debug := -DLFHEAP_STATS -DLFHEAP_DEBUG
# The hardened build (src/secure.h): build/liblfheap-secure.{so,a}.
FLAGS_secure  := -DLFHEAP_SECURE
LLHEAP_VARIANTS := $(foreach v,stats debug stats-debug secure,$(BUILD)/liblfheap-$(v).so $(BUILD)/liblfheap-$(v).a)
FLAGS_fault   := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS -DLFHEAP_FAULT_INJECTION

# The release objects' code goes into one section, lfheap_text, so that all of lfheap's
# code is one address range (__start_lfheap_text .. __stop_lfheap_text): the signal
# wrapper tells from the interrupted instruction whether it interrupted lfheap
# (src/sigwrap.c). Every .text* section (.text.unlikely holds the cold parts) is renamed.
TEXT_release = objcopy $$(objdump -h $@ | awk '$$2 ~ /^\.text/ {printf "--rename-section %s=lfheap_text ", $$2}') $@
TEXT_stats = $(TEXT_release)
TEXT_debug = $(TEXT_release)
TEXT_stats-debug = $(TEXT_release)
TEXT_secure = $(TEXT_release)

define variant_rules
$(BUILD)/obj/$(1)/%.o: src/%.c $(LIB_HDR) Makefile $(BUILD)/lib-flags
	@mkdir -p $$(@D)
	$$(CC) $$(LIBFLAGS) $$(FLAGS_$(1)) -c $$< -o $$@
	$$(TEXT_$(1))
$(BUILD)/obj/$(1)/%.o: src/%.S $(LIB_HDR) Makefile $(BUILD)/lib-flags
	@mkdir -p $$(@D)
	$$(CC) $$(LIBFLAGS) $$(FLAGS_$(1)) -c $$< -o $$@
	$$(TEXT_$(1))
OBJS_$(1) := $$(patsubst src/%,$(BUILD)/obj/$(1)/%.o,$$(basename $$(LIB_SRC)))
endef
$(foreach v,$(VARIANTS),$(eval $(call variant_rules,$(v))))
# C++ exceptions unwind through the frames of operator new (src/api_cxx.c).
# api_cxx.c: -fsemantic-interposition, so that its calls of the base operators go through
# the GOT, to a program's replacements (the comment before cxx_new_array).
$(foreach v,$(VARIANTS),$(BUILD)/obj/$(v)/api_cxx.o): LIBFLAGS += -fexceptions \
    -fsemantic-interposition


.SECONDEXPANSION:
# Keep intermediate libraries and objects between runs.
.SECONDARY:
.PHONY: all test test-bins test-long test-long-variants lint install uninstall clean bench bench-full fastpath variants
all: $(BUILD)/liblfheap.so $(BUILD)/liblfheap.a

variants: all $(LLHEAP_VARIANTS)

# build/lib-flags holds the compiler and flags the libraries were built with, rewritten
# when they change, so that `make CFLAGS=...` after an earlier build rebuilds them.
LIB_BUILD_FLAGS := $(CC) $(LIBFLAGS) $(LDFLAGS)
ifneq ($(file <$(BUILD)/lib-flags),$(LIB_BUILD_FLAGS))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD)/lib-flags,$(LIB_BUILD_FLAGS))
endif
$(BUILD)/lib-flags: ;

# Each shared library is built as build/NAME.so, with the soname NAME.so.$(ABI_VERSION)
# and a link of that name beside it, which programs linked with -llfheap load.
$(BUILD)/liblfheap.so: $(OBJS_release)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,liblfheap.so.$(ABI_VERSION) -Wl,-z,now -o $@ $^ -lpthread
	ln -sf liblfheap.so $@.$(ABI_VERSION)

$(BUILD)/liblfheap-%.so: $$(OBJS_$$*)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,liblfheap-$*.so.$(ABI_VERSION) -Wl,-z,now -o $@ $^ \
	    -lpthread
	ln -sf liblfheap-$*.so $@.$(ABI_VERSION)

# The release archives hold one object, all of the library's objects linked into one with
# `ld -r`, so that a program referencing any of lfheap's names (its own malloc and free,
# say) gets all of them, as it would from liblfheap.so. An archive of one member per
# object gives the program only the members its own calls need: a shared library it
# links would find posix_memalign, mallinfo, sigaction, ... in glibc instead, take
# blocks from glibc's heap that lfheap's free cannot take back, and install signal
# handlers unwrapped (tests/test_static_archive.c). Its internal names (hidden: buddy_alloc,
# out_str, pagemap, ...) are made local to that object, so that they cannot clash with a
# program's own names, as they cannot in the shared library. Its C++ operators are made
# weak: C++ lets a program replace any of them with its own, which the dynamic linker
# prefers to the shared library's, but beside the archive's strong ones the link failed
# (multiple definition of operator new); the program's own now win, and the forms it
# does not define stay lfheap's. The prefix-only variants of the tests override nothing,
# and keep their objects apart.
$(BUILD)/obj/all-%/lfheap.o: $$(OBJS_$$*)
	@mkdir -p $(@D)
	$(LD) -r -o $@ $^
	objcopy --localize-hidden --wildcard --weaken-symbol='_Zn[wa]m*' \
	    --weaken-symbol='_Zd[la]Pv*' $@

$(BUILD)/liblfheap.a: $(BUILD)/obj/all-release/lfheap.o
	rm -f $@ && ar rcs $@ $^

$(filter %.a,$(LLHEAP_VARIANTS)): $(BUILD)/liblfheap-%.a: $(BUILD)/obj/all-%/lfheap.o
	rm -f $@ && ar rcs $@ $^

$(BUILD)/liblfheap-%.a: $$(OBJS_$$*)
	rm -f $@ && ar rcs $@ $^

# Test programs. tests/NAME.c becomes:
#   build/t/NAME       linked with the prefixed static library (lfh_* API, internals)
#   build/t-tsan/NAME  the same under ThreadSanitizer
#   build/t-asan/NAME  the same under AddressSanitizer + UBSan
#   build/t-plain/NAME plain program calling malloc, run with LD_PRELOAD
#   build/t-fault/NAME with the failure-injection library (rules in mk/oom.mk)
# -fno-builtin: a compiler that knows malloc may leave out a call whose block is only
# compared with NULL (clang does), and then no request reaches the allocator under test.
TEST_CFLAGS := $(CSTD) $(WARN) -O1 $(DEBUG_INFO) -fno-builtin -Iinclude -Isrc -pthread
$(BUILD)/t/%: tests/%.c $(BUILD)/liblfheap-prefix.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/liblfheap-prefix.a -lm
$(BUILD)/t-tsan/%: tests/%.c $(BUILD)/liblfheap-tsan.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -fsanitize=thread $< -o $@ $(BUILD)/liblfheap-tsan.a -lm
$(BUILD)/t-asan/%: tests/%.c $(BUILD)/liblfheap-asan.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -fsanitize=address,undefined $< -o $@ $(BUILD)/liblfheap-asan.a -lm
$(BUILD)/t-plain/%: tests/%.c $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN $< -o $@ -lm

# Components append the binaries their test suites need to TEST_BINS.
TEST_BINS :=
include $(wildcard mk/*.mk)

# One compile per CPU for a sub-make, unless the command line chose (-j).
PARALLEL = $$(case " $(MAKEFLAGS) " in *" -j"*) ;; *) echo -j$$(nproc 2>/dev/null || echo 1) ;; esac)

# Builds in parallel, then runs the suites side by side (tests/run.sh).
test:
	$(MAKE) $(PARALLEL) test-bins
	bash tests/run.sh

# Every library and test program, built and not run (`make lint` builds them with clang).
test-bins: all $(TEST_BINS)

# Everything `make test` runs, plus the suites' long variants (LFHEAP_TEST_LONG).
# The long variants are stress runs sized for the whole machine: one suite at a time.
test-long: all $(TEST_BINS)
	LFHEAP_TEST_LONG=1 LFHEAP_TEST_JOBS=1 bash tests/run.sh

# Only the suites that have long variants, in their long form: what `make test-long` adds
# to `make test` (CI runs it after `make test`).
test-long-variants: all $(TEST_BINS)
	LFHEAP_TEST_LONG=1 LFHEAP_TEST_JOBS=1 bash tests/run.sh park signals

# Other allocators' own tests (glibc's malloc tests, mimalloc's and gperftools') under
# lfheap's release, debug and secure builds, against tests/peers/expected.txt
# (docs/PEER_TESTS.md). Not part of `make test`: it fetches their sources (network) and
# takes minutes. PEER_ARGS passes options to tests/peers/run.sh (e.g. --work DIR).
PEER_ARGS ?=
.PHONY: peer-tests
peer-tests: $(BUILD)/liblfheap.so $(BUILD)/liblfheap-debug.so $(BUILD)/liblfheap-secure.so
	bash tests/peers/run.sh $(PEER_ARGS)

# tests/layers.sh fails on an #include in src/ that goes up the layer stack (the order is
# written there once). cppcheck checks only the configuration its -D options name: one run per set of defines
# a library variant is compiled with (FLAGS_*, and the parking variants of mk/park.mk),
# each set written with + for spaces.
LINT_CONFIGS = $(sort $(foreach v,$(VARIANTS) $(PARK_VARIANTS),$(subst $(space),+,$(strip \
                   -D__GNUC__ -D__x86_64__ $(filter -D%,$(FLAGS_$(v)))))))
space := $(subst ,, )
lint:
	bash tests/layers.sh
	$(MAKE) --no-print-directory -s $(PARALLEL) CC=clang BUILD=$(BUILD)/lint-clang test-bins
	clang-format --dry-run -Werror src/*.c src/*.h include/*.h tests/*.c tests/*.cc tests/*.h \
	    bench/*.c bench/*.cc bench/*.h
	for config in $(LINT_CONFIGS); do \
	    echo "cppcheck $$config"; \
	    cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
	        --suppress=missingIncludeSystem $$(echo "$$config" | tr + ' ') -Iinclude -Isrc src || \
	        exit 1; \
	done

# Each shared library goes in as NAME.so.$(VERSION), with the links NAME.so.$(ABI_VERSION)
# (its soname, which programs load) and NAME.so (which -llfheap finds).
LIBDIR ?= $(PREFIX)/lib
install: variants
	install -d "$(DESTDIR)$(LIBDIR)" "$(DESTDIR)$(PREFIX)/include" "$(DESTDIR)$(LIBDIR)/pkgconfig"
	for so in $(BUILD)/liblfheap.so $(filter %.so,$(LLHEAP_VARIANTS)); do \
	    name=$$(basename "$$so"); \
	    install -m 755 "$$so" "$(DESTDIR)$(LIBDIR)/$$name.$(VERSION)" && \
	    ln -sf "$$name.$(VERSION)" "$(DESTDIR)$(LIBDIR)/$$name.$(ABI_VERSION)" && \
	    ln -sf "$$name.$(ABI_VERSION)" "$(DESTDIR)$(LIBDIR)/$$name" || exit 1; \
	done
	install -m 644 $(BUILD)/liblfheap.a $(filter %.a,$(LLHEAP_VARIANTS)) "$(DESTDIR)$(LIBDIR)/"
	install -m 644 include/lfheap.h include/lfheap_buddy.h "$(DESTDIR)$(PREFIX)/include/"
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    lfheap.pc.in > "$(DESTDIR)$(LIBDIR)/pkgconfig/lfheap.pc"

# Removes what install put in (the same PREFIX, LIBDIR and DESTDIR), and nothing else.
uninstall:
	for name in liblfheap $(patsubst $(BUILD)/%.so,%,$(filter %.so,$(LLHEAP_VARIANTS))); do \
	    rm -f "$(DESTDIR)$(LIBDIR)/$$name.so" "$(DESTDIR)$(LIBDIR)/$$name.so.$(ABI_VERSION)" \
	        "$(DESTDIR)$(LIBDIR)/$$name.so.$(VERSION)" "$(DESTDIR)$(LIBDIR)/$$name.a"; \
	done
	rm -f "$(DESTDIR)$(PREFIX)/include/lfheap.h" "$(DESTDIR)$(PREFIX)/include/lfheap_buddy.h" \
	    "$(DESTDIR)$(LIBDIR)/pkgconfig/lfheap.pc"

clean:
	rm -rf $(BUILD)
