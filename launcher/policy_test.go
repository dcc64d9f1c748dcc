package launcher

import (
	"errors"
	"reflect"
	"syscall"
	"testing"
	"time"
)

var policyT0 = time.Unix(1000, 0)

func at(ms int) time.Time { return policyT0.Add(time.Duration(ms) * time.Millisecond) }

func rank(r, status int, sig syscall.Signal, ms int) rankEnd {
	return rankEnd{desc: "rank " + string(rune('0'+r)) + " (app) on n1", pid: 100 + r, status: status, signal: sig, time: at(ms)}
}

const term = syscall.SIGTERM

// step is one event (with what the loop is told to do).
type step struct {
	ev   func(p *policy) decision
	want decision
}

// policyCase is a sequence of events and the exit status, the state and
// the line told at the end.
type policyCase struct {
	name   string
	pol    policy
	steps  []step
	status int
	state  runState
	told   string // by finish
}

// policyCases are the policy's cases.
var policyCases = []policyCase{
	{name: "every rank exits 0", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, 0, 1), 1, at(2)) }, decision{}},
		{func(p *policy) decision { return p.rankEnded(rank(1, 0, 0, 1), 0, at(2)) }, decision{}},
	}, status: 0, state: stateRunning},
	{name: "one rank fails, the others are killed", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(2, 3, 0, 1), 3, at(2)) },
			decision{stop: term, failed: "rank 2 (app) on n1 (pid 102) exited with status 3; killing the other 3 ranks"}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, term, 5), 2, at(6)) }, decision{}},
	}, status: 3, state: stateEnding, told: "rank 2 (app) on n1 (pid 102) exited with status 3; killing the other 3 ranks"},
	{name: "every rank fails alike: the first by time is named", steps: []step{
		// read in another order than they ended
		{func(p *policy) decision { return p.rankEnded(rank(1, 3, 0, 20), 3, at(30)) },
			decision{stop: term, failed: "rank 1 (app) on n1 (pid 101) exited with status 3; killing the other 3 ranks"}},
		{func(p *policy) decision { return p.rankEnded(rank(2, 3, 0, 10), 2, at(31)) }, decision{}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 3, 0, 25), 1, at(32)) }, decision{}},
		{func(p *policy) decision { return p.rankEnded(rank(3, 3, 0, 40), 0, at(33)) }, decision{}},
	}, status: 3, state: stateEnding, told: "rank 2 (app) on n1 (pid 102) exited with status 3 first; 3 other ranks failed alike"},
	{name: "some fail alike, the rest are killed", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 3, 0, 10), 3, at(30)) },
			decision{stop: term, failed: "rank 0 (app) on n1 (pid 100) exited with status 3; killing the other 3 ranks"}},
		{func(p *policy) decision { return p.rankEnded(rank(1, 3, 0, 20), 2, at(31)) }, decision{}},
		{func(p *policy) decision { return p.rankEnded(rank(2, 0, term, 40), 1, at(41)) }, decision{}},
		{func(p *policy) decision { return p.rankEnded(rank(3, 0, term, 40), 0, at(41)) }, decision{}},
	}, status: 3, state: stateEnding, told: "rank 0 (app) on n1 (pid 100) exited with status 3 first; 1 other rank failed alike; killing the other 2 ranks"},
	{name: "a rank killed by SIGTERM: the others SIGTERMed after are not alike", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, term, 10), 1, at(30)) },
			decision{stop: term, failed: "rank 0 (app) on n1 (pid 100) was killed by signal 15 (SIGTERM); killing the other rank"}},
		{func(p *policy) decision { return p.rankEnded(rank(1, 0, term, 40), 0, at(41)) }, decision{}},
	}, status: 143, state: stateEnding, told: "rank 0 (app) on n1 (pid 100) was killed by signal 15 (SIGTERM); killing the other rank"},
	{name: "segfaults alike", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, syscall.SIGSEGV, 10), 1, at(30)) },
			decision{stop: term, failed: "rank 0 (app) on n1 (pid 100) was killed by signal 11 (SIGSEGV); killing the other rank"}},
		{func(p *policy) decision { return p.rankEnded(rank(1, 0, syscall.SIGSEGV, 40), 0, at(41)) }, decision{}},
	}, status: 139, state: stateEnding, told: "rank 0 (app) on n1 (pid 100) was killed by signal 11 (SIGSEGV) first; 1 other rank failed alike"},
	{name: "the held line is told when the grace is over", steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 1, 0, 10), 1, at(30)) },
			decision{stop: term, failed: "rank 0 (app) on n1 (pid 100) exited with status 1; killing the other rank"}},
		{func(p *policy) decision { return p.graceOver() },
			decision{kill: true, say: "rank 0 (app) on n1 (pid 100) exited with status 1; killing the other rank"}},
	}, status: 1, state: stateKilling},
	{name: "quiet: nothing told", pol: policy{quiet: true}, steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(0, 1, 0, 10), 1, at(30)) },
			decision{stop: term, failed: "rank 0 (app) on n1 (pid 100) exited with status 1; killing the other rank"}},
		{func(p *policy) decision { return p.signal(syscall.SIGINT, 1) }, decision{kill: true}},
	}, status: 1, state: stateKilling},
	{name: "exit without finalize is told at once", steps: []step{
		{func(p *policy) decision {
			return p.rankEnded(rankEnd{desc: "rank 1 (app) on n1", pid: 7, connected: true, time: at(1)}, 1, at(2))
		}, decision{stop: term, say: "rank 1 (app) on n1 (pid 7) exited without calling finalize; killing the other rank",
			failed: "rank 1 (app) on n1 (pid 7) exited without calling finalize; killing the other rank"}},
	}, status: 1, state: stateEnding},
	{name: "abort", steps: []step{
		{func(p *policy) decision { return p.aborted("rank 2 (app) on n1", 17, "bad input") },
			decision{stop: term, say: "rank 2 (app) on n1 called abort with status 17: bad input", failed: "rank 2 (app) on n1 called abort with status 17: bad input"}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 17, 0, 5), 0, at(6)) }, decision{}},
	}, status: 17, state: stateEnding},
	{name: "Ctrl-C, then a rank's failure, then Ctrl-C again", steps: []step{
		{func(p *policy) decision { return p.signal(syscall.SIGINT, 4) },
			decision{stop: syscall.SIGINT, say: "received SIGINT; forwarding it to 4 ranks"}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 1, 0, 5), 3, at(6)) }, decision{}},
		{func(p *policy) decision { return p.signal(syscall.SIGINT, 3) }, decision{kill: true}},
	}, status: 130, state: stateKilling},
	{name: "timeout", steps: []step{
		{func(p *policy) decision { return p.timedOut("job timed out after 1s; killing 1 running rank: 0") },
			decision{stop: term, say: "job timed out after 1s; killing 1 running rank: 0", failed: "job timed out after 1s; killing 1 running rank: 0"}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, term, 5), 0, at(6)) }, decision{}},
	}, status: 124, state: stateEnding},
	{name: "a lost node", steps: []step{
		{func(p *policy) decision { return p.nodeLost("n2", errors.New("n2: link closed"), 0) },
			decision{stop: term, say: "lost node n2: link closed", failed: "lost node n2: link closed"}},
	}, status: 1, state: stateEnding},
	{name: "a stalled launcher, not a lost node", steps: []step{
		{func(p *policy) decision { return p.nodeLost("n2", errors.New("n2: link closed"), 15*time.Second) },
			decision{stop: term, say: stallMessage(15*time.Second, 0), failed: stallMessage(15*time.Second, 0)}},
	}, status: 1, state: stateEnding},
	{name: "stdout's reader left", steps: []step{
		{func(p *policy) decision { return p.brokenPipe() }, decision{stop: term}},
		{func(p *policy) decision { return p.brokenPipe() }, decision{}},
	}, status: 141, state: stateEnding},
	{name: "a job-control kill fails the job without ending the others", steps: []step{
		{func(p *policy) decision {
			return p.killRequested("rank 0 of j requested PMIx_Job_control kill of all of j")
		},
			decision{say: "rank 0 of j requested PMIx_Job_control kill of all of j"}},
		{func(p *policy) decision { return p.rankEnded(rank(1, 0, syscall.SIGKILL, 5), 0, at(6)) }, decision{}},
	}, status: 137, state: stateEnding},
	{name: "recovery: the first failure is the status, the others go on", pol: policy{recovery: true}, steps: []step{
		{func(p *policy) decision { return p.rankEnded(rank(1, 4, 0, 5), 2, at(6)) },
			decision{say: "rank 1 (app) on n1 (pid 101) exited with status 4; the other ranks go on (--enable-recovery)"}},
		{func(p *policy) decision { return p.rankEnded(rank(2, 5, 0, 6), 1, at(7)) },
			decision{say: "rank 2 (app) on n1 (pid 102) exited with status 5; the other ranks go on (--enable-recovery)"}},
		{func(p *policy) decision { return p.rankEnded(rank(0, 0, 0, 7), 0, at(8)) }, decision{}},
	}, status: 4, state: stateRunning},
	{name: "recovery with -report-child-jobs-separately: a spawned job's failure decides nothing", pol: policy{recovery: true, primaryOnly: true, quiet: true}, steps: []step{
		{func(p *policy) decision { e := rank(0, 4, 0, 5); e.spawned = true; return p.rankEnded(e, 1, at(6)) }, decision{}},
	}, status: 0, state: stateRunning},
	{name: "a spawn refused: the first failure", steps: []step{
		{func(p *policy) decision { return p.failed("spawn of x by rank 0 refused: no", ExitFailure) },
			decision{stop: term, say: "spawn of x by rank 0 refused: no", failed: "spawn of x by rank 0 refused: no"}},
		{func(p *policy) decision { return p.timedOut("job timed out") }, decision{}},
	}, status: 1, state: stateEnding},
}

// TestPolicy runs the policy's cases.
func TestPolicy(t *testing.T) {
	cases := policyCases
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.pol
			for i, s := range c.steps {
				if got := s.ev(&p); !reflect.DeepEqual(got, s.want) {
					t.Errorf("step %d: decision\n %+v\nwant\n %+v", i, got, s.want)
				}
			}
			if told := p.finish(); told != c.told {
				t.Errorf("told %q at the end, want %q", told, c.told)
			}
			if p.status() != c.status || p.state != c.state {
				t.Errorf("status %d, state %v; want %d, %v", p.status(), p.state, c.status, c.state)
			}
			if p.finish() != "" {
				t.Errorf("told twice")
			}
		})
	}
}

func TestStartStatus(t *testing.T) {
	if got := startStatus(startupAbort{sig: syscall.SIGINT}); got != 130 {
		t.Errorf("SIGINT during the start: %d, want 130", got)
	}
	if got := startStatus(startupAbort{timeout: time.Second}); got != ExitTimeout {
		t.Errorf("timeout during the start: %d, want %d", got, ExitTimeout)
	}
}
