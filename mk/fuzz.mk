# The API fuzzer (tests/fuzz_api.c, README.md *Tests*): one harness, built four ways.
#   build/t/fuzz_api, build/t-asan/fuzz_api   inputs from fixed seeds, in `make test`
#                                             (tests/suites/core.sh, memcheck.sh)
#   build/t-debug/..., build/t-secure/...     the same on those builds (below)
#   make fuzz                                 libFuzzer for FUZZ_SECONDS (600) on a
#                                             library compiled with clang for its coverage,
#                                             under ASan and UBSan; inputs that found
#                                             something go to build/fuzz/, and the corpus
#                                             stays in build/fuzz/corpus for the next run.
# A saved input replays with `build/t/fuzz_api -- FILE`.
TEST_BINS += $(BUILD)/t/fuzz_api $(BUILD)/t-asan/fuzz_api

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_ARGS    ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJS    := $(patsubst src/%,$(BUILD)/obj/fuzz/%.o,$(basename $(LIB_SRC)))

$(BUILD)/obj/fuzz/%.o: src/%.c $(LIB_HDR) Makefile mk/fuzz.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(LIBFLAGS) $(FLAGS_asan) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/obj/fuzz/%.o: src/%.S $(LIB_HDR) Makefile mk/fuzz.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(LIBFLAGS) $(FLAGS_asan) -c $< -o $@
$(BUILD)/obj/fuzz/api_cxx.o: LIBFLAGS += -fexceptions -fsemantic-interposition

$(BUILD)/fuzz/fuzz_api: tests/fuzz_api.c tests/testutil.h include/lfheap.h $(FUZZ_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(TEST_CFLAGS) -DFUZZ_LIBFUZZER -fsanitize=fuzzer $(FUZZ_SAN) $< $(FUZZ_OBJS) \
	    -o $@ -lm

.PHONY: fuzz
fuzz: $(BUILD)/fuzz/fuzz_api
	@mkdir -p $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_api -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=4096 \
	    -timeout=60 -artifact_prefix=$(BUILD)/fuzz/ $(FUZZ_ARGS) $(BUILD)/fuzz/corpus

# The debug and secure builds under the same model (their own checks watch each call too),
# linked with their static archives, so that the standard names are theirs as well.
$(BUILD)/t-debug/fuzz_api $(BUILD)/t-secure/fuzz_api: $(BUILD)/t-%/fuzz_api: tests/fuzz_api.c \
        tests/testutil.h include/lfheap.h $(BUILD)/liblfheap-%.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DFUZZ_VALID_ONLY=1 $< -o $@ $(BUILD)/liblfheap-$*.a -lm
TEST_BINS += $(BUILD)/t-debug/fuzz_api $(BUILD)/t-secure/fuzz_api
