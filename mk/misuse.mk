# The misuse collection (issue 12, docs/HARDENING.md): tests/misuse.c, one program whose
# argument names a heap misuse, and the runner tests/misuse.sh that runs every case under
# each allocator preloaded and prints which allocator stops which misuse.
#   build/t-plain/misuse   the cases, run by tests/misuse.sh and tests/suites/misuse.sh
#   make misuse            the table over glibc, jemalloc, tcmalloc, mimalloc and lfheap's
#                          release, debug and secure builds; installs
#                          the Debian peers first when run as root. MISUSE_ARGS passes
#                          extra options or allocators to the runner.

# -O0 -fno-builtin: the compiler must neither drop a misuse nor replace a call with its
# own idea of malloc or memset. A specific rule, so it wins over the -O1 pattern rule.
$(BUILD)/t-plain/misuse: tests/misuse.c mk/misuse.mk
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O0 -fno-builtin $(DEBUG_INFO) -pthread $< -o $@

TEST_BINS += $(BUILD)/t-plain/misuse $(BUILD)/liblfheap-debug.so $(BUILD)/liblfheap-secure.so

MISUSE_ALLOCATORS := glibc jemalloc tcmalloc mimalloc lfheap lfheap-debug lfheap-secure
MISUSE_ARGS ?=

.PHONY: misuse
misuse: $(BUILD)/liblfheap.so $(BUILD)/liblfheap-debug.so $(BUILD)/liblfheap-secure.so \
        $(BUILD)/t-plain/misuse
	bash tests/misuse.sh --install $(MISUSE_ALLOCATORS) $(MISUSE_ARGS)
