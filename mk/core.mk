# Test programs of the core allocator (tests/suites/core.sh).
TEST_BINS += $(BUILD)/t/test_units $(BUILD)/t-tsan/test_units \
             $(BUILD)/t/test_api $(BUILD)/t-plain/test_api $(BUILD)/t-asan/test_api \
             $(BUILD)/t/test_stress $(BUILD)/t-plain/test_stress \
             $(BUILD)/t-tsan/test_stress $(BUILD)/t-asan/test_stress \
             $(BUILD)/t/test_threads $(BUILD)/t-plain/test_threads \
             $(BUILD)/t-plain/test_purge $(BUILD)/t/test_arena $(BUILD)/t-tsan/test_arena
TEST_BINS += $(BUILD)/t/test_sticky $(BUILD)/t-asan/test_sticky
