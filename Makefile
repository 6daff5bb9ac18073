# djx-bpf build, test and demo. Run as root: the tests load BPF programs and
# attach to JVMs. `make demo` and `make test` install what they need.

GO        ?= go
JAVA_HOME ?= /usr/lib/jvm/java-17-openjdk-amd64
# Temurin 25, where testenv.JDK25 looks for it.
JDK25_HOME := /usr/lib/jvm/temurin-25-jdk-amd64
BUILD     := build
BIN       := $(BUILD)/djx-bpf
# VirtualTable.java needs JDK 21+ (virtual threads), SegmentTruth.java JDK 22+
# (FFM): their tests compile them with Temurin 25.
JAVA_SRCS := $(filter-out testdata/java/VirtualTable.java testdata/java/SegmentTruth.java,$(wildcard testdata/java/*.java))

# Plain `make` builds the binary: the agent's rules below would otherwise
# set the default goal.
.DEFAULT_GOAL := all

include agent/Makefile.inc

.PHONY: all build deps test-deps test test-short vet fuzz pprof-tool test-compile demo generate clean bench

all: build

build: $(BIN)

$(BIN): agent/lib/libdjxagent.so $(shell find . -name '*.go' -not -path './build/*') bpf/djx_bpfel.o go.mod go.sum
	$(GO) build -o $@ ./cmd/djx-bpf

# Debian packages the build and tests need beyond Go, gcc and JDK 17.
deps:
	@command -v unshare >/dev/null || (apt-get update -qq && apt-get install -y -qq util-linux)
	@test -x $(JAVA_HOME)/bin/javac || (apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless)

# What only the tests need: chromium for the HTML report's browser tests.
test-deps:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

$(BUILD)/java/.stamp: $(JAVA_SRCS)
	@mkdir -p $(BUILD)/java
	$(JAVA_HOME)/bin/javac -d $(BUILD)/java $(JAVA_SRCS)
	@touch $@

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

# Every test, privileged end-to-end ones included (they skip, saying why,
# where the kernel or privileges don't allow them), and the fuzzing.
# cmd/djx-bpf's tests, the suite's longest package, run beside the other
# packages' (those one package at a time) and beside the fuzz targets (two
# at a time), sharing the CPUs through test slots, one per CPU
# (internal/testenv/slots.go): each end-to-end test of cmd/djx-bpf holds
# one while it runs, and one that measures shares or pauses holds all of
# them. The other packages' live tests (testenv.Root, testenv.JDKs) and
# each fuzz target (scripts/test-slot) take one only when no test of
# cmd/djx-bpf waits for one. So they fill the CPU a lone end-to-end test
# leaves idle, without crowding the ones that measure or holding up
# cmd/djx-bpf. Their output follows cmd/djx-bpf's. Before them, every
# test package is compiled (running none) beside the builds of what the
# tests run besides djx-bpf, minutes each the first time (the
# OpenTelemetry Collector the continuous tests push to, go tool pprof).
# The last line says whether JDK 25's tests ran (they do wherever Temurin
# 25 is at JDK25_HOME, and are never required).
SLOTS := $(BUILD)/test-slots
test: deps test-deps build vet
	@$(MAKE) --no-print-directory -j2 $(OTELCOL) pprof-tool test-compile
	@mkdir -p $(BUILD) && rm -f $(BUILD)/jdk-tests.log && rm -rf $(SLOTS) && mkdir -p $(SLOTS) && \
		n=$$(nproc); [ $$n -ge 2 ] || n=2; for i in $$(seq 0 $$((n-1))); do : > $(SLOTS)/slot$$i; done
	@export JAVA_HOME=$(JAVA_HOME) DJX_TEST_JDK_LOG=$(CURDIR)/$(BUILD)/jdk-tests.log DJX_TEST_OTELCOL=$(CURDIR)/$(OTELCOL) \
		DJX_TEST_SLOTS=$(CURDIR)/$(SLOTS); \
	echo "testing cmd/djx-bpf beside the fuzzing and the other packages (their output follows; meanwhile in $(BUILD)/fuzz.log and $(BUILD)/test-others.log)"; \
	$(MAKE) --no-print-directory fuzz FUZZ_EXEC=$(CURDIR)/scripts/test-slot >$(BUILD)/fuzz.log 2>&1 & fuzz=$$!; \
	DJX_TEST_SLOT_LOW=1 $(GO) test -p 1 -count=1 -timeout 20m \
		$$($(GO) list ./... | grep -v '/cmd/djx-bpf$$') >$(BUILD)/test-others.log 2>&1 & others=$$!; \
	$(GO) test -p 1 -count=1 -timeout 20m ./cmd/djx-bpf; rc=$$?; \
	wait $$fuzz; rc1=$$?; cat $(BUILD)/fuzz.log; \
	wait $$others; rc2=$$?; cat $(BUILD)/test-others.log; \
	./scripts/jdk-summary.sh $(BUILD)/jdk-tests.log $(JDK25_HOME); [ $$rc -eq 0 ] && [ $$rc1 -eq 0 ] && [ $$rc2 -eq 0 ]

# Compiles every test package into the build cache (running none), so the
# tests after it only link.
test-compile:
	@$(GO) test -count=1 -run '^$$' -exec /bin/true ./... >/dev/null

# Every reader a target or a file feeds, fuzzed for FUZZTIME inputs each (one
# worker: the end-to-end tests share the machine). Their seed corpora also
# run in every `go test`. No minimizing: an input still being minimized
# when the time is up failed the run with "context deadline exceeded", and
# so did an input running at a -fuzztime deadline: a count has none.
FUZZTIME ?= 20000x
FUZZ_TARGETS := hotspot/heapwalk:FuzzWalk sources/agentwire:FuzzReader report/pprofile:FuzzRead target/attach:FuzzParseReply target/openj9:FuzzParseProperties \
	hotspot/heap:FuzzParseJavacore hotspot/heap:FuzzParseVMInfo jvmsym:FuzzParsePerfMap cmd/djx-bpf:FuzzReadJSONReport sources/decode:FuzzDecode \
	naming/region:FuzzParse safety/procfs:FuzzParse sources/agentwire:FuzzReaderLimits join:FuzzQueueOrder profiler/control:FuzzReadLines \
	safety/elfsafe:FuzzNewFile jvmsym:FuzzLoadELFSyms jvmsym:FuzzParsePerfMapCaps sources/reloc:FuzzLibJVM safety/termsafe:FuzzString \
	hotspot/vmstructs:FuzzRead hotspot/vmcode:FuzzForgedMemory hotspot/vmcode:FuzzDecoders

OTELCOL := $(BUILD)/otelcol
$(OTELCOL): $(wildcard testdata/otelcol/*.go) testdata/otelcol/go.mod testdata/otelcol/go.sum
	@mkdir -p $(BUILD)
	cd testdata/otelcol && $(GO) build -trimpath -o $(CURDIR)/$@ .

# go tool pprof is built on its first use, and cached.
pprof-tool:
	@$(GO) tool -n pprof >/dev/null

# FUZZ_JOBS targets at once: each has one worker, and leaves the other core
# idle while it runs inputs. A failing target's log is printed and stops the
# rest (xargs stops at an exit status of 255). FUZZ_WAITING's targets have
# FUZZ_WAITING_WORKERS workers instead, sharing their FUZZTIME inputs: many
# of FuzzWalk's inputs leave a collection running, and its walk then sleeps
# in 1 ms polls for up to 3 s, a core idle. It is listed first: the longest.
FUZZ_JOBS ?= 2
# FUZZ_EXEC runs each target's go test (make test: scripts/test-slot).
FUZZ_EXEC ?=
FUZZ_WAITING := FuzzWalk
FUZZ_WAITING_WORKERS ?= 4
fuzz:
	@mkdir -p $(BUILD)/fuzz
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -I{} sh -c '\
		t={}; pkg=$${t%%:*}; fn=$${t##*:}; log=$(BUILD)/fuzz/$$(echo $$t | tr /: --).log; \
		par=1; case " $(FUZZ_WAITING) " in *" $$fn "*) par=$(FUZZ_WAITING_WORKERS);; esac; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME), $$par worker(s))"; \
		$(FUZZ_EXEC) $(GO) test ./$$pkg -run "^$$" -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 -parallel $$par >$$log 2>&1 || \
			{ cat $$log; exit 255; }'

test-short: agent/lib/libdjxagent.so
	$(GO) test -short ./...

# Profile the bundled demo workload: a JVM whose hot object is known
# (testdata/java/HotArrays.java: allocHot's long[] takes 13/16 of the loads).
demo: deps build $(BUILD)/java/.stamp
	./scripts/demo.sh $(BIN) $(JAVA_HOME)/bin/java $(BUILD)/java

# Regenerate the BPF objects (committed; needs clang-16 and libbpf headers).
generate:
	@command -v clang-16 >/dev/null && test -f /usr/include/bpf/bpf_helpers.h || \
		(apt-get update -qq && apt-get install -y -qq clang-16 llvm-16 libbpf-dev linux-libc-dev)
	$(GO) generate ./bpf

# Overhead of djx-bpf on real Java applications (H2, Xalan from Debian's
# packages) and synthetic ones, unprofiled / attach / launch / under JFR,
# alternating rounds; see docs/benchmarks.md. As root. BENCH_RUNS=N (default 3),
# BENCH_WORKLOADS, BENCH_MODES, BENCH_VARIANTS, BENCH_DJX_FLAGS, BENCH_OUT
# select what runs; BENCH_GO=1 also runs the Go hot-path benchmarks.
# BENCH_TOGGLE=N or BENCH_SWITCH=N (pairs of windows on one JVM) or
# BENCH_IRQ=1 run djxbench's toggle, switch or irq instead of its run;
# BENCH_WALKCOST=1 its walkcost (the attach census's costs, JDK 17 and 25).
# Debian names Lucene's jars by version; its Maven tree keeps one name for 8.x.
LUCENE_JAR := /usr/share/maven-repo/org/apache/lucene/lucene-core/8.x/lucene-core-8.x.jar
BENCH_JARS := /usr/share/java/h2.jar:/usr/share/java/hsqldb.jar:/usr/share/java/xalan2.jar:/usr/share/java/serializer.jar:/usr/share/java/commons-math3.jar
BENCH_WHERE = -bin $(BIN) -java $(JAVA_HOME)/bin/java -cp $(BUILD)/bench/java:$(BENCH_JARS)
ifneq ($(filter-out 0,$(BENCH_IRQ)),)
BENCH_CMD = irq
else ifneq ($(filter-out 0,$(BENCH_WALKCOST)),)
BENCH_CMD = walkcost -bin $(BIN)
else ifneq ($(filter-out 0,$(BENCH_SWITCH)),)
BENCH_CMD = switch -pairs $(BENCH_SWITCH) $(BENCH_WHERE)
else ifneq ($(filter-out 0,$(BENCH_TOGGLE)),)
BENCH_CMD = toggle -pairs $(BENCH_TOGGLE) $(BENCH_WHERE)
else
BENCH_CMD = run $(BENCH_WHERE)
endif

bench: deps build
	@test "$$(id -u)" = 0 || (echo "make bench: run as root (djx-bpf loads BPF programs and attaches to JVMs)"; exit 1)
	@test -f /usr/share/java/h2.jar -a -f /usr/share/java/hsqldb.jar -a -f /usr/share/java/xalan2.jar -a -f /usr/share/java/serializer.jar -a -f /usr/share/java/commons-math3.jar -a -f $(LUCENE_JAR) || \
		(apt-get update -qq && apt-get install -y -qq libh2-java libhsqldb-java libxalan2-java libcommons-math3-java liblucene8-java)
	@mkdir -p $(BUILD)/bench/java
	$(JAVA_HOME)/bin/javac -d $(BUILD)/bench/java -cp $(BENCH_JARS) bench/java/*.java $(JAVA_SRCS)
	$(GO) build -o $(BUILD)/djxbench ./bench/cmd/djxbench
	$(BUILD)/djxbench $(BENCH_CMD)
	@if [ -n "$(BENCH_GO)" ]; then $(GO) test -run '^$$' -bench . -benchtime 1s -benchmem ./sources/decode/ ./join/ ./jvmsym/ ./sources/reloc/ && \
		$(GO) test -run '^$$' -bench 'Lookup|Insert|Remove' -benchtime 200000x -benchmem ./objindex/ && \
		$(GO) test -run '^$$' -bench 'ApplyMoves' -benchtime 2000x -benchmem ./objindex/; fi

clean:
	rm -rf $(BUILD) agent/lib/libdjxagent.so
