# The buddy back-end (src/buddy.c): its tests and its benchmark.
#   build/t{,-tsan,-asan}/test_buddy, build/t{,-tsan}/test_buddy_chaos
#                                                  run by tests/suites/buddy.sh
#   build/bench/backend                            `make bench-backend`
TEST_BINS += $(BUILD)/t/test_buddy $(BUILD)/t-tsan/test_buddy $(BUILD)/t-asan/test_buddy

BACKEND_BENCH_CFLAGS := $(CSTD) $(WARN) -O2 -g -Iinclude -Isrc -Ibench -pthread
# Linked with the "bench" variant: the prefixed library without the invariant checks.
$(BUILD)/bench/backend: bench/backend.c bench/spinbuddy.c bench/spinbuddy.h \
                        $(BUILD)/liblfheap-bench.a
	@mkdir -p $(@D)
	$(CC) $(BACKEND_BENCH_CFLAGS) bench/backend.c bench/spinbuddy.c -o $@ $(BUILD)/liblfheap-bench.a -lm

.PHONY: bench-backend
bench-backend: $(BUILD)/bench/backend
	bash bench/backend.sh

# The chaos test compiles src/buddy.c and tests/test_buddy.c into itself.
TEST_BINS += $(BUILD)/t/test_buddy_chaos $(BUILD)/t-tsan/test_buddy_chaos
$(BUILD)/t/test_buddy_chaos $(BUILD)/t-tsan/test_buddy_chaos: tests/test_buddy.c src/buddy.c \
                                                              src/buddy.h include/lfheap_buddy.h
$(BUILD)/t/test_buddy $(BUILD)/t-tsan/test_buddy $(BUILD)/t-asan/test_buddy: src/buddy.h \
    include/lfheap_buddy.h

# The schedule explorer compiles src/buddy.c into itself (coroutines: plain build only).
TEST_BINS += $(BUILD)/t/test_buddy_sched
$(BUILD)/t/test_buddy_sched: src/buddy.c src/buddy.h include/lfheap_buddy.h
