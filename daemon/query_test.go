package daemon

import (
	"testing"

	"prun/pmixsrv"
)

func TestJobState(t *testing.T) {
	run, term, prep := pmixsrv.ProcStateRunning, pmixsrv.ProcStateTerminated, pmixsrv.ProcStatePrepped
	for _, c := range []struct {
		states []int
		codes  []int
		want   pmixsrv.JobState
	}{
		{[]int{prep, run}, []int{0, 0}, pmixsrv.JobStateLaunchUnderway},
		{[]int{run, run}, []int{0, 0}, pmixsrv.JobStateRunning},
		{[]int{run, term}, []int{0, 0}, pmixsrv.JobStateRunning},
		{[]int{term, term}, []int{0, 0}, pmixsrv.JobStateTerminated},
		{[]int{term, term}, []int{0, 3}, pmixsrv.JobStateTerminatedErr},
	} {
		table := make([]pmixsrv.ProcInfo, len(c.states))
		for i := range table {
			table[i] = pmixsrv.ProcInfo{State: c.states[i], ExitCode: c.codes[i]}
		}
		if got := jobState(table); got != c.want {
			t.Errorf("states %v codes %v: %v, want %v", c.states, c.codes, got, c.want)
		}
	}
}
