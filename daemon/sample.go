package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"prun/internal/procstat"
	"prun/iof"
	"prun/stacktree"
	"prun/topview/sample"
)

// rankMeters is what `prun top` needs of a job's local ranks beyond
// /proc: the bytes each wrote and when it last did (counted where the
// shell forwards its output), how each ended, and the previous sample that
// CPU % and output rates are measured against. Its own lock: the output
// goroutines count without the shell's.
type rankMeters struct {
	mu      sync.Mutex
	out     map[int]*sample.OutputMeter // by rank, from its first start
	pid     map[int]int                 // by rank, its latest incarnation's
	exit    map[int][2]int              // by rank: exit status, signal of its last incarnation (reaped, not restarted)
	prev    map[int]procstat.Stat       // by rank, the previous sample
	prevOut map[int]int64               // by rank, its bytes at the previous sample
	at      time.Time                   // the previous sample's time
}

// meter is rank's output meter, made at its first start (a restarted rank
// keeps counting on the same one).
func (m *rankMeters) meter(rank int) *sample.OutputMeter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.out == nil {
		m.out = map[int]*sample.OutputMeter{}
	}
	om := m.out[rank]
	if om == nil {
		om = sample.NewOutputMeter()
		m.out[rank] = om
	}
	return om
}

// counted wraps the sink of rank's output, its incarnation pid's, so that
// what passes is counted.
func (m *rankMeters) counted(rank, pid int, sink iof.Sink) iof.Sink {
	om := m.meter(rank)
	m.mu.Lock()
	if m.pid == nil {
		m.pid = map[int]int{}
	}
	m.pid[rank] = pid
	m.mu.Unlock()
	return countedSink{sink, om}
}

// exited records how rank's last incarnation ended.
func (m *rankMeters) exited(rank, code, sig int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exit == nil {
		m.exit = map[int][2]int{}
	}
	m.exit[rank] = [2]int{code, sig}
}

// countedSink is a rank's output sink that counts what passes; a stream's
// end passes on as before (iof.Forward asks the sink for iof.Ender).
type countedSink struct {
	iof.Sink
	m *sample.OutputMeter
}

func (c countedSink) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	c.m.Write(p)
	c.Sink.Write(src, st, p, partial)
}

func (c countedSink) End(src iof.Source, st iof.Stream) {
	if e, ok := c.Sink.(iof.Ender); ok {
		e.End(src, st)
	}
}

// Sample is one sample of every local rank of job nspace (none: no rank of
// it here, or no such job): state, CPU % and output rate since the
// previous Sample of the job (0 on the first), RSS, seconds since its last
// output, how an exited rank ended. Samples of one job are taken one at a
// time.
func (d *Daemon) Sample(nspace string) []sample.Rank {
	sh := d.shell(nspace)
	if sh == nil {
		return nil
	}
	// From the rank table: every local rank, and the live ones' pids; from
	// the meters, how the others ended (one that is neither has not
	// started yet).
	all := sh.ranks.list()
	live := map[int]int{}
	for _, l := range sh.ranks.live() {
		live[l.rank] = l.pid
	}
	m := &sh.meters
	m.mu.Lock()
	defer m.mu.Unlock()
	type local struct {
		rank, pid int
		exited    bool
	}
	ranks := make([]local, 0, len(all))
	for _, r := range all {
		if pid, ok := live[r]; ok {
			ranks = append(ranks, local{r, pid, false})
		} else {
			_, ended := m.exit[r]
			ranks = append(ranks, local{r, m.pid[r], ended})
		}
	}
	if m.prev == nil {
		m.prev, m.prevOut = map[int]procstat.Stat{}, map[int]int64{}
	}
	now := time.Now()
	dt := now.Sub(m.at).Seconds()
	first := m.at.IsZero()
	out := make([]sample.Rank, 0, len(ranks))
	for _, lr := range ranks {
		r := sample.Rank{Rank: lr.rank, Host: d.cfg.Name, Pid: lr.pid}
		if om := m.out[lr.rank]; om != nil {
			total, last := om.Read()
			if prev, ok := m.prevOut[lr.rank]; ok && !first && dt > 0 {
				r.OutRate = float64(total-prev) / dt
			}
			m.prevOut[lr.rank] = total
			r.SinceOutput = max(now.Sub(last).Seconds(), 0)
		}
		switch {
		case lr.exited:
			r.State = sample.Exited
			if e, ok := m.exit[lr.rank]; ok {
				r.ExitStatus, r.Signal = e[0], e[1]
			}
		case lr.pid == 0:
			r.State = "starting"
		default:
			st, err := procstat.Read(lr.pid)
			switch {
			case errors.Is(err, procstat.ErrGone) || err == nil && st.State == 'Z':
				// Ended, not yet reaped: its status comes with the next sample.
				r.State = sample.Exited
				if e, ok := m.exit[lr.rank]; ok {
					r.ExitStatus, r.Signal = e[0], e[1]
				}
			case err != nil:
				r.State = "unknown"
			default:
				r.State = procstat.StateName(st.State)
				r.Wchan, r.RSS = st.Wchan, st.RSS
				if prev, ok := m.prev[lr.rank]; ok {
					r.CPU = procstat.CPUPercent(prev, st)
				}
				m.prev[lr.rank] = st
			}
		}
		out = append(out, r)
	}
	m.at = now
	return out
}

// stackParallel bounds the debuggers run at once on a node: each is a
// process that reads a rank's memory; more than the CPUs only queue.
var stackParallel = max(runtime.NumCPU(), 4)

// Stacks captures the stacks of job nspace's live local ranks in set
// (empty: every one), each bounded by perRank, and merges them into one
// tree (finished). A rank not captured by ctx's end fails with why; an
// exited rank is not in the tree. The debugger is gdb, else eu-stack
// (stacktree.Debugger).
func (d *Daemon) Stacks(ctx context.Context, nspace string, set stacktree.RankSet, perRank time.Duration) *stacktree.Tree {
	t := stacktree.New()
	sh := d.shell(nspace)
	if sh == nil {
		t.Finish()
		return t
	}
	var ranks []livePid
	for _, l := range sh.ranks.live() {
		if set.Len() == 0 || set.Has(l.rank) {
			ranks = append(ranks, l)
		}
	}
	dbg := stacktree.Debugger()
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, stackParallel)
	for _, lr := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				mu.Lock()
				t.Fail(lr.rank, fmt.Sprintf("not reached before the request's deadline (%s)", d.cfg.Name))
				mu.Unlock()
				return
			}
			threads, err := stacktree.CaptureWith(ctx, dbg, lr.pid, perRank)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && len(threads) == 0 {
				t.Fail(lr.rank, err.Error())
				return
			}
			t.Add(lr.rank, threads)
		}()
	}
	wg.Wait()
	t.Finish()
	return t
}
