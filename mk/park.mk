# Parking points (src/park.h, issue 6): the test-only library variant built with
# -DLFHEAP_PARKING, in which a test can stop a thread at named points of the slow paths:
#   build/liblfheap-parking.a        prefix-only, with the points and their hook
#   build/liblfheap-parking-tsan.a   the same under ThreadSanitizer
PARK_VARIANTS := parking parking-tsan
FLAGS_parking      := -DLFHEAP_PREFIX_ONLY -DLFHEAP_PARKING
FLAGS_parking-tsan := -DLFHEAP_PREFIX_ONLY -DLFHEAP_PARKING -fsanitize=thread -O1
$(foreach v,$(PARK_VARIANTS),$(eval $(call variant_rules,$(v))))
$(foreach v,$(PARK_VARIANTS),$(eval OBJS_$(v) += $(BUILD)/obj/$(v)/park.o))
