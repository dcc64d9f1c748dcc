package sample

import (
	"context"
	"errors"
	"sync"
	"time"

	"prun/internal/procstat"
)

// OutputMeter counts what a rank writes: an io.Writer to put where its
// output goes (a copy of it).
type OutputMeter struct {
	mu    sync.Mutex
	total int64
	last  time.Time
}

// NewOutputMeter starts counting now: a rank that never writes has been
// silent since now.
func NewOutputMeter() *OutputMeter { return &OutputMeter{last: time.Now()} }

func (m *OutputMeter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		m.mu.Lock()
		m.total += int64(len(p))
		m.last = time.Now()
		m.mu.Unlock()
	}
	return len(p), nil
}

// Read returns the bytes written so far and the time of the last write.
func (m *OutputMeter) Read() (int64, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total, m.last
}

// Proc is one local process standing for a rank.
type Proc struct {
	Rank int
	Pid  int
	Out  *OutputMeter // nil: output unknown (rate 0, silent since never)
	// Exit, if set, reports the rank's end once it is known.
	Exit func() (status, signal int, ended bool)
}

// ProcSource samples local processes through /proc: the Source of tests and
// of topdemo. CPU % and output rates are over the time since the previous
// Sample; the first Sample waits Warmup to have an interval at all.
type ProcSource struct {
	Host   string
	Procs  []Proc
	Warmup time.Duration // 0 means 200 ms

	mu   sync.Mutex
	prev map[int]procstat.Stat // by rank
	outs map[int]int64         // bytes by rank at the previous sample
	at   time.Time
}

// Sample implements Source.
func (s *ProcSource) Sample(ctx context.Context) ([]Rank, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prev == nil {
		s.prev, s.outs = map[int]procstat.Stat{}, map[int]int64{}
		s.read()
		w := s.Warmup
		if w <= 0 {
			w = 200 * time.Millisecond
		}
		select {
		case <-time.After(w):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.read(), nil
}

// read samples every process against the previous sample and keeps this
// one as the next previous.
func (s *ProcSource) read() []Rank {
	now := time.Now()
	dt := now.Sub(s.at).Seconds()
	out := make([]Rank, 0, len(s.Procs))
	for _, p := range s.Procs {
		r := Rank{Rank: p.Rank, Host: s.Host, Pid: p.Pid}
		if p.Out != nil {
			total, last := p.Out.Read()
			if prev, ok := s.outs[p.Rank]; ok && dt > 0 {
				r.OutRate = float64(total-prev) / dt
			}
			s.outs[p.Rank] = total
			r.SinceOutput = max(now.Sub(last).Seconds(), 0)
		}
		if p.Exit != nil {
			if status, sig, ended := p.Exit(); ended {
				r.State, r.ExitStatus, r.Signal = Exited, status, sig
				out = append(out, r)
				continue
			}
		}
		st, err := procstat.Read(p.Pid)
		switch {
		case errors.Is(err, procstat.ErrGone) || err == nil && st.State == 'Z':
			// Ended, status not known to us (no Exit, or not yet).
			r.State = Exited
		case err != nil:
			r.State = "unknown"
		default:
			r.State = procstat.StateName(st.State)
			r.Wchan = st.Wchan
			r.RSS = st.RSS
			if prev, ok := s.prev[p.Rank]; ok {
				r.CPU = procstat.CPUPercent(prev, st)
			}
			s.prev[p.Rank] = st
		}
		out = append(out, r)
	}
	s.at = now
	return out
}

// Warm is a Source whose first sample is taken twice, half a second apart:
// CPU % and output rates are measured between two samples, and a source
// on the other side of a socket (the launcher's) has no earlier one.
type Warm struct {
	Source
	ready bool
}

// Sample implements Source.
func (w *Warm) Sample(ctx context.Context) ([]Rank, error) {
	if !w.ready {
		w.ready = true
		if _, err := w.Source.Sample(ctx); err != nil {
			return nil, err
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return w.Source.Sample(ctx)
}
