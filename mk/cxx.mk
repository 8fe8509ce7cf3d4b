# C++ operator new and delete (src/api_cxx.c): tests/test_cxx.cc built with g++ and
# clang++, linked with the shared and the static library and as a plain program to run
# with lfheap preloaded (tests/suites/cxx.sh); with libc++ too where its headers are
# installed (Debian: libc++-dev, libc++abi-dev). tests/test_cxx_c.c is a C program that
# calls the operators by their mangled names and loads tests/test_cxx_plugin.cc.
#   make fastpath-cxx   instructions per new/delete pair of a 16-byte object, against
#                       malloc/free, with lfheap and with glibc (callgrind)
CLANGXX    ?= clang++
CXX_TEST_FLAGS := -std=c++17 $(WARN) -O1 $(DEBUG_INFO) -Iinclude -pthread -fsized-deallocation
CXX_TEST_DEPS  := tests/test_cxx.cc tests/testutil.h include/lfheap.h mk/cxx.mk
CXX_LINKED     := -L$(BUILD) -llfheap -Wl,-rpath,'$(abspath $(BUILD))'
HAVE_LIBCXX    := $(shell $(CLANGXX) -stdlib=libc++ -x c++ -fsyntax-only -include new \
                      /dev/null 2>/dev/null && echo yes)

$(BUILD)/t-cxx/test_cxx: $(CXX_TEST_DEPS) $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) $< -o $@ $(CXX_LINKED)
$(BUILD)/t-cxx/test_cxx_static: $(CXX_TEST_DEPS) $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) $< -o $@ $(BUILD)/liblfheap.a
$(BUILD)/t-cxx/test_cxx_clang: $(CXX_TEST_DEPS) $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CLANGXX) $(CXX_TEST_FLAGS) $< -o $@ $(CXX_LINKED)
$(BUILD)/t-plain/test_cxx: $(CXX_TEST_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) -DTEST_PLAIN $< -o $@
# A program with its own operator new and delete (tests/test_cxx_own.cc).
$(BUILD)/t-cxx/test_cxx_own_static: tests/test_cxx_own.cc tests/testutil.h include/lfheap.h \
                                    mk/cxx.mk $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) $< -o $@ $(BUILD)/liblfheap.a -ldl
$(BUILD)/t-plain/test_cxx_own: tests/test_cxx_own.cc tests/testutil.h mk/cxx.mk
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) -DTEST_PLAIN $< -o $@ -ldl
$(BUILD)/t-cxx/test_cxx_own_clang: tests/test_cxx_own.cc tests/testutil.h include/lfheap.h \
                                   mk/cxx.mk $(BUILD)/liblfheap.a
	@mkdir -p $(@D)
	$(CLANGXX) $(CXX_TEST_FLAGS) $< -o $@ $(BUILD)/liblfheap.a -ldl
# A C program that calls the operators by their mangled names, without a C++ runtime.
$(BUILD)/t-cxx/test_cxx_c: tests/test_cxx_c.c tests/testutil.h include/lfheap.h \
                           $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(CXX_LINKED)
# ...and loads a C++ plugin with dlopen.
$(BUILD)/t-cxx/libtest_cxx_plugin.so: tests/test_cxx_plugin.cc mk/cxx.mk
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(WARN) -O1 $(DEBUG_INFO) -fPIC -shared $< -o $@
# The debug build's unfreed report in a C++ program (tests/suites/statsdebug.sh).
$(BUILD)/t-plain/cxx_unfreed: tests/cxx_unfreed.cc tests/testutil.h mk/cxx.mk
	@mkdir -p $(@D)
	$(CXX) $(CXX_TEST_FLAGS) -DTEST_PLAIN $< -o $@
TEST_BINS += $(BUILD)/t-cxx/test_cxx $(BUILD)/t-cxx/test_cxx_static \
             $(BUILD)/t-cxx/test_cxx_clang $(BUILD)/t-plain/test_cxx $(BUILD)/t-cxx/test_cxx_c \
             $(BUILD)/t-cxx/libtest_cxx_plugin.so $(BUILD)/t-plain/cxx_unfreed \
             $(BUILD)/t-cxx/test_cxx_own_static $(BUILD)/t-plain/test_cxx_own \
             $(BUILD)/t-cxx/test_cxx_own_clang

ifeq ($(HAVE_LIBCXX),yes)
$(BUILD)/t-cxx/test_cxx_libcxx: $(CXX_TEST_DEPS) $(BUILD)/liblfheap.so
	@mkdir -p $(@D)
	$(CLANGXX) -stdlib=libc++ $(CXX_TEST_FLAGS) $< -o $@ $(CXX_LINKED)
$(BUILD)/t-plain/test_cxx_libcxx: $(CXX_TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANGXX) -stdlib=libc++ $(CXX_TEST_FLAGS) -DTEST_PLAIN $< -o $@
$(BUILD)/t-plain/test_cxx_own_libcxx: tests/test_cxx_own.cc tests/testutil.h mk/cxx.mk
	@mkdir -p $(@D)
	$(CLANGXX) -stdlib=libc++ $(CXX_TEST_FLAGS) -DTEST_PLAIN $< -o $@ -ldl
TEST_BINS += $(BUILD)/t-cxx/test_cxx_libcxx $(BUILD)/t-plain/test_cxx_libcxx \
             $(BUILD)/t-plain/test_cxx_own_libcxx
endif

# The new/delete fast path against malloc/free (bench/fastpath_cxx.sh).
$(BUILD)/bench/fastpath_cxx: bench/fastpath_cxx.cc mk/cxx.mk
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(WARN) -O2 $(DEBUG_INFO) $< -o $@
TEST_BINS += $(BUILD)/bench/fastpath_cxx

.PHONY: fastpath-cxx
fastpath-cxx: all $(BUILD)/bench/fastpath_cxx
	bash bench/fastpath_cxx.sh
