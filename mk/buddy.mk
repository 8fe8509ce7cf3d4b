# The buddy back-end (src/buddy.c, buddy_flat.c, buddy_packed.c): its tests and its benchmark.
#   build/t{,-tsan,-asan}/test_buddy, build/t{,-tsan}/test_buddy_chaos
#                                                  run by tests/suites/buddy.sh
#   build/bench/backend                            `make bench-backend`
TEST_BINS += $(BUILD)/t/test_buddy $(BUILD)/t-tsan/test_buddy $(BUILD)/t-asan/test_buddy

BACKEND_BENCH_CFLAGS := $(CSTD) $(WARN) -O2 $(DEBUG_INFO) -Iinclude -Isrc -Ibench -pthread
# Linked with the "bench" variant: the prefixed library without the invariant checks.
$(BUILD)/bench/backend: bench/backend.c bench/spinbuddy.c bench/spinbuddy.h \
                        $(BUILD)/liblfheap-bench.a
	@mkdir -p $(@D)
	$(CC) $(BACKEND_BENCH_CFLAGS) bench/backend.c bench/spinbuddy.c -o $@ $(BUILD)/liblfheap-bench.a -lm

.PHONY: bench-backend
bench-backend: $(BUILD)/bench/backend
	bash bench/backend.sh

# The buddy's sources, which the chaos test and the schedule explorer compile into themselves.
BUDDY_SRC := src/buddy.c src/buddy_flat.c src/buddy_packed.c src/buddy.h src/buddy_impl.h \
             include/lfheap_buddy.h

# The chaos test compiles the buddy and tests/test_buddy.c into itself.
TEST_BINS += $(BUILD)/t/test_buddy_chaos $(BUILD)/t-tsan/test_buddy_chaos
$(BUILD)/t/test_buddy_chaos $(BUILD)/t-tsan/test_buddy_chaos: tests/test_buddy.c $(BUDDY_SRC)
$(BUILD)/t/test_buddy $(BUILD)/t-tsan/test_buddy $(BUILD)/t-asan/test_buddy: src/buddy.h \
    include/lfheap_buddy.h

# The schedule explorer compiles the buddy into itself (coroutines: plain build only).
TEST_BINS += $(BUILD)/t/test_buddy_sched
$(BUILD)/t/test_buddy_sched: $(BUDDY_SRC)
