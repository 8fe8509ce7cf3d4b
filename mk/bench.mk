# Benchmark suite (bench/README.md): one program per workload in bench/, built into
# build/bench/, and the runner bench/run.py that compares allocators.
#   make fastpath     instructions per malloc(16)+free pair, per allocator (callgrind)
#   make bench        the comparison, scaled down (a few minutes, 3 runs)
#   make bench-full   the comparison with the published parameters (5 runs)
# BENCH_ARGS passes extra options to the runner, e.g. BENCH_ARGS="--lfheap /tmp/x.so".

BENCH_PROGS := fastpath linux-scalability threadtest recycle cache-thrash cache-scratch larson churn speed consume memory thread-churn thread-churn-concurrent large oversubscribed pool-rebuild \
               realloc-grow realloc-many calloc-sparse strings-grow size-phases thread-footprint
BENCH_BINS  := $(addprefix $(BUILD)/bench/,$(BENCH_PROGS))
BENCH_CFLAGS := $(CSTD) $(WARN) -O2 $(DEBUG_INFO) -pthread -fno-builtin-malloc -fno-builtin-free \
                -fno-builtin-calloc -fno-builtin-realloc
BENCH_ARGS ?=

$(BUILD)/bench/common.o: bench/common.c bench/common.h mk/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -c $< -o $@

$(BUILD)/bench/%: bench/%.c bench/common.h $(BUILD)/bench/common.o
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $< $(BUILD)/bench/common.o -o $@ -lm

# The launcher of the real-program workloads (bench/realrun.c, bench/real/).
$(BUILD)/bench/realrun: bench/realrun.c mk/bench.mk
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 $(DEBUG_INFO) $< -o $@

BENCH_BINS += $(BUILD)/bench/realrun

.PHONY: bench-progs
bench-progs: $(BENCH_BINS)

fastpath: all $(BENCH_BINS)
	python3 bench/fastpath.py $(BENCH_ARGS)

TEST_BINS += $(BENCH_BINS)

# A deliberately corrupting LD_PRELOAD shim over glibc, for tests/suites/bench.sh.
$(BUILD)/bench/libbench_corrupt.so: tests/bench_corrupt.c mk/bench.mk
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O1 $(DEBUG_INFO) -fPIC -shared $< -o $@ -lpthread

TEST_BINS += $(BUILD)/bench/libbench_corrupt.so

bench: all $(BENCH_BINS)
	python3 bench/run.py --no-build $(BENCH_ARGS)

bench-full: all $(BENCH_BINS)
	python3 bench/run.py --profile full --no-build $(BENCH_ARGS)
