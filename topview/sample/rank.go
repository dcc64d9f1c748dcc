// Package sample is what `prun top` shows of each rank (Rank), where it
// comes from (Source, ProcSource), which ranks stand apart (Mark) and the
// one-sample JSON of --once --json. It is apart from topview, the terminal
// view, so that the launcher and the daemons, which sample, link no
// terminal library: every package prun links is initialised at every
// start (Bubble Tea's and its kin's cost 0.24 ms).
package sample

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
)

// Rank is one rank in one sample.
type Rank struct {
	Rank       int    `json:"rank"`
	Host       string `json:"host"`
	Pid        int    `json:"pid"`
	State      string `json:"state"` // procstat.StateName's words, or "exited"
	Wchan      string `json:"wchan,omitempty"`
	ExitStatus int    `json:"exit_status"`      // when State is "exited"
	Signal     int    `json:"signal,omitempty"` // when State is "exited": the signal that ended it
	// CPU is the share of one CPU used since the previous sample, in
	// percent (a rank with two busy threads shows 200).
	CPU float64 `json:"cpu_percent"`
	RSS int64   `json:"rss_bytes"`
	// OutRate is the bytes of stdout and stderr per second since the
	// previous sample; SinceOutput the seconds since its last output (or
	// since it started, if it never wrote).
	OutRate     float64 `json:"output_bytes_per_s"`
	SinceOutput float64 `json:"seconds_since_output"`
	// Apart is set by Mark: "idle", "silent".
	Apart []string `json:"apart,omitempty"`
}

// Exited is the state of a rank that ended.
const Exited = "exited"

// Live reports whether the rank still runs.
func (r Rank) Live() bool { return r.State != Exited }

// Source gives one sample of every rank of the job per call. The daemon
// tree implements it for prun; tests use ProcSource.
type Source interface {
	Sample(ctx context.Context) ([]Rank, error)
}

// Thresholds say when a rank stands apart.
type Thresholds struct {
	IdleCPU float64       // a rank below this CPU %...
	BusyCPU float64       // ...while the others' median is at least this is idle
	Quiet   time.Duration // a rank silent this long while the others' median is under half of it is silent
}

// DefaultThresholds suit an interactive view refreshed every second.
var DefaultThresholds = Thresholds{IdleCPU: 5, BusyCPU: 25, Quiet: 10 * time.Second}

// Mark sets every rank's Apart against the other live ranks. Exited ranks
// are neither marked nor counted: a job's finished ranks are not peers of
// its running ones. With fewer than two live ranks nothing stands apart.
func Mark(ranks []Rank, th Thresholds) {
	var cpu, quiet []float64
	for i := range ranks {
		ranks[i].Apart = nil
		if ranks[i].Live() {
			cpu = append(cpu, ranks[i].CPU)
			quiet = append(quiet, ranks[i].SinceOutput)
		}
	}
	if len(cpu) < 2 {
		return
	}
	sort.Float64s(cpu)
	sort.Float64s(quiet)
	q := th.Quiet.Seconds()
	for i := range ranks {
		r := &ranks[i]
		if !r.Live() {
			continue
		}
		if r.CPU < th.IdleCPU && medianWithout(cpu, r.CPU) >= th.BusyCPU {
			r.Apart = append(r.Apart, "idle")
		}
		if q > 0 && r.SinceOutput >= q && medianWithout(quiet, r.SinceOutput) < q/2 {
			r.Apart = append(r.Apart, "silent")
		}
	}
}

// medianWithout is the median of sorted s without one occurrence of v
// (which s holds): the others' median, in O(log n).
func medianWithout(s []float64, v float64) float64 {
	p := sort.SearchFloat64s(s, v)
	at := func(k int) float64 { // k-th of the rest
		if k < p {
			return s[k]
		}
		return s[k+1]
	}
	m := len(s) - 1
	if m%2 == 1 {
		return at(m / 2)
	}
	return (at(m/2-1) + at(m/2)) / 2
}

// Snapshot is what `prun top --once --json` prints.
type Snapshot struct {
	Time  time.Time `json:"time"`
	Ranks []Rank    `json:"ranks"`
}

// Once takes one sample, marks it and writes it as one JSON object, ranks
// in rank order.
func Once(ctx context.Context, src Source, th Thresholds, w io.Writer) error {
	ranks, err := src.Sample(ctx)
	if err != nil {
		return err
	}
	Mark(ranks, th)
	for i := range ranks {
		// Rounded to what the measurements can tell.
		r := &ranks[i]
		r.CPU = math.Round(r.CPU*10) / 10
		r.OutRate = math.Round(r.OutRate*10) / 10
		r.SinceOutput = math.Round(r.SinceOutput*100) / 100
	}
	sort.SliceStable(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	if ranks == nil {
		ranks = []Rank{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Snapshot{Time: time.Now().UTC(), Ranks: ranks})
}

// Human writes a byte count in 6 columns: 999, 12.3K, 456M, 1.2G.
func Human(v float64) string {
	if v < 1000 {
		return strconv.Itoa(int(v + 0.5))
	}
	for _, u := range "KMGTPE" {
		v /= 1024
		if v < 9.95 {
			return strconv.FormatFloat(v, 'f', 1, 64) + string(u)
		}
		if v < 999.5 {
			return strconv.Itoa(int(v+0.5)) + string(u)
		}
	}
	return "huge"
}
