# prun — see README.md. `make demo` and `make test` are the two entry points;
# both install the Debian packages prun needs when they are missing.

GO       ?= go
BIN      := bin/prun
# What each entry point needs from Debian, and no more: building prun (a C
# compiler, and what the pinned OpenPMIx is built from), the demo (Open MPI),
# and every test (MPICH, PMIx's own tools and devel files for the test
# clients, sshd and network namespaces, gdb, Xvfb, zsh and bash-completion,
# Slurm, debootstrap for the Debian 13 and Debian 11 roots).
BUILD_PKGS := gcc libc6-dev make pkg-config autoconf automake libtool flex perl python3 patch xz-utils libevent-dev \
              libhwloc-dev zlib1g-dev libmunge-dev
DEMO_PKGS  := openmpi-bin libopenmpi-dev
TEST_PKGS  := libpmix-dev libpmix-bin mpich libmpich-dev hwloc openssh-server openssh-client iproute2 gdb graphviz elfutils \
              xterm xvfb zsh bash-completion tmux slurmctld slurmd slurm-client munge debootstrap
EXAMPLES := bin/examples
# MPICH built with ch3 (PMI-1, and its PMI-2 twin) for the tests of dynamic
# processes, once per machine: Debian's ch4:ucx MPICH cannot spawn here.
CACHE           := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/prun
MPICH_CH3       ?= $(CACHE)/mpich-ch3
MPICH_CH3_PMI2  ?= $(CACHE)/mpich-ch3-pmi2
export PRUN_MPICH_CH3 := $(MPICH_CH3)
export PRUN_MPICH_CH3_PMI2 := $(MPICH_CH3_PMI2)
# A Debian 13 root (Open MPI 5, PMIx 5, mpi4py 4) for the tests that run its
# programs under this machine's prun (internal/debroot), once per machine.
DEBIAN_TRIXIE   ?= $(CACHE)/debian-trixie
export PRUN_DEBIAN_TRIXIE := $(DEBIAN_TRIXIE)
# The OpenPMIx prun hosts its servers on: pinned and patched (openpmix/),
# built once per version of its recipe; pmixsrv finds it through pkg-config
# (prun-pmix), and tests that build clients on it through PRUN_PMIX.
PMIX_HASH   := $(shell cat openpmix/build.sh openpmix/pin openpmix/patches/*.patch | sha256sum | cut -c1-12)
PMIX_PREFIX ?= $(CACHE)/openpmix-$(PMIX_HASH)
export PKG_CONFIG_PATH := $(PMIX_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export PRUN_PMIX := $(PMIX_PREFIX)
# Go's build cache keys cgo packages on the environment's CGO_* flags, not on
# what pkg-config prints: the recipe's hash here rebuilds pmixsrv (and prun)
# whenever the library changes.
export CGO_CPPFLAGS := $(strip $(filter-out -DPRUN_PMIX_RECIPE=%,$(CGO_CPPFLAGS)) -DPRUN_PMIX_RECIPE=$(PMIX_HASH))

.PHONY: all deps deps-build deps-demo deps-release build pmix env demo test bench bench-scale fuzz vet clean leakcheck mpich-ch3 debian-trixie install release mpi4py-suite

all: build

# Install packages only when some are missing (one dpkg-query), so that a warm
# machine pays nothing and a fresh one needs no other step.
define install_missing
	@missing=$$(dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' $(1) 2>/dev/null | awk '$$1 == "ii" { ok[$$2] = 1 } \
		END { n = split("$(strip $(1))", want, " "); for (i = 1; i <= n; i++) if (!(want[i] in ok)) printf "%s ", want[i] }'); \
	if [ -n "$$missing" ]; then \
		echo "== installing Debian packages: $$missing"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(2) $$missing >/dev/null; \
	fi
endef

deps-build:
	$(call install_missing,$(BUILD_PKGS),--no-install-recommends)
deps-demo: deps-build
	$(call install_missing,$(DEMO_PKGS),--no-install-recommends)
deps: deps-demo
	$(call install_missing,$(TEST_PKGS))
deps-release:
	$(call install_missing,debootstrap)

# Where the system's pkg-config looks (root), a link to this recipe's .pc,
# so that a plain `go build` or `go vet ./...` finds the library too; make
# itself passes PKG_CONFIG_PATH and the recipe's hash (CGO_CPPFLAGS).
pmix: deps-build
	openpmix/build.sh $(PMIX_PREFIX)
	@if [ -w /usr/local/lib ]; then mkdir -p /usr/local/lib/pkgconfig && \
		ln -sfn $(PMIX_PREFIX)/lib/pkgconfig/prun-pmix.pc /usr/local/lib/pkgconfig/prun-pmix.pc; fi

# For go build/test outside make: eval "$$(make -s env)".
env: pmix
	@echo 'export PKG_CONFIG_PATH="$(PKG_CONFIG_PATH)" PRUN_PMIX="$(PRUN_PMIX)" CGO_CPPFLAGS="$(CGO_CPPFLAGS)" PRUN_MPICH_CH3="$(PRUN_MPICH_CH3)" PRUN_MPICH_CH3_PMI2="$(PRUN_MPICH_CH3_PMI2)" PRUN_DEBIAN_TRIXIE="$(PRUN_DEBIAN_TRIXIE)"'

# prun-ssh, prun's SSH client, and prun-top, prun top's terminal view, go beside
# prun: prun runs them from there.
build: pmix
	@mkdir -p bin
	$(GO) build -o bin/ ./cmd/prun ./cmd/prun-ssh ./cmd/prun-top

# Installs prun, prun-ssh beside it (prun runs it from its own directory),
# the man page (docs/prun.1, generated from the flags: go generate ./cli)
# and the bash and zsh completions (prun writes them). DESTDIR for packaging.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0755 bin/prun bin/prun-ssh bin/prun-top $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 docs/prun.1 $(DESTDIR)$(PREFIX)/share/man/man1/prun.1
	bin/prun completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/prun
	bin/prun completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_prun

# bin/prun-VERSION-linux-x86_64.tar.gz: prun, prun-ssh, the man page and the
# completions as a prefix, built in a Debian 11 root (cached in CACHE) so that
# they start on glibc 2.31 and later (release/build.sh). Needs root.
release: deps-release
	GO=$(GO) release/build.sh $(CACHE)/debian-bullseye bin

$(EXAMPLES)/hello: testdata/hello.c | deps-demo
	@mkdir -p $(EXAMPLES)
	mpicc.openmpi -O2 -o $@ $<

$(EXAMPLES)/spawn: testdata/spawn.c | deps-demo
	@mkdir -p $(EXAMPLES)
	mpicc.openmpi -O2 -o $@ $<

$(EXAMPLES)/hello2: testdata/hello2.c | deps-demo
	@mkdir -p $(EXAMPLES)
	mpicc.openmpi -O2 -o $@ $<

demo: build $(EXAMPLES)/hello $(EXAMPLES)/hello2
	@echo "== bin/prun -n 4 ./hello : -n 2 ./hello2"
	cd $(EXAMPLES) && ../../$(BIN) -n 4 ./hello : -n 2 ./hello2

vet: pmix
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# Each build returns at once when already done (its stamp in the prefix).
mpich-ch3: deps
	testdata/mpich-ch3.sh $(MPICH_CH3) simple
	testdata/mpich-ch3.sh $(MPICH_CH3_PMI2) pmi2/simple

# Returns at once when built (its stamp in the root); 2-4 minutes otherwise.
debian-trixie: deps
	testdata/debroot.sh trixie $(DEBIAN_TRIXIE)

# The packages whose code or tests run goroutines, again under the race
# detector (not e2e: its prun is a binary of its own).
RACE_PKGS := ./ctl ./daemon ./internal/peercred ./internal/sigcatch ./internal/timerslack \
             ./iof ./launcher ./mpir ./names ./pmi ./pmixsrv ./remote ./rsh/... ./sessiondir

test: deps pmix vet mpich-ch3 debian-trixie
	$(GO) test -count=1 -timeout 60m ./...
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

# mpi4py's own test suite under prun, in the Debian 13 root, at 1, 2 and 4
# ranks (e2e TestMPI4PySuite): MPI4PY_SRC is a source tree of the mpi4py the
# root has (4.0.3), which no registry make test reaches publishes.
mpi4py-suite: build debian-trixie
	@test -n "$(MPI4PY_SRC)" || { echo "make mpi4py-suite MPI4PY_SRC=DIR (an mpi4py 4.0.3 source tree)"; exit 2; }
	PRUN_MPI4PY_SRC=$(abspath $(MPI4PY_SRC)) $(GO) test -tags mpi4pysuite -count=1 -timeout 60m -run TestMPI4PySuite -v ./e2e/

# prun built with AddressSanitizer runs an Open MPI job and a PMIx tool's
# connection under LeakSanitizer; it fails when prun's own C code leaked
# (libpmix's own leaks are listed, not counted).
leakcheck: build $(EXAMPLES)/hello $(EXAMPLES)/spawn
	$(GO) build -asan -o bin/prun-asan ./cmd/prun
	gcc -O2 -o bin/pmixtool testdata/pmixtool.c $$(pkg-config --cflags --libs pmix)
	testdata/leakcheck.sh bin/prun-asan $(EXAMPLES)/hello bin/pmixtool $(EXAMPLES)/spawn

# Short fuzzing of every parser (FUZZTIME each); crashers land in the
# packages' testdata/fuzz, where `make test` replays them for ever.
FUZZTIME ?= 20s
fuzz: deps pmix
	@set -e; for pkg in ./cli ./jobspec ./names ./pmi ./hostfile ./topology ./mapper ./ctl ./remote ./daemon ./internal/shellwords; do \
		for f in $$($(GO) test $$pkg -list '^Fuzz' | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
		done; \
	done

bench: build debian-trixie
	$(GO) run ./bench/launch
	$(GO) run ./bench/cluster
	$(GO) run ./bench/slurm
	$(GO) run ./bench/dvm

# Kept out of `bench`: it takes tens of minutes (docs/scaling.md). Simulated
# clusters of 256 to 1,024 daemons (one machine, testdata/simrsh.sh); the same
# benchmarks on the network-namespace cluster (real sshd hosts) at 16 to 253
# hosts; then start-up growth by fanout there at 16 and 64 hosts.
bench-scale: build
	$(GO) run ./bench/scale $(SCALE_FLAGS)
	$(GO) run ./bench/scale -cluster -sizes 16,64,128,253 -runs 3
	$(GO) run ./bench/cluster -sizes 16,64 -runs 3

clean:
	rm -rf bin
