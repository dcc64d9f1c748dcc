package launcher

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/hostfile"
	"prun/internal/trace"
	"prun/jobspec"
	"prun/mapper"
	"prun/remote"
	"prun/sessiondir"
	"prun/topology"
)

// standalone is the runtime of a launch of its own (Run): it starts the
// nodes' daemons for its one job (this node's in-process, the others' as
// a tree) and ends them with it; it owns the session directory, upstream
// and the launch's signals, and gives the ranks prun's own stdin and
// terminal.
type standalone struct {
	daemons
	sess         *sessiondir.Dir
	namesChecked bool // the other nodes' names resolve (checkNames): once, though the job is mapped again
}

func (st *standalone) place(r *run, job *jobspec.Job) (*mapper.Map, int) {
	m, code, err := r.mapJob(job, func(job *jobspec.Job) (hostfile.Allocation, string, map[string]bool, error) {
		return st.allocate(r, job)
	})
	if err != nil {
		r.errorf("%v", err)
	}
	return m, code
}

// allocate resolves the job's allocation (resource manager, hostfile,
// --host, the contexts' own hostfiles, else this host) and checks that
// the other nodes' names resolve.
func (st *standalone) allocate(r *run, job *jobspec.Job) (hostfile.Allocation, string, map[string]bool, error) {
	alloc, source, fromCores, err := allocate(job.Place, job.Apps, r.topos.cores)
	if err != nil {
		return alloc, source, fromCores, err
	}
	if err := localLogin(alloc, job.Place.LocalHost); err != nil {
		return alloc, source, fromCores, err
	}
	// Before the map, whose complaints (too few slots there) would come
	// first; not for a map only shown, nor one on this node alone.
	if !st.namesChecked && !job.Place.DoNotLaunch && !job.Launch.LocalOnly {
		st.namesChecked = true
		if err := checkNames(job, alloc, source, r.opts.Env); err != nil {
			return alloc, source, fromCores, err
		}
	}
	return alloc, source, fromCores, nil
}

// attach creates the session directory and upstream (with -nameserver's
// name server in front of its own); the daemons start in the next phases.
func (st *standalone) attach(r *run, s *startup) (*daemons, int) {
	sess, err := sessiondir.Create(r.opts.TmpDir)
	if err != nil {
		r.errorf("%v", err)
		return nil, ExitFailure
	}
	st.sess = sess
	s.defer_(func() { sess.Remove(); trace.Mark("session directory removed") })
	trace.Mark("session directory")
	r.out.SetSpillDir(sess.Top)
	// Ordered output spilled into the session directory must print before
	// the directory goes.
	s.defer_(func() { r.out.Flush() })
	up := newUpstream(r.out, r.jobs, r.q)
	st.up = up
	s.defer_(func() { up.names.Close() })
	if s.job.NameServer != "" {
		sn := newSharedNames(up.names, s.job.NameServer, func(err error) { r.errorf("-nameserver: %v", err) })
		up.ns = sn
		s.defer_(sn.close)
	}
	return &st.daemons, 0
}

// startNodes starts the other nodes' daemons (as a tree), which report
// their topologies, and maps the job again on what they reported.
func (st *standalone) startNodes(r *run, s *startup) int {
	job := s.job
	hosts := remoteHosts(r.alloc, job.Place.LocalHost)
	if len(hosts) == 0 {
		return 0
	}
	trace.Mark("mapped; starting %d daemons", len(hosts))
	onHello := func(up, of int) {
		if r.showProgress && progressStep(up, of) {
			r.out.Printf("prun: %d of %d daemons up\n", up, of)
		}
	}
	tree, pending, err := startWatched(job, s.sigs, s.deadline, func(ctx context.Context) (*remote.Tree, error) {
		return st.startTree(ctx, job, hosts, r.opts.Env, r.alloc, onHello)
	})
	trace.Mark("daemons up")
	if err != nil {
		r.errorf("%v", err)
		if abort := (startupAbort{}); errors.As(err, &abort) {
			return startStatus(abort)
		}
		return ExitFailure
	}
	s.replay = pending
	st.tree = tree
	st.up.setTree(tree)
	s.defer_(func() { tree.Close() })
	st.stall = startStallWatch(ctl.Silence(len(hosts)))
	s.defer_(st.stall.close)
	if job.Place.Topology == "" {
		r.topos.reported = map[string]*topology.Topology{}
		for _, h := range hosts {
			if t := tree.Topology(h); t != nil {
				r.topos.reported[h] = t
			}
		}
		var code int
		if s.m, code = st.place(r, job); s.m == nil {
			return code
		}
	}
	for _, h := range hosts {
		st.up.addNode(h, tree.Node(h))
	}
	return 0
}

// startLocal routes stdin and starts this node's daemon when ranks run
// here, or a tool will attach here (--report-uri).
func (st *standalone) startLocal(r *run, s *startup) int {
	localName, stdin, tty := st.routeStdin(r, s)
	if localName == "" && s.job.ReportURI != "" {
		// No rank here, but a tool will attach here (--report-uri): a
		// daemon without ranks serves it, hears every job's end and
		// answers its queries, as the nodes' daemons do.
		localName = st.toolNodeName(s)
	}
	if localName != "" {
		cfg := daemon.Config{Name: localName, Session: st.sess, BaseEnv: r.opts.Env, Stdin: stdin, TTY: tty}
		if st.tree != nil {
			cfg.Network = st.tree.LocalNetwork()
		}
		trace.Mark("starting the local daemon")
		d, err := daemon.New(cfg, st.up)
		if err != nil {
			r.errorf("cannot start the PMIx server: %v", err)
			return ExitFailure
		}
		st.local = d
		st.up.addNode(localName, d)
	}
	if s.job.ReportURI != "" {
		if err := st.reportURI(s.job.ReportURI, r.opts); err != nil {
			r.errorf("--report-uri %s: %v", s.job.ReportURI, err)
			st.abandon(r)
			return ExitFailure
		}
	}
	return 0
}

// routeStdin decides which nodes read stdin: this one through its daemon's
// own reader (stdin), or several through a fan-out. An interactive rank
// here gets a pseudo-terminal (tty: prun's) and prun's terminal goes raw,
// so that keys (Ctrl-C too) reach the rank as typed; the terminal's state
// comes back on every ending but SIGKILL. localName is this node's name
// when ranks run here.
func (st *standalone) routeStdin(r *run, s *startup) (localName string, stdin io.Reader, tty *os.File) {
	job, m, plan := s.job, s.m, s.plan
	localStdin := false
	var remoteStdin []*remote.Node
	for _, n := range m.Nodes {
		if len(n.Procs) == 0 {
			continue
		}
		reads := plan.Stdin == daemon.StdinAll || plan.Stdin >= 0 && m.Nodes[m.Procs[plan.Stdin].Node].Name == n.Name
		if isLocal(n.Name, job.Place.LocalHost) && st.up.node(n.Name) == nil {
			localName, localStdin = n.Name, reads
		} else if reads {
			remoteStdin = append(remoteStdin, st.up.node(n.Name).(*remote.Node))
		}
	}
	stdin = r.opts.Stdin
	if len(remoteStdin) > 0 && stdin != nil {
		if local := fanStdin(r.opts.Stdin, localStdin, remoteStdin, plan.Nspace); local != nil {
			stdin = local
		}
	}
	if f, ok := r.opts.Stdin.(*os.File); ok && localStdin && len(remoteStdin) == 0 && plan.Stdin >= 0 &&
		(job.PTY == jobspec.PTYOn || job.PTY == jobspec.PTYAuto && isTerminal(f)) {
		plan.PTY = true
		if isTerminal(f) {
			tty = f
			if restore, err := makeRaw(f); err == nil {
				s.defer_(restore)
			}
		}
	}
	return localName, stdin, tty
}

// toolNodeName is the name of this node's daemon when no rank runs here:
// this node's name in the map, else its host name.
func (st *standalone) toolNodeName(s *startup) string {
	for _, n := range s.m.Nodes {
		if isLocal(n.Name, s.job.Place.LocalHost) && st.up.node(n.Name) == nil {
			return n.Name
		}
	}
	if me, err := hostname(); err == nil && st.up.node(me) == nil {
		return me
	}
	return "prun-launcher"
}

func (st *standalone) own(*run, string) {} // upstream's queue is the run's

// finish waits (a while) for the jobs' end events to be delivered, then
// ends every daemon.
func (st *standalone) finish(r *run) {
	r.events.wait(5 * time.Second)
	st.abandon(r)
}

func (st *standalone) abandon(r *run) {
	if err := st.close(); err != nil {
		r.errorf("%v", err)
	}
}

// nodeLost ends the launch: upstream drops the node, and the policy weighs
// the loss against the launch's own stalls (a launcher that was stopped
// may have been the one silent).
func (st *standalone) nodeLost(r *run, nl nodeLost, _ bool) {
	st.up.dropNode(nl.host)
	r.pol.silence = st.stall.silence()
	r.act(r.pol.nodeLost(nl.host, nl.err, st.stall.recent()))
}

// suspend is Ctrl-Z (SIGTSTP), a person's job control, ridden out as a
// shell job would be: every rank on every node stops (SIGSTOP, as mpirun
// forwards SIGTSTP), the daemons are told to expect no heartbeats, then
// prun stops itself. Once continued (fg, bg, kill -CONT) the daemons
// expect heartbeats again and the ranks continue; the job goes on to its
// own end. prun stops with SIGSTOP, not its caught SIGTSTP's default
// action: the kernel discards a SIGTSTP to an orphaned process group,
// which would leave the ranks stopped and prun running.
func (st *standalone) suspend(r *run) {
	r.signalAll(syscall.SIGSTOP)
	if st.tree != nil {
		st.tree.Suspend()
	}
	stopSelf()
	if st.tree != nil {
		st.stall.reset()
		st.tree.Resume()
	}
	r.signalAll(syscall.SIGCONT)
}

// cachesJobEnds: the servers end with the launch.
func (st *standalone) cachesJobEnds() bool { return true }

var _ rte = (*standalone)(nil)

// reportURI reports this node's PMIx server's URI as --report-uri asks
// (mpirun's, whose URI tools used; PMIx tools attach by it).
func (st *standalone) reportURI(where string, opts Options) error {
	if st.local == nil {
		return errors.New("no rank runs on this node, so no PMIx server does")
	}
	uri, err := st.local.ServerURI()
	if err != nil {
		return err
	}
	return reportLine(where, uri+"\n", opts)
}
