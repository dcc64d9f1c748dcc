package launcher

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"prun/ctl"
)

// Exit statuses that are prun's own (ranks' statuses pass through).
const (
	ExitUsage   = 2   // bad command line or input files
	ExitTimeout = 124 // --timeout expired (like timeout(1))
	ExitFailure = 1   // a launch failure or an internal error
)

// The job's fate. A policy decides what a rank's end, a caught signal, the
// timeout, a lost node or a stalled launcher means for the launch, as
// flux-core's shell doom plugin and PRRTE's errmgr do: events in, decisions
// out. It is pure (no I/O, no clock: times come with the events), so every
// case is a row of a table test (policy_test.go), and prun's exit status is
// computed here alone (status).
type policy struct {
	quiet       bool          // -q: a rank's own ending is not told (the exit status tells it)
	recovery    bool          // --enable-recovery: a rank's failure does not end the job
	primaryOnly bool          // -report-child-jobs-separately: spawned jobs' failures decide no status
	silence     time.Duration // the daemons' silence limit (ctl.Silence), for a stall's message

	state     runState
	fail      *failure       // the first failure: it decides the exit status
	signaled  syscall.Signal // a terminating signal (or SIGPIPE: stdout's reader left) ended the launch
	recovered *failure       // --enable-recovery: the first failure the others rode out

	// A failure by a rank's own end is told once the ranks that failed
	// alike, on their own, are known: at the job's end or when the grace is
	// over (told). Until then it is held here.
	first     *rankEnd
	decidedAt time.Time
	others    int // ranks still running when it was decided
	alike     []rankEnd
	held      bool
}

// runState is where the launch stands. Running → ending (the first
// failure or terminating signal: every rank got the polite signal) →
// killing (the grace is over, or a second terminating signal came: SIGKILL).
type runState int

const (
	stateRunning runState = iota
	stateEnding
	stateKilling
)

func (s runState) String() string {
	return [...]string{"running", "ending", "killing"}[s]
}

// failure is what went wrong and the exit status it gives.
type failure struct {
	msg  string
	code int
}

// decision is what the loop does about an event.
type decision struct {
	say    string         // a line for prun's stderr, "" for none
	stop   syscall.Signal // end the launch: SIGCONT, then this, to every rank; SIGKILL after the grace
	kill   bool           // SIGKILL every rank now
	failed string         // the launch failed (a debugger may look at the ranks: mpir.Aborting)
}

// rankEnd is how a rank ended (ProcExited).
type rankEnd struct {
	desc      string // "rank 2 (app) on n1"
	pid       int
	status    int
	signal    syscall.Signal
	connected bool // it had called PMIx_Init
	finalized bool // ... and PMIx_Finalize
	spawned   bool // of a job the ranks spawned
	time      time.Time
}

// signalStatus is the exit status of an end by sig, as a shell gives it.
func signalStatus(sig syscall.Signal) int { return 128 + int(sig) }

// startStatus is the exit status of a start given up (startupAbort).
func startStatus(a startupAbort) int {
	if a.gone != "" {
		return signalStatus(syscall.SIGHUP)
	}
	if a.sig != 0 {
		return signalStatus(a.sig)
	}
	return ExitTimeout
}

// status is prun's exit status: the first failure's, else the signal's,
// else the first failure ridden out with --enable-recovery, else 0.
func (p *policy) status() int {
	switch {
	case p.fail != nil:
		return p.fail.code
	case p.signaled != 0:
		return signalStatus(p.signaled)
	case p.recovered != nil:
		return p.recovered.code
	}
	return 0
}

// firstFailure is what --report names: the failure that decided the status.
func (p *policy) firstFailure() *failure {
	if p.fail != nil {
		return p.fail
	}
	return p.recovered
}

func (p *policy) ended() bool { return p.state != stateRunning }

// failure says what a rank's end means alone: a failure (with its status)
// or not (ok false).
func (e rankEnd) failure() (msg string, code int, ok bool) {
	switch {
	case e.signal != 0:
		return fmt.Sprintf("%s (pid %d) was killed by signal %d (%s)", e.desc, e.pid, int(e.signal), signalName(e.signal)),
			signalStatus(e.signal), true
	case e.status != 0:
		return fmt.Sprintf("%s (pid %d) exited with status %d", e.desc, e.pid, e.status), e.status, true
	case e.connected && !e.finalized:
		// Its peers may wait for it in a collective for ever: end the job.
		return fmt.Sprintf("%s (pid %d) exited without calling finalize", e.desc, e.pid), ExitFailure, true
	}
	return "", 0, false
}

// alikeTo says whether e failed as first did, on its own: the same status,
// or the same signal where that is not one the termination sends, or was
// before the termination was decided.
func (e rankEnd) alikeTo(first rankEnd, decidedAt time.Time) bool {
	if e.status != first.status || e.signal != first.signal || e.status == 0 && e.signal == 0 {
		return false
	}
	if e.signal == syscall.SIGTERM || e.signal == syscall.SIGKILL {
		return e.time.Before(decidedAt)
	}
	return true
}

// rankEnded: a rank of the launch ended; others are the ranks still
// running besides it, now the loop's time.
func (p *policy) rankEnded(e rankEnd, others int, now time.Time) decision {
	if p.state != stateRunning {
		// The launch is ending; later ends are its consequence, unless
		// they failed as the first did.
		if p.first != nil && e.alikeTo(*p.first, p.decidedAt) {
			p.alike = append(p.alike, e)
		}
		return decision{}
	}
	msg, code, ok := e.failure()
	if !ok {
		return decision{}
	}
	if p.recovery {
		// The others go on; the first failure is the exit status once they
		// are done (the primary job's first, with -report-child-jobs-separately).
		if p.recovered == nil && !(p.primaryOnly && e.spawned) {
			p.recovered = &failure{msg: msg, code: code}
		}
		if p.quiet {
			return decision{}
		}
		return decision{say: msg + "; the other ranks go on (--enable-recovery)"}
	}
	d := p.failWith(msg+killing(others), code, !p.quiet)
	if e.status != 0 || e.signal != 0 {
		e := e
		p.first, p.decidedAt, p.others, p.held = &e, now, others, d.say != ""
		d.say = ""
	}
	return d
}

// aborted: a rank called PMIx_Abort (MPI_Abort).
func (p *policy) aborted(desc string, status int, why string) decision {
	msg := fmt.Sprintf("%s called abort with status %d", desc, status)
	if why != "" {
		msg += ": " + why
	}
	return p.failWith(msg, status, !p.quiet)
}

// failed: the launch cannot go on (a rank that could not start, a lost
// node, a refused or failed spawn), with status code.
func (p *policy) failed(msg string, code int) decision { return p.failWith(msg, code, true) }

// timedOut: --timeout expired; msg names the ranks still running.
func (p *policy) timedOut(msg string) decision { return p.failed(msg, ExitTimeout) }

// nodeLost: a node's daemon is gone, and its ranks with it. A launcher
// that was stopped for stalled (> 0) finds its daemons gone because they
// gave up on its silence: that, not the node, is the cause.
func (p *policy) nodeLost(host string, err error, stalled time.Duration) decision {
	if stalled > 0 {
		return p.failed(stallMessage(stalled, p.silence), ExitFailure)
	}
	return p.failed(fmt.Sprintf("lost node %s: %s", host, strings.TrimPrefix(err.Error(), host+": ")), ExitFailure)
}

// brokenPipe: prun | head, the reader is gone. The launch ends as SIGPIPE
// ends a pipeline's writer, quietly, with 128+SIGPIPE.
func (p *policy) brokenPipe() decision {
	if p.state != stateRunning {
		return decision{}
	}
	p.state, p.signaled = stateEnding, syscall.SIGPIPE
	return decision{stop: syscall.SIGTERM}
}

// signal: a terminating signal reached prun (SIGINT, SIGTERM, SIGHUP,
// SIGQUIT); running ranks are told it passes on. A second one: no more
// grace.
func (p *policy) signal(sig syscall.Signal, ranks int) decision {
	if p.state != stateRunning {
		p.state = stateKilling
		if p.signaled == 0 {
			p.signaled = sig
		}
		return decision{kill: true}
	}
	p.state, p.signaled = stateEnding, sig
	d := decision{stop: sig}
	if !p.quiet {
		d.say = fmt.Sprintf("received %s; forwarding it to %d ranks", signalName(sig), ranks)
	}
	return d
}

// submitterGone: a persistent runtime's submitter went away while its job
// ran (its connection closed: it exited, or was killed without a word).
// The job ends as a standalone launch whose terminal hung up does (SIGHUP
// to the ranks, 128+SIGHUP), and says why: no signal reached anyone (it
// used to say "received SIGHUP"). Once the job is ending, its ranks are
// killed at once, as after a second signal: nobody waits for them.
func (p *policy) submitterGone(why string, ranks int) decision {
	if p.state != stateRunning {
		p.state = stateKilling
		if p.fail == nil && p.signaled == 0 {
			p.fail = &failure{msg: why, code: signalStatus(syscall.SIGHUP)}
		}
		return decision{kill: true}
	}
	p.state, p.fail = stateEnding, &failure{msg: why, code: signalStatus(syscall.SIGHUP)}
	return decision{stop: syscall.SIGHUP, failed: why, say: fmt.Sprintf("%s; ending its job: SIGHUP to %d rank%s", why, ranks, plural(ranks))}
}

// killRequested: a rank asked PMIx_Job_control to kill ranks (the loop
// sends that SIGKILL to them alone): the first such request is the
// launch's failure, with 128+SIGKILL, unless another came first.
func (p *policy) killRequested(msg string) decision {
	if p.fail != nil {
		return decision{}
	}
	p.fail = &failure{msg: msg, code: signalStatus(syscall.SIGKILL)}
	p.state = max(p.state, stateEnding)
	return decision{say: msg}
}

// graceOver: the grace after the polite signal passed; a failure held
// until now is told now.
func (p *policy) graceOver() decision {
	p.state = stateKilling
	return decision{kill: true, say: p.tell()}
}

// finish: every job is over; what is left to tell.
func (p *policy) finish() string { return p.tell() }

// tell returns the held failure line once: the first rank by time of
// those that failed alike, and how many others did.
func (p *policy) tell() string {
	if !p.held {
		return ""
	}
	p.held = false
	msg, _, _ := p.first.failure()
	if len(p.alike) == 0 {
		return msg + killing(p.others)
	}
	all := append([]rankEnd{*p.first}, p.alike...)
	firstByTime := all[0]
	for _, e := range all[1:] {
		if e.time.Before(firstByTime.time) {
			firstByTime = e
		}
	}
	msg, _, _ = firstByTime.failure()
	n := len(p.alike)
	msg += fmt.Sprintf(" first; %d other rank%s failed alike", n, plural(n))
	msg += killing(p.others - n)
	p.fail.msg = msg
	return msg
}

func (p *policy) failWith(msg string, code int, say bool) decision {
	if p.state != stateRunning {
		return decision{}
	}
	p.state, p.fail = stateEnding, &failure{msg: msg, code: code}
	d := decision{stop: syscall.SIGTERM, failed: msg}
	if say {
		d.say = msg
	}
	return d
}

func killing(others int) string {
	switch {
	case others <= 0:
		return ""
	case others == 1:
		return "; killing the other rank"
	}
	return fmt.Sprintf("; killing the other %d ranks", others)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// startupAbort is why the other nodes' start was given up.
type startupAbort struct {
	sig     syscall.Signal // a terminating signal, or
	gone    string         // a persistent runtime's submitter went away (submitterGone), or
	timeout time.Duration  // the job's --timeout
	while   string         // what was under way; default: the daemons' start
}

func (a startupAbort) Error() string {
	while := a.while
	if while == "" {
		while = "the other nodes' daemons started"
	}
	if a.gone != "" {
		return a.gone + " while " + while + "; no rank had started"
	}
	if a.sig != 0 {
		return "received " + signalName(a.sig) + " while " + while + "; no rank had started"
	}
	return fmt.Sprintf("job timed out after %s while %s; no rank had started", a.timeout, while)
}

// stallMessage names a launcher's stall as the cause of the job's end; its
// daemons' silence limit was limit (ctl.DeadAfter when 0).
func stallMessage(d, limit time.Duration) string {
	if limit == 0 {
		limit = ctl.DeadAfter
	}
	return fmt.Sprintf("the launcher was stopped for %v; its daemons gave up on it after %v without a heartbeat",
		d.Round(time.Second), limit)
}

// SignalName is sig's name as prun says it ("SIGTERM").
func SignalName(sig syscall.Signal) string { return signalName(sig) }

func signalName(sig syscall.Signal) string {
	if n := sigNames[sig]; n != "" {
		return n
	}
	return sig.String()
}

var sigNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGCHLD: "SIGCHLD",
	syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGXCPU: "SIGXCPU",
}
