package launcher

import (
	"sort"
	"sync"
	"syscall"

	"prun/daemon"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
	"prun/remote"
)

// node is a node's daemon as the launcher drives it: the in-process
// daemon.Daemon for this node, a remote.Node for the others.
type node interface {
	Launch(*daemon.Plan) error
	Signal(nspace string, ranks []int, sig syscall.Signal)
	ServeDirectModex(target pmixsrv.Proc, done func([]byte, error))
	DeliverEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) error
	Inspect(nspace string, stacks bool) []daemon.RankState
	// Forget drops a job that is over: its shell, its namespace.
	Forget(nspace string)
}

// upstream is the launcher's side of every daemon link. It routes what
// spans nodes (fences, direct modex, events, job control) between daemons,
// serves the name service and the process table, and queues daemon events
// for the launcher's loop. What it knows of jobs it reads from the
// loop's job table (jobIndex): it keeps no job state of its own.
type upstream struct {
	outSink
	names *names.Service
	ns    daemon.NameService // what daemons reach: names, or sharedNames over it (-nameserver)
	queue *queue

	jobs jobIndex // the loop's job table, read-only here

	mu      sync.Mutex
	daemons map[string]node // by node name
	tree    *remote.Tree    // the other nodes' daemons (nil: none)
	// root is the launcher's vertex of every collective (remote.Root):
	// its own node's contributions and its children's combine there.
	root *remote.Root
	grp  groups // PMIx groups at the root: context ids, members watched (groups.go)

	foreignOnce sync.Once // the refused connection to another launch's job is told once
}

// outSink is where the ranks' output goes: the launch's iof.Writer, or a
// persistent runtime's router to each submission's Writer.
type outSink interface {
	iof.Sink
	iof.Ender
	iof.InfoSink
	Printf(format string, a ...any)
}

// newUpstream routes output to w and the daemons' events, spawns and job
// control to q, reading the jobs from jobs.
func newUpstream(w outSink, jobs jobIndex, q *queue) *upstream {
	u := &upstream{outSink: w, names: names.New(), queue: q, jobs: jobs,
		daemons: map[string]node{}, root: remote.NewRoot()}
	u.root.Finish = u.finish
	u.root.TimedOut = func(err error) { u.Printf("prun: %v\n", err) }
	return u
}

func (u *upstream) Event(ev daemon.Event) {
	if ev.Kind == daemon.ProcExited {
		u.rankEnded(ev) // before the loop may end the job: members learn why
	}
	u.queue.push(ev)
}

// addNode, dropNode, node and nodes keep the set of daemons, which the
// state machine changes and the routing goroutines read.
func (u *upstream) addNode(name string, n node) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.daemons[name] = n
}

func (u *upstream) dropNode(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.daemons, name)
}

func (u *upstream) node(name string) node {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.daemons[name]
}

// signal sends sig to ranks of job nspace (nil: all of them) on the nodes
// that host them (every node when the job's map does not say): this node's
// daemon directly, the others' in one call of the tree's, which sends a
// signal for many nodes down the tree as one broadcast (remote.Tree.Signal).
func (u *upstream) signal(nspace string, ranks []int, sig syscall.Signal) {
	procs := []pmixsrv.Proc{{Nspace: nspace, Rank: pmixsrv.RankWildcard}}
	if ranks != nil {
		procs = procs[:0]
		for _, r := range ranks {
			procs = append(procs, pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.Rank(r)})
		}
	}
	hosts, ok := u.nodesOf(procs)
	if !ok {
		hosts = nil
	}
	tree, here, remotes := u.split(hosts, "")
	for _, n := range here {
		n.Signal(nspace, ranks, sig)
	}
	if len(remotes) > 0 {
		tree.Signal(nspace, ranks, sig, remotes)
	}
}

// deliver hands a PMIx event to the servers of the nodes hosts (nil: every
// node) but skip's (the node that raised it): this node's daemon directly,
// the others' in one call of the tree's, which sends an event for many
// nodes down the tree as one broadcast (remote.Tree.DeliverEvent). It
// returns once this node's server took it.
func (u *upstream) deliver(hosts map[string]bool, skip string, code pmixsrv.Status, source pmixsrv.Proc,
	rng pmixsrv.DataRange, info []pmixsrv.Info) {
	tree, here, remotes := u.split(hosts, skip)
	if len(remotes) > 0 {
		tree.DeliverEvent(code, source, rng, info, remotes, skip)
	}
	for _, n := range here {
		n.DeliverEvent(code, source, rng, info)
	}
}

// forget drops a job that is over from every node: this node's daemon
// directly (it returns once the job's ranks were reaped), the others' in one
// call of the tree's (remote.Tree.Forget: a broadcast for many nodes).
func (u *upstream) forget(nspace string) {
	tree, here, remotes := u.split(nil, "")
	if len(remotes) > 0 {
		tree.Forget(nspace, remotes)
	}
	for _, n := range here {
		n.Forget(nspace)
	}
}

// split divides the daemons of hosts (nil: every node) but skip into those
// the launch tree reaches (by name, sorted) and the others (this node's).
func (u *upstream) split(hosts map[string]bool, skip string) (tree *remote.Tree, here []node, remotes []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for name, n := range u.daemons {
		if hosts != nil && !hosts[name] || name == skip {
			continue
		}
		if _, ok := n.(*remote.Node); ok && u.tree != nil {
			remotes = append(remotes, name)
		} else {
			here = append(here, n)
		}
	}
	sort.Strings(remotes)
	return u.tree, here, remotes
}

// setTree gives the upstream the launch tree of the other nodes' daemons.
func (u *upstream) setTree(t *remote.Tree) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tree = t
}

// nodes are the daemons in node-name order.
func (u *upstream) nodes() []node {
	u.mu.Lock()
	defer u.mu.Unlock()
	names := make([]string, 0, len(u.daemons))
	for name := range u.daemons {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]node, len(names))
	for i, name := range names {
		out[i] = u.daemons[name]
	}
	return out
}

func (u *upstream) Names() daemon.NameService {
	if u.ns != nil {
		return u.ns
	}
	return daemon.LocalNames{S: u.names}
}

// foreign returns a namespace of procs that is none of this launch's jobs.
func (u *upstream) foreign(procs []pmixsrv.Proc) string {
	for _, p := range procs {
		if u.jobs.plan(p.Nspace) == nil {
			return p.Nspace
		}
	}
	return ""
}

// nodesOf returns the names of the nodes that host any of procs.
func (u *upstream) nodesOf(procs []pmixsrv.Proc) (map[string]bool, bool) {
	nodes := map[string]bool{}
	for _, p := range procs {
		plan := u.jobs.plan(p.Nspace)
		if plan == nil {
			return nil, false
		}
		m := plan.Map
		if p.Rank == pmixsrv.RankWildcard {
			for _, n := range m.Nodes {
				if len(n.Procs) > 0 { // only nodes with ranks have daemons in the job
					nodes[n.Name] = true
				}
			}
			continue
		}
		if int(p.Rank) >= len(m.Procs) {
			return nil, false
		}
		nodes[m.Nodes[m.Procs[p.Rank].Node].Name] = true
	}
	return nodes, true
}

// Fence is this node's contribution to a collective among procs (kind
// tells fences, barriers, connects and group operations apart), made at
// the root of its combination along the tree (remote.Root).
func (u *upstream) Fence(node, kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error)) {
	nodes, ok := u.nodesOf(procs)
	if !ok {
		done(nil, u.Unresolved(kind, procs))
		return
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	u.root.Contribute(kind, procs, names, data, done)
}

// Unresolved is the answer to a collective among procs that name a job
// this launch does not run.
func (u *upstream) Unresolved(kind string, procs []pmixsrv.Proc) error {
	if ns := u.foreign(procs); kind == "connect" && ns != "" {
		u.foreignOnce.Do(func() {
			u.Printf("prun: a connection to job %s, which another launch runs, is refused: Open MPI connects the jobs of one launch only (MPICH's processes connect across launches, with -nameserver)\n", ns)
		})
	}
	return pmixsrv.ErrBadParam
}

// DirectModex asks the daemon that hosts target for its data.
func (u *upstream) DirectModex(from string, target pmixsrv.Proc, done func([]byte, error)) {
	var d node
	if plan := u.jobs.plan(target.Nspace); plan != nil && target.Rank != pmixsrv.RankWildcard && int(target.Rank) < len(plan.Map.Procs) {
		d = u.node(plan.Map.Nodes[plan.Map.Procs[target.Rank].Node].Name)
	}
	if d == nil {
		done(nil, pmixsrv.ErrNotFound)
		return
	}
	d.ServeDirectModex(target, done)
}

// NotifyEvent passes an event raised on one node to every other node.
func (u *upstream) NotifyEvent(from string, code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) {
	go u.deliver(nil, from, code, source, rng, info)
}

// Spawn is decided by the launcher's loop, which owns the job table.
func (u *upstream) Spawn(req daemon.SpawnRequest) { u.queue.push(req) }

// JobControl is decided by the launcher's loop, which owns the jobs' fate.
func (u *upstream) JobControl(req pmixsrv.Proc, targets []pmixsrv.Proc, sig syscall.Signal, done func(error)) {
	u.queue.push(jobControl{req: req, targets: targets, sig: sig, done: done})
}

type jobControl struct {
	req     pmixsrv.Proc
	targets []pmixsrv.Proc
	sig     syscall.Signal
	done    func(error)
}

func (u *upstream) Namespaces(done func([]string)) { done(u.jobs.namespaces()) }

func (u *upstream) ProcTable(nspace string, done func([]pmixsrv.ProcInfo, error)) {
	done(u.jobs.procTable(nspace))
}

// queue is an unbounded FIFO: daemons and the PMIx thread must never block
// on the launcher's loop.
type queue struct {
	mu    sync.Mutex
	items []any
	ready chan struct{}
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(x any) {
	q.mu.Lock()
	q.items = append(q.items, x)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) drain() []any {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
