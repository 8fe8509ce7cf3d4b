# Parking points (src/park.h, issue 6): the test-only library variant built with
# -DLFHEAP_PARKING, in which a test can stop a thread at named points of the slow paths,
# and the test that does so at every point in turn (tests/test_parking.c).
#   build/liblfheap-parking.a        prefix-only, with the points and their hook
#   build/liblfheap-parking-tsan.a   the same under ThreadSanitizer
#   build/t-park/test_parking, build/t-park-tsan/test_parking   run by tests/suites/park.sh
PARK_VARIANTS := parking parking-tsan
FLAGS_parking      := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS -DLFHEAP_PARKING
FLAGS_parking-tsan := -DLFHEAP_PREFIX_ONLY -DLFHEAP_CHECKS -DLFHEAP_PARKING -fsanitize=thread -O1
$(foreach v,$(PARK_VARIANTS),$(eval $(call variant_rules,$(v))))
$(foreach v,$(PARK_VARIANTS),$(eval OBJS_$(v) += $(BUILD)/obj/$(v)/park.o))

$(BUILD)/t-park/%: tests/%.c $(BUILD)/liblfheap-parking.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DLFHEAP_PARKING $< -o $@ $(BUILD)/liblfheap-parking.a -lm
$(BUILD)/t-park-tsan/%: tests/%.c $(BUILD)/liblfheap-parking-tsan.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DLFHEAP_PARKING -fsanitize=thread $< -o $@ \
	    $(BUILD)/liblfheap-parking-tsan.a -lm

TEST_BINS += $(BUILD)/t-park/test_parking $(BUILD)/t-park-tsan/test_parking \
             $(BUILD)/t-park/test_uncached_tail
