# Test programs of the core allocator (tests/suites/core.sh).
TEST_BINS += $(BUILD)/t/test_units $(BUILD)/t-tsan/test_units \
             $(BUILD)/t/test_api $(BUILD)/t-plain/test_api $(BUILD)/t-asan/test_api \
             $(BUILD)/t/test_stress $(BUILD)/t-plain/test_stress \
             $(BUILD)/t-tsan/test_stress $(BUILD)/t-asan/test_stress \
             $(BUILD)/t/test_threads $(BUILD)/t-plain/test_threads \
             $(BUILD)/t-plain/test_purge $(BUILD)/t/test_arena $(BUILD)/t-tsan/test_arena
TEST_BINS += $(BUILD)/t/test_sticky $(BUILD)/t-asan/test_sticky
TEST_BINS += $(BUILD)/t/test_address_space $(BUILD)/t-plain/test_address_space

# llheap's own names, called by a program that links with the shared library, with the
# static one, and with the static one while defining its own resize (weak symbols).
LLHEAP_NAMES_DEPS := tests/test_llheap_names.c tests/testutil.h include/lfheap.h
$(BUILD)/t-llheap/test_llheap_names: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ -L$(BUILD) -llfheap -Wl,-rpath,$(abspath $(BUILD))
$(BUILD)/t-llheap/test_llheap_names_static: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(BUILD)/liblfheap.a
$(BUILD)/t-llheap/test_llheap_names_own_resize: $(LLHEAP_NAMES_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DOWN_RESIZE $< -o $@ $(BUILD)/liblfheap.a
TEST_BINS += $(BUILD)/t-llheap/test_llheap_names $(BUILD)/t-llheap/test_llheap_names_static \
             $(BUILD)/t-llheap/test_llheap_names_own_resize
