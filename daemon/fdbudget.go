package daemon

import (
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Open files: every running rank holds a few descriptors in its node's
// daemon (fdsOf), an exited one none (its output pipes close at their EOF,
// its pidfd once its exit is seen). The daemon's limit is its soft
// RLIMIT_NOFILE, which Go's runtime raised to the hard one when the process
// started (and lowers again in the children it forks). A rank starts only
// while its descriptors fit under that limit, less fdReserve for the rest
// of the process (the PMIx listener, the links to other nodes, tools).
// When they do not, its start waits for running ranks to end and release
// theirs: ranks that end at once (`-n 10000 /bin/true` under
// `ulimit -n 20000`) start in waves. When none of them releases any within
// fdStall (ranks that wait for each other, as MPI ranks do in MPI_Init, or
// simply run on), the start fails with a line that names the limit, and
// so do the job's later starts at once: the job cannot fit on this node.

// fdReserve is what the budget leaves to the rest of the process.
const fdReserve = 128

// fdStall bounds how long a start waits without any descriptor freed.
var fdStall = 500 * time.Millisecond

// fdBudget counts the descriptors the node's ranks may hold.
type fdBudget struct {
	limit int // the process's limit (RLIMIT_NOFILE, soft)
	hard  int // the hard one, which the soft one is, or about (libpmix takes one below)

	mu    sync.Mutex
	free  int           // what ranks may still take: limit - fdReserve - what they hold
	freed chan struct{} // closed (and replaced) whenever some are given back
}

func newFDBudget() *fdBudget {
	var rl syscall.Rlimit
	limit, hard := 1<<20, 1<<20
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		limit, hard = int(min(rl.Cur, uint64(limit))), int(min(rl.Max, uint64(hard)))
	}
	return &fdBudget{limit: limit, hard: hard, free: limit - fdReserve, freed: make(chan struct{})}
}

// fdsTooFew is a start's failure for want of descriptors.
type fdsTooFew struct {
	limit, need int // the hard limit; what this node's ranks of the job need at once
	ranks       int // how many ranks of the job run on this node
	waited      bool
}

func (e *fdsTooFew) Error() string {
	why := "nothing else runs here that could free any"
	if e.waited {
		why = fmt.Sprintf("no running rank freed any within %v", fdStall)
	}
	return fmt.Sprintf("too many ranks for the open-file limit: the job's %d ranks on this node need up to %d "+
		"descriptors at once, the limit (ulimit -Hn) is %d, and %s", e.ranks, e.need, e.limit, why)
}

// take takes n descriptors, waiting for them while some are in use and
// some were given back within fdStall. tooFew describes the failure.
func (b *fdBudget) take(n int, tooFew *fdsTooFew) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		if b.free == b.limit-fdReserve { // none in use: none will be given back
			b.mu.Unlock()
			return tooFew
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-time.After(fdStall):
			tooFew.waited = true
			return tooFew
		}
	}
}

// give returns n descriptors.
func (b *fdBudget) give(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// rankFDs is what a rank's incarnation holds in the daemon: its output's
// read ends (given back one by one as each closes) and the rest (given
// back when its exit is seen: its pidfd, its PMI connection, its PMIx
// connection, the write end of its stdin; these close at its exit, or
// soon after: an estimate the reserve covers).
type rankFDs struct {
	outputs, rest int
}

func (f rankFDs) total() int { return f.outputs + f.rest }

// fdsOf is what rank's incarnation will hold (again: a restart, which
// reads no stdin).
func (sh *shell) fdsOf(rank int, again bool) rankFDs {
	f := rankFDs{outputs: 2, rest: 1} // stdout and stderr; the pidfd
	usePMIx, versions := sh.interfaces()
	if usePMIx {
		f.rest++
	}
	if versions != 0 {
		f.rest++
	}
	if io := sh.io; io.in != nil && !again && (rank == io.target || io.target == StdinAll) {
		if io.pty && rank == io.target {
			f.outputs = 1 // one terminal, its master the output's and the input's
		} else {
			f.rest++
		}
	}
	return f
}

// takeFDs takes what rank's incarnation needs before its start makes any,
// or fails as the job cannot fit on this node.
func (sh *shell) takeFDs(rank int, again bool) (rankFDs, error) {
	f := sh.fdsOf(rank, again)
	if failed := sh.fdsFailed.Load(); failed != nil {
		return f, failed
	}
	local := len(sh.plan.procsOn(sh.self))
	tooFew := &fdsTooFew{limit: sh.d.fds.hard, ranks: local, need: local*f.total() + fdReserve}
	if err := sh.d.fds.take(f.total(), tooFew); err != nil {
		sh.fdsFailed.CompareAndSwap(nil, tooFew) // the first failure stands for the job's later starts
		return f, err
	}
	return f, nil
}
