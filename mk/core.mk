# Test programs of the core allocator (tests/suites/core.sh).
TEST_BINS += $(BUILD)/t/test_units $(BUILD)/t-tsan/test_units \
             $(BUILD)/t/test_api $(BUILD)/t-plain/test_api $(BUILD)/t-asan/test_api \
             $(BUILD)/t/test_stress $(BUILD)/t-plain/test_stress \
             $(BUILD)/t-tsan/test_stress $(BUILD)/t-asan/test_stress \
             $(BUILD)/t/test_threads $(BUILD)/t-plain/test_threads \
             $(BUILD)/t-plain/test_purge $(BUILD)/t/test_arena $(BUILD)/t-tsan/test_arena
TEST_BINS += $(BUILD)/t/test_huge_threads $(BUILD)/t-plain/test_huge_threads \
             $(BUILD)/t-tsan/test_huge_threads
TEST_BINS += $(BUILD)/t/test_sticky $(BUILD)/t-asan/test_sticky
TEST_BINS += $(BUILD)/t/test_address_space $(BUILD)/t-plain/test_address_space
TEST_BINS += $(BUILD)/t-plain/test_hugepages $(BUILD)/t-plain/test_guard_budget \
             $(BUILD)/t-plain/test_guarded_resize $(BUILD)/t-plain/test_cancel

# llheap's own names, called by a program that links with the shared library, with the
# static one, and with the static one while defining its own resize (weak symbols).
LLHEAP_NAMES_DEPS := tests/test_llheap_names.c tests/testutil.h include/lfheap.h
$(BUILD)/t-llheap/test_llheap_names: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ -L$(BUILD) -llfheap -Wl,-rpath,'$(abspath $(BUILD))'
$(BUILD)/t-llheap/test_llheap_names_static: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/liblfheap.a
$(BUILD)/t-llheap/test_llheap_names_own_resize: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DOWN_RESIZE $< -o $@ $(BUILD)/liblfheap.a
TEST_BINS += $(BUILD)/t-llheap/test_llheap_names $(BUILD)/t-llheap/test_llheap_names_static \
             $(BUILD)/t-llheap/test_llheap_names_own_resize

# A program linked with the static library that calls only malloc and free, and links a
# shared library that calls the rest (tests/test_static_archive.c). The archive comes
# first on the line, as in `cc prog.c build/liblfheap.a`: the linker takes from it only
# what the program's own calls need, before it sees the shared library.
$(BUILD)/t-static/libtest_static_archive.so: tests/test_static_archive_lib.c \
                                              tests/test_static_archive.h include/lfheap.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@
$(BUILD)/t-static/test_static_archive: tests/test_static_archive.c tests/test_static_archive.h \
                                       tests/testutil.h \
                                       $(BUILD)/liblfheap.a \
                                       $(BUILD)/t-static/libtest_static_archive.so
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/liblfheap.a -L$(BUILD)/t-static \
	    -ltest_static_archive -Wl,-rpath,'$(abspath $(BUILD)/t-static)' -ldl
TEST_BINS += $(BUILD)/t-static/test_static_archive

# A program with names of its own that lfheap uses internally, linked with the archive.
$(BUILD)/t-static/test_static_own_names: tests/test_static_own_names.c tests/testutil.h \
                                         $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/liblfheap.a
TEST_BINS += $(BUILD)/t-static/test_static_own_names

# The thread tests linked with the static archives (release and statistics): there the
# test's constructor of priority 101 makes its 33 keys before lfheap's constructors make
# their exit keys, which then lie past glibc's first 32 (tests/test_threads.c).
THREADS_STATIC_DEPS := tests/test_threads.c tests/testutil.h tests/alloc_names.h
$(BUILD)/t-static/test_threads: $(THREADS_STATIC_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN $< -o $@ $(BUILD)/liblfheap.a -lm
$(BUILD)/t-static/test_threads_stats: $(THREADS_STATIC_DEPS) $(BUILD)/liblfheap-stats.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DTEST_PLAIN $< -o $@ $(BUILD)/liblfheap-stats.a -lm
TEST_BINS += $(BUILD)/t-static/test_threads $(BUILD)/t-static/test_threads_stats
