# inferno — one Makefile. `make help` lists the targets.
#
# Library sources live in src/<module>/*.c and build into build/libinferno.a.
# Test support (synthetic models, GGUF and safetensors writers) lives in
# tests/support/ and builds into build/libinferno-support.a, which only the
# tools and the unit tests link; build/inferno never does.
# Files named *_avx2.c, *_avx512.c, *_amx.c get their ISA flags per file and
# are only ever called after run-time CPU detection; *_neon.c builds on aarch64.

CC       ?= cc
BUILD    ?= build
OPT      ?= -O2
ARCH     := $(shell $(CC) -dumpmachine | cut -d- -f1)
NPROC    := $(shell nproc 2>/dev/null || echo 2)
DEPS     := jansson libpcre2-8 libutf8proc libmicrohttpd libxxhash
# Read when this make starts: `make demo` and `make test` install the packages
# first and then build in a second make, which sees them.
PKG_CFLAGS := $(shell pkg-config --cflags $(DEPS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(DEPS) 2>/dev/null)
PKG_OK     := $(shell pkg-config --exists $(DEPS) 2>/dev/null && echo yes)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
            -Wno-missing-field-initializers -Wno-format-truncation
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -Isrc $(PKG_CFLAGS) $(SAN) -MMD -MP
LDLIBS   += $(PKG_LIBS) -lm -lpthread
LDFLAGS  += $(SAN)

ALL_SRC  := $(wildcard src/*/*.c src/*/*/*.c)
ifeq ($(ARCH),x86_64)
LIB_SRC  := $(filter-out src/cli/% %_neon.c,$(ALL_SRC))
else ifeq ($(ARCH),aarch64)
LIB_SRC  := $(filter-out src/cli/% %_avx2.c %_avx512.c %_amx.c,$(ALL_SRC))
else
LIB_SRC  := $(filter-out src/cli/% %_neon.c %_avx2.c %_avx512.c %_amx.c,$(ALL_SRC))
endif
CLI_SRC  := $(wildcard src/cli/*.c)
SUPPORT_SRC := $(wildcard tests/support/*.c)
TOOL_SRC := $(wildcard tools/*.c)
TEST_SRC := $(wildcard tests/unit/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
SUPPORT_OBJ := $(SUPPORT_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libinferno.a
SUPPORT  := $(BUILD)/libinferno-support.a
INFERNO  := $(BUILD)/inferno
TOOLS    := $(TOOL_SRC:tools/%.c=$(BUILD)/%)
TESTS    := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c
ISA_AMX    := $(ISA_AVX512) -mamx-tile -mamx-int8 -mamx-bf16

# Keep objects of tests and tools (make would delete them as intermediates).
.SECONDARY:

.PHONY: all lib test demo models asan tsan fuzz fuzz-targets fuzz-replay format format-check clean help deps \
        check-pkgs

all: $(INFERNO) $(TOOLS)

lib: $(LIB)

# Every build needs the libraries; without them say what to run, not a link error.
check-pkgs:
ifneq ($(PKG_OK),yes)
	@echo "inferno: missing libraries ($(DEPS)); run 'make deps' (or 'make demo' / 'make test')" >&2
	@exit 1
endif

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(SUPPORT): $(SUPPORT_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Only tools and tests see tests/support/ (#include "support/synth.h").
$(SUPPORT_OBJ) $(TOOL_SRC:%.c=$(BUILD)/%.o) $(TEST_SRC:%.c=$(BUILD)/%.o): CFLAGS += -Itests

$(BUILD)/%_avx2.o: %_avx2.c | check-pkgs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AVX2) -c $< -o $@
$(BUILD)/%_avx512.o: %_avx512.c | check-pkgs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AVX512) -c $< -o $@
$(BUILD)/%_amx.o: %_amx.c | check-pkgs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AMX) -c $< -o $@
$(BUILD)/%.o: %.c | check-pkgs
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The chat page's files go into webui.o by .incbin, which -MMD does not see.
$(BUILD)/src/server/webui.o: $(wildcard webui/*)

$(INFERNO): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/%: $(BUILD)/tools/%.o $(SUPPORT) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(SUPPORT) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(SUPPORT) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(SUPPORT) $(LIB) $(LDLIBS)

tests: $(TESTS)

# Everything the tests need (Debian packages, npm oracles), then every test.
deps:
	scripts/install-deps.sh

# Each installs first, then builds in a new make that reads the installed
# packages' flags: either works as the first command on a fresh machine.
test:
	@t=$$(date +%s); scripts/install-deps.sh && echo "install-deps: $$(($$(date +%s) - t)) s"
	@t=$$(date +%s); $(MAKE) -j$(NPROC) all tests && echo "make all tests: $$(($$(date +%s) - t)) s"
	scripts/run-tests.sh

# Install, build, generate the default model, run the main job on it.
demo:
	scripts/install-deps.sh
	$(MAKE) all
	scripts/demo.sh

models: all
	scripts/make-models.sh

asan:
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" OPT=-O1 all tests
tsan:
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" OPT=-O1 all tests

FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build-fuzz/fuzz/%)
FUZZ_MAKE = $(MAKE) CC=clang BUILD=build-fuzz SAN="-fsanitize=address,undefined,fuzzer-no-link" OPT=-O1 \
	  WARN="$(WARN) -Wno-unknown-warning-option"
# The library objects the targets link (fuzz/lib_objs.py: the closure of their
# symbols over the plain build's objects) with clang's sanitizers, then the
# targets, one rule each so that `make -jN fuzz` links them side by side. If
# a target needs one more object than that (the link fails), the whole library.
# The other objects are still compiled by clang (-O0, no sanitizers, into
# build-fuzz/clang/), so the whole library stays checked against clang's warnings.
fuzz: $(LIB)
	@mkdir -p build-fuzz/fuzz build-fuzz/obj
	@for f in $(FUZZ_SRC); do $(CC) -std=c11 -D_GNU_SOURCE $(OPT) -Isrc $(PKG_CFLAGS) -c $$f \
	  -o build-fuzz/obj/$$(basename $$f .c).plain.o || exit 1; done
	python3 fuzz/lib_objs.py $(BUILD) $(LIB_OBJ) -- build-fuzz/obj/*.plain.o >build-fuzz/lib-objs.txt
	+objs=$$(sed 's|^|build-fuzz/|' build-fuzz/lib-objs.txt) && \
	  $(FUZZ_MAKE) $$objs && rm -f build-fuzz/libinferno-fuzz.a.new && ar rcsD build-fuzz/libinferno-fuzz.a.new $$objs && \
	  { cmp -s build-fuzz/libinferno-fuzz.a.new build-fuzz/libinferno-fuzz.a || \
	    mv build-fuzz/libinferno-fuzz.a.new build-fuzz/libinferno-fuzz.a; }
	@rm -f build-fuzz/libinferno-fuzz.a.new
	+rest=$$(printf '%s\n' $(LIB_OBJ:$(BUILD)/%=%) | grep -vxF -f build-fuzz/lib-objs.txt | sed 's|^|build-fuzz/clang/|') && \
	  $(MAKE) CC=clang BUILD=build-fuzz/clang OPT=-O0 WARN="$(WARN) -Wno-unknown-warning-option" $$rest
	+$(MAKE) fuzz-targets FUZZ_LIB=build-fuzz/libinferno-fuzz.a || \
	  { $(FUZZ_MAKE) lib && $(MAKE) fuzz-targets FUZZ_LIB=build-fuzz/libinferno.a; }
FUZZ_LIB ?= build-fuzz/libinferno.a
fuzz-targets: $(FUZZ_BIN)
build-fuzz/fuzz/%: fuzz/%.c $(FUZZ_LIB)
	@mkdir -p $(dir $@) build-fuzz/obj
	clang -std=c11 -D_GNU_SOURCE -O1 -g -Isrc $(PKG_CFLAGS) -fsanitize=address,undefined,fuzzer -MMD -MP \
	  -MF build-fuzz/obj/$*.d -MT $@ \
	  $< $(FUZZ_LIB) $(PKG_LIBS) -lm -lpthread -o $@
-include $(wildcard build-fuzz/obj/*.d)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')
format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz

help:
	@echo "make demo    install deps, build, generate the default model, run it"
	@echo "make test    install deps, build, run every test"
	@echo "make models  generate the test models under models/"
	@echo "make asan | tsan | fuzz | format | format-check | clean"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
