package spawn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"prun/remote/wire"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"prun/daemon"
	"prun/internal/trace"
)

// ChooseAgent resolves -launcher: "slurm" inside a Slurm allocation (its job
// id and node list in env) unless an --rsh command was given, else "ssh"
// for "" or "auto"; an explicit word stays. Slurm outside an allocation is
// an error.
func ChooseAgent(want, rshCmd string, env []string) (string, error) {
	get := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	inAlloc := (get("SLURM_JOB_ID") != "" || get("SLURM_JOBID") != "") &&
		(get("SLURM_JOB_NODELIST") != "" || get("SLURM_NODELIST") != "")
	switch want {
	case "", "auto":
		if inAlloc && rshCmd == "" {
			return wire.AgentSlurm, nil
		}
		return wire.AgentSSH, nil
	case wire.AgentSlurm:
		if !inAlloc {
			return "", errors.New("-launcher slurm: not inside a Slurm allocation (no SLURM_JOB_ID and SLURM_JOB_NODELIST)")
		}
		return wire.AgentSlurm, nil
	}
	return wire.AgentSSH, nil
}

// srunArgs is the step that starts one daemon on each of hosts: one task
// per node on exactly those nodes, no CPU or memory binding (the daemon
// binds its ranks itself; the step holds all of the job's CPUs on its
// nodes, as a step does without --exact), no MPI plugin of Slurm's, other
// steps allowed beside it (--overlap: the ranks' own srun, a second prun),
// and stdin broadcast to every task (the bootstrap, then EOF when the
// launcher lets go). The daemons print nothing on stdout; stderr says why
// a step or a task ended (srun's own lines too).
func srunArgs(hosts []string, argv []string) []string {
	n := fmt.Sprint(len(hosts))
	a := []string{"--job-name=prun-daemons", "--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1",
		"--nodelist=" + strings.Join(hosts, ","), "--cpu-bind=none", "--mem-bind=none", "--mpi=none",
		"--overlap", "--input=all", "--kill-on-bad-exit=0"}
	return append(a, argv...)
}

// step is the Slurm step running a vertex's children's daemons.
type step struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    tailFile // srun's stdout and stderr
	Ended  chan struct{}
	err    error // after ended: how srun exited
	closed sync.Once

	// The verdict on the step's end, asked of Slurm once (slurmFail).
	asked       sync.Once
	verdictHost string    // the node Slurm declared failed ("": none)
	verdict     string    // "" when Slurm said nothing telling
	named       sync.Once // verdictHost reported lost, by the first other node's report; the others wait for it
}

// SlurmEndedStep starts a daemon's word that Slurm signalled its step.
const SlurmEndedStep = "Slurm ended the daemons' step"

// SlurmStep says whether this vertex's children run as a Slurm step.
func (s *Spawner) SlurmStep() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.Step != nil
}

// SlurmFail reports child v lost, in a Slurm step, with Slurm's own word
// on the job where it has one: the first report asks slurmctld (every
// other waits for that answer), and all of them then name the node Slurm
// declared failed and the job's state (NODE_FAIL, CANCELLED, TIMEOUT),
// so that prun's exit says "node failure" and which node, rather than
// the daemon that happened to hear Slurm's SIGTERM first.
func (s *Spawner) SlurmFail(v int, err error) {
	s.Mu.Lock()
	st := s.Step
	s.Mu.Unlock()
	if st == nil {
		s.fail(v, err)
		return
	}
	st.asked.Do(func() {
		st.verdictHost, st.verdict = askSlurm(s.Env, s.Boot.Hosts)
	})
	if st.verdict == "" {
		s.fail(v, err)
		return
	}
	// The failed node first, once; then v itself, which is lost too (its
	// daemon ends on Slurm's SIGTERM or has ended): every node must be
	// reported, or the launcher waits for ranks no daemon will report.
	// (A flag set before the report let a second node's report overtake it:
	// prun named prun-s1, not the failed prun-s2. sync.Once makes the
	// others wait until it is queued.)
	if st.verdictHost != "" {
		for i, h := range s.Boot.Hosts {
			if h == st.verdictHost && i+1 != v {
				st.named.Do(func() { s.fail(i+1, errors.New(st.verdict)) })
			}
		}
	}
	s.fail(v, errors.New(st.verdict))
}

// askSlurm asks slurmctld how the job stands (squeue) and which of hosts
// it declared down or failing (sinfo), each within a few seconds: the
// node to name (a failed one, "" if none) and the verdict ("" if Slurm
// says the job is still running and no node failed).
func askSlurm(env []string, hosts []string) (host, verdict string) {
	job := lookupEnv(env, "SLURM_JOB_ID")
	if job == "" {
		job = lookupEnv(env, "SLURM_JOBID")
	}
	if job == "" {
		return "", ""
	}
	// Both at once, within 2 s: the caller holds a link's reader, whose
	// heartbeats must not go unread for long.
	var state, down string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// COMPLETING hides how the job ended until its steps are gone
		// (this one's daemons exit as they report): ask again a while.
		for end := time.Now().Add(1500 * time.Millisecond); ; time.Sleep(100 * time.Millisecond) {
			out, err := slurmQuery(env, "squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r")
			if err != nil {
				break
			}
			state, _, _ = strings.Cut(strings.TrimSpace(out), "\n")
			if !strings.HasPrefix(state, "COMPLETING") || time.Now().After(end) {
				break
			}
		}
	}()
	go func() {
		defer wg.Done()
		if out, err := slurmQuery(env, "sinfo", "-h", "-N", "-n", strings.Join(hosts, ","), "-o", "%N|%T|%E"); err == nil {
			down, host = downNode(out)
		}
	}()
	wg.Wait()
	st, reason, _ := strings.Cut(state, "|")
	switch {
	case down != "":
		verdict = "node failure: Slurm declared " + down
		if st != "" && st != "COMPLETING" {
			verdict += "; job " + job + " " + st
		}
	case st != "" && st != "RUNNING":
		verdict = fmt.Sprintf("%s: Slurm's job %s is %s", SlurmEndedStep, job, st)
		if reason != "" && reason != "None" {
			verdict += " (" + reason + ")"
		}
	}
	return host, verdict
}

// downNode picks, from sinfo's "node|state|reason" lines, the first node
// down, failing or not responding (a state ending in "*"), described as
// "prun-s2 down* (Not responding)".
func downNode(out string) (desc, host string) {
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(l, "|", 3)
		if len(f) < 2 || f[0] == "" {
			continue
		}
		st := f[1]
		if strings.HasPrefix(st, "down") || strings.HasPrefix(st, "fail") || strings.HasSuffix(st, "*") {
			desc = f[0] + " " + st
			if len(f) == 3 && f[2] != "" && f[2] != "none" {
				desc += " (" + f[2] + ")"
			}
			return desc, f[0]
		}
	}
	return "", ""
}

func lookupEnv(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return os.Getenv(k)
}

// slurmQuery runs a Slurm client command, for at most 2 s.
func slurmQuery(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.Output()
	return string(out), err
}

// startStep launches every child of the launcher as one srun step. Each
// daemon reads the same bootstrap (Vertex 0: it finds its own vertex by
// its Slurm node name) from the step's stdin, which srun broadcasts: the
// secret is on no command line and in no environment, and goes no further
// than Slurm's own I/O connections to the nodes.
//
// A launcher that dies (SIGKILL) sends srun no signal: srun answers
// SIGTERM, SIGHUP and SIGQUIT, and a failed write of its output (EPIPE),
// by SIGKILLing the step, and a SIGKILLed daemon leaves its session
// directory behind. The daemons end by themselves, cleanly, as their stdin
// closes and their links to the launcher go; srun then ends with its step.
// srun's output therefore goes to a memory file, which no death of the
// launcher makes fail, not to a pipe.
func (s *Spawner) startStep(kids []int, env []string) {
	b := s.Boot
	b.Vertex = 0
	line, err := json.Marshal(b)
	if err != nil {
		s.failAll(kids, err)
		return
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		s.failAll(kids, errors.New("-launcher slurm: srun not found on PATH"))
		return
	}
	hosts := make([]string, len(kids))
	for i, v := range kids {
		hosts[i] = s.host(v)
	}
	out, err := newMemFile("prun-srun")
	if err != nil {
		s.failAll(kids, fmt.Errorf("srun's output: %v", err))
		return
	}
	st := &step{Ended: make(chan struct{}), out: tailFile{out}}
	cmd := exec.Command(srun, srunArgs(hosts, daemonCommand(b.Exe))...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a Ctrl-C on the launcher's terminal is the
	// launcher's to handle (srun would print its status, or end the step).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if st.stdin, err = cmd.StdinPipe(); err != nil {
		out.Close()
		s.failAll(kids, err)
		return
	}
	st.cmd = cmd
	if err := cmd.Start(); err != nil {
		out.Close()
		s.failAll(kids, fmt.Errorf("srun: %v", err))
		return
	}
	go func() {
		st.err = cmd.Wait()
		trace.Mark("srun exited")
		close(st.Ended)
	}()
	s.Mu.Lock()
	s.Step = st
	s.Mu.Unlock()
	st.stdin.Write(append(line, '\n')) // the pipe holds it: srun reads it once the step runs
	trace.Mark("srun started")
	go func() {
		select {
		case <-st.Ended:
		case <-s.ctx.Done():
			return
		}
		// The step ended with the daemons still needed (scancel, a node
		// lost, a daemon that could not start).
		why := st.reason()
		for _, v := range kids {
			s.SlurmFail(v, fmt.Errorf("%s", why))
		}
	}()
	go func() {
		wait := b.ConnectTimeout + 10*time.Second
		select {
		case <-st.Ended:
		case <-s.ctx.Done():
		case <-time.After(wait):
			s.Mu.Lock()
			var missing []int
			for _, v := range kids {
				if s.Links[v] == nil {
					missing = append(missing, v)
				}
			}
			s.Mu.Unlock()
			for _, v := range missing {
				s.fail(v, fmt.Errorf("the daemon (Slurm step of srun) did not connect back to port %d of %s within %v: %s",
					b.ParentPort, strings.Join(b.ParentAddrs, ", "), wait, st.out.last()))
			}
		}
	}()
}

func (s *Spawner) failAll(kids []int, err error) {
	for _, v := range kids {
		s.fail(v, err)
	}
}

// reason says how the step ended, from srun's exit and its last words
// ("slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT ... ***").
func (st *step) reason() string {
	how := "exited"
	var ee *exec.ExitError
	if errors.As(st.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "killed by " + ws.Signal().String()
		} else {
			how = fmt.Sprintf("exited with status %d", ee.ExitCode())
		}
	}
	msg := "the daemons' Slurm step ended (srun " + how + ")"
	if l := st.out.last(); l != "" {
		msg += ": " + l
	}
	return msg
}

// stepReason adds the step's end to a lost link's error when the step
// ended too (the link usually goes first): what Slurm did is the news.
func (s *Spawner) stepReason(err error) error {
	s.Mu.Lock()
	st := s.Step
	s.Mu.Unlock()
	if st == nil {
		return err
	}
	select {
	case <-st.Ended:
	case <-time.After(2 * time.Second):
		return err
	}
	return errors.New(st.reason())
}

// close lets the step go: stdin's EOF ends every daemon (they end anyway
// when their links close); srun, if it outlives them by the grace (a node
// that stopped answering), is killed, which Slurm counts as the step's end.
func (st *step) close(grace time.Duration) {
	st.closed.Do(func() {
		st.stdin.Close()
		go func() {
			select {
			case <-st.Ended:
			case <-time.After(grace):
				st.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-st.Ended:
				case <-time.After(grace):
					st.cmd.Process.Kill()
				}
			}
		}()
	})
}

// tailFile is what srun and the daemons wrote (stdout and stderr, one
// file), read from its end.
type tailFile struct{ f *os.File }

// newMemFile is a file in memory (memfd_create), gone with its last
// descriptor.
func newMemFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// tailSize is how much of the end of srun's output is read: its last lines.
const tailSize = 8 << 10

func (t tailFile) String() string {
	fi, err := t.f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-tailSize, 0)
	b := make([]byte, fi.Size()-off)
	n, _ := t.f.ReadAt(b, off)
	return string(b[:n])
}

// last is the most telling line: Slurm's "***" line if any, else the
// last error, else the last line.
func (t tailFile) last() string {
	lines := strings.Split(strings.TrimSpace(t.String()), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "***") {
			return strings.TrimSpace(lines[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.Contains([]byte(lines[i]), []byte("error")) {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// The Slurm variables of a rank. A rank on any node sees the job as prun
// was given it (salloc's, sbatch's, or the step's prun runs in): the
// launcher's SLURM_* variables, never those srun gave the daemons' step
// (its job name prun-daemons, its step id, nodes and tasks). Three kinds
// stay apart:
//   - a node's own (slurmNodeVar): each daemon keeps its node's, and
//     SLURM_NODEID is the node's index in the launcher's SLURM_NODELIST
//     (the batch step's rule: its first node is 0);
//   - a Slurm task's identity (SLURM_PROCID, SLURM_LOCALID, ...): no
//     rank is a Slurm task, so no rank gets one (daemon.Inherited drops
//     them on every node, prun's own included);
//   - the rest: the job's, sent in the bootstrap (slurmJobEnv).

// SlurmNodeVar names the variables that describe the node a process runs on.
func SlurmNodeVar(k string) bool {
	switch k {
	case "SLURM_NODEID", "SLURM_CPUS_ON_NODE", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN":
		return true
	}
	return false
}

// SlurmJobEnv is what of the launcher's environment describes its Slurm
// job for the ranks of other nodes: its SLURM_* variables less the node's
// own and a task's identity.
func SlurmJobEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") && !SlurmNodeVar(k) && daemon.Inherited(kv) {
			out = append(out, kv)
		}
	}
	return out
}
