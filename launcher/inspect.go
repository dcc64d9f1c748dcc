package launcher

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"prun/daemon"
	"prun/inspect"
	"prun/remote"
	"prun/stacktree"
	"prun/topview/sample"
)

// prun top and prun stack look into a launch through inspect's socket: a
// standalone launcher's in its session directory (its jobs by index: ""
// or 0 the user's job, K the K-th its ranks spawned), a persistent
// runtime's in its own directory (jobs by submission number, N.K for the
// K-th job submission N spawned). Each answer is gathered along the daemon
// tree (remote.Tree.GatherRanks, GatherStacks: one message per child of
// the launcher) with this node's daemon's part added here.

// Bounds of the gathers. A sample waits little: top asks again a second
// later. A stack waits for the debuggers, a few at once per node.
const (
	sampleWait     = 3 * time.Second
	stackPerRank   = 10 * time.Second
	stackParallel  = 4                 // the fewest debuggers a node runs at once (daemon.stackParallel)
	stackWaitLimit = 110 * time.Second // within inspect's bound of a request, 2 minutes
)

// inspected is what an answer needs: the nodes' daemons (the launch's or
// the runtime's), and the job.
type inspected struct {
	local *daemon.Daemon
	tree  *remote.Tree
	jobs  *jobTable
	plan  *daemon.Plan
}

// inspector is the launch's inspect.Source.
type inspector struct {
	find func(job string) (inspected, error)
	stop chan struct{} // closed first when the launch ends: answers under way give up
	once sync.Once
}

func (in *inspector) close() { in.once.Do(func() { close(in.stop) }) }

// bound ends ctx when the launch ends.
func (in *inspector) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-in.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (in *inspector) Ranks(ctx context.Context, job string) ([]sample.Rank, error) {
	ctx, cancel := in.bound(ctx)
	defer cancel()
	x, err := in.find(job)
	if err != nil {
		return nil, err
	}
	return sampleRanks(ctx, x), nil
}

func (in *inspector) Stacks(ctx context.Context, job string, set stacktree.RankSet) (*stacktree.Tree, error) {
	ctx, cancel := in.bound(ctx)
	defer cancel()
	x, err := in.find(job)
	if err != nil {
		return nil, err
	}
	perRank := stackPerRank
	if d := inspect.RankTimeout(ctx); d > 0 {
		perRank = d
	}
	return gatherStacks(ctx, x, set, perRank), nil
}

// sampleRanks samples every rank of the job: this node's daemon's and the
// tree's; a rank no daemon answered for is there in state "unknown".
func sampleRanks(ctx context.Context, x inspected) []sample.Rank {
	ns := x.plan.Nspace
	var ranks []sample.Rank
	var missing []string
	var wg sync.WaitGroup
	if x.tree != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := x.tree.GatherRanks(ctx, ns, sampleWait)
			ranks, missing = g.Ranks, g.Missing
		}()
	}
	var own []sample.Rank
	if x.local != nil {
		own = x.local.Sample(ns)
	}
	wg.Wait()
	ranks = append(own, ranks...)
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		seen[r.Rank] = true
	}
	m := x.plan.Map
	for i, p := range m.Procs {
		if !seen[i] {
			host := m.Nodes[p.Node].Name
			r := sample.Rank{Rank: i, Host: host, State: "unknown"}
			if why := missingFor(missing, host); why != "" {
				r.Wchan = why
			}
			ranks = append(ranks, r)
		}
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	return ranks
}

// missingFor is why host's daemon did not answer, from a gather's Missing.
func missingFor(missing []string, host string) string {
	for _, m := range missing {
		if strings.HasPrefix(m, host+": ") || strings.HasPrefix(m, host+" (") {
			return m
		}
	}
	return ""
}

// stackWait is how long the launcher waits for a tree of stacks: each
// node runs a few debuggers at once, each bounded by perRank.
func stackWait(plan *daemon.Plan, set stacktree.RankSet, perRank time.Duration) time.Duration {
	most := 0
	for _, n := range plan.Map.Nodes {
		k := 0
		for _, r := range n.Procs {
			if set.Len() == 0 || set.Has(r) {
				k++
			}
		}
		most = max(most, k)
	}
	rounds := max((most+stackParallel-1)/stackParallel, 1)
	return min(time.Duration(rounds)*perRank+3*time.Second, stackWaitLimit)
}

// gatherStacks captures the stacks of the job's live ranks in set (empty:
// every one) on every node, merged into one tree (finished). A live rank
// whose node did not answer fails with why; with an explicit set, a rank
// that exited or is not running is named too.
func gatherStacks(ctx context.Context, x inspected, set stacktree.RankSet, perRank time.Duration) *stacktree.Tree {
	ns := x.plan.Nspace
	wait := stackWait(x.plan, set, perRank)
	tree := stacktree.New()
	var g remote.Gathered
	var wg sync.WaitGroup
	if x.tree != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g = x.tree.GatherStacks(ctx, ns, set, perRank, wait)
		}()
	}
	if x.local != nil {
		lctx, cancel := context.WithTimeout(ctx, wait-hopMarginOf(wait))
		tree.Merge(x.local.Stacks(lctx, ns, set, perRank))
		cancel()
	}
	wg.Wait()
	if g.Tree != nil {
		tree.Merge(g.Tree)
	}
	m := x.plan.Map
	x.jobs.mu.RLock()
	j := x.jobs.byName[ns]
	for i, p := range m.Procs {
		if set.Len() > 0 && !set.Has(i) || tree.Root.Ranks.Has(i) || tree.Failed[i] != "" {
			continue
		}
		var rec procRecord
		if j != nil && i < len(j.procs) {
			rec = j.procs[i]
		}
		host := m.Nodes[p.Node].Name
		switch {
		case rec.exited && set.Len() > 0:
			tree.Fail(i, "exited")
		case rec.exited:
		case missingFor(g.Missing, host) != "":
			tree.Fail(i, "no answer from its node: "+missingFor(g.Missing, host))
		case !rec.started && set.Len() > 0:
			tree.Fail(i, "not started")
		case rec.started:
			tree.Fail(i, "no stack from "+host)
		}
	}
	x.jobs.mu.RUnlock()
	tree.Finish()
	return tree
}

func hopMarginOf(wait time.Duration) time.Duration { return max(wait/10, 200*time.Millisecond) }

// jobByIndex is the launch's job of index i (0: the user's), or nil.
func (t *jobTable) jobByIndex(i int) *job {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, j := range t.list {
		if j.plan.Index == i {
			return j
		}
	}
	return nil
}

// jobIndexes lists the launch's job indexes, for an error naming them.
func (t *jobTable) jobIndexes() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var s []string
	for _, j := range t.list {
		s = append(s, strconv.Itoa(j.plan.Index))
	}
	return strings.Join(s, ", ")
}

// listenInspect opens the launch's inspect socket in its session
// directory (a phase of run: the user's job is in the table by now). A
// runtime's submission has none: the runtime's socket answers for it.
func (r *run) listenInspect(s *startup) int {
	st, ok := r.rte.(*standalone)
	if !ok || st.sess == nil {
		return 0
	}
	in := &inspector{stop: make(chan struct{}), find: func(job string) (inspected, error) {
		i := 0
		if job != "" {
			var err error
			if i, err = strconv.Atoi(job); err != nil || i < 0 {
				return inspected{}, fmt.Errorf("job %q: a standalone prun's jobs go by index (0: its own, K: the K-th its ranks spawned)", job)
			}
		}
		j := r.jobs.jobByIndex(i)
		if j == nil {
			return inspected{}, fmt.Errorf("no job %d in this prun (jobs: %s)", i, r.jobs.jobIndexes())
		}
		return inspected{local: r.local, tree: r.tree, jobs: r.jobs, plan: j.plan}, nil
	}}
	srv, err := inspect.Listen(st.sess.Top, in)
	if err != nil {
		r.errorf("prun top and prun stack will not see this job: %v", err)
		return 0 // the job runs without
	}
	s.defer_(func() { in.close(); srv.Close() })
	return 0
}

// listenInspect opens the runtime's inspect socket in its directory,
// closed when the runtime stops (Stop), before its directory goes.
func (d *DVM) listenInspect(dir string) {
	in := &inspector{stop: make(chan struct{}), find: d.inspected}
	srv, err := inspect.Listen(dir, in)
	if err != nil {
		d.logf("prun top and prun stack will not see its jobs: %v", err)
		return
	}
	d.mu.Lock()
	d.closeInspect = func() { in.close(); srv.Close() }
	d.mu.Unlock()
}

// inspected resolves a runtime's job: "N" is submission N's own job, "N.K"
// the K-th job it spawned; "" the one submission running, if only one is.
func (d *DVM) inspected(job string) (inspected, error) {
	d.mu.RLock()
	runs := d.runs()
	d.mu.RUnlock()
	var r *run
	sub, idx, spawned := strings.Cut(job, ".")
	k := 0
	if spawned {
		var err error
		if k, err = strconv.Atoi(idx); err != nil || k < 0 {
			return inspected{}, fmt.Errorf("job %q: a runtime's jobs go by number, N or N.K", job)
		}
	}
	if job == "" {
		switch len(runs) {
		case 0:
			return inspected{}, errors.New("no job runs in this DVM")
		case 1:
			r = runs[0]
		default:
			return inspected{}, fmt.Errorf("%d jobs run in this DVM: name one (%s)", len(runs), subList(runs))
		}
	} else {
		n, err := strconv.Atoi(sub)
		if err != nil {
			return inspected{}, fmt.Errorf("job %q: a runtime's jobs go by number, N or N.K", job)
		}
		for _, c := range runs {
			if c.sub == n {
				r = c
			}
		}
		if r == nil {
			return inspected{}, fmt.Errorf("no job %d runs in this DVM (running: %s)", n, subList(runs))
		}
	}
	j := r.jobs.jobByIndex(k)
	if j == nil {
		return inspected{}, fmt.Errorf("job %d has no job %d.%d", r.sub, r.sub, k)
	}
	return inspected{local: d.nodes.local, tree: d.nodes.tree, jobs: r.jobs, plan: j.plan}, nil
}

func subList(runs []*run) string {
	if len(runs) == 0 {
		return "none"
	}
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = strconv.Itoa(r.sub)
	}
	return strings.Join(s, ", ")
}

// timeoutStacks is --get-stack-traces' tree: the same gather and merge as
// prun stack's.
func (r *run) timeoutStacks(j *job) *stacktree.Tree {
	x := inspected{local: r.local, tree: r.tree, jobs: r.jobs, plan: j.plan} // the daemons rte lent the run
	ctx, cancel := context.WithTimeout(context.Background(), stackWaitLimit)
	defer cancel()
	return gatherStacks(ctx, x, stacktree.RankSet{}, stackPerRank)
}
