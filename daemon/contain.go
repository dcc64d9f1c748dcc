package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"prun/internal/cgroup"
	"prun/internal/trace"
	"prun/sessiondir"
)

// Nothing a job starts outlives it on a node, however it detaches (fork,
// setsid, fork again: a daemon). Each rank leads a process group of its
// own, which covers its children that stay in the group; beyond that:
//
//   - where the node allows it, the job has a cgroup (v2) of its own
//     (internal/cgroup), a child of the daemon's own cgroup; each rank is
//     created inside it (CLONE_INTO_CGROUP) and all it starts stays there;
//     the job's end kills what is left in it (cgroup.kill) and removes it;
//   - elsewhere (no cgroup2 mounted, the daemon's cgroup not its user's, a
//     kernel without CLONE_INTO_CGROUP), the job's end kills the processes
//     of this user whose environment carries the job's marks: PRUN_SESSION
//     (this daemon's session directory) and PRUN_NSPACE (the job), which
//     every rank gets and its children inherit. What drops them from its
//     environment (env -i) escapes this fallback.
//
// The daemon names, as a Leftover event, what it found and could not end.

// leftoverWait bounds how long a job's end waits for what it killed to go:
// a process in an uninterruptible sleep (a dead NFS server) may not.
const leftoverWait = 2 * time.Second

// containment is the daemon's record of whether its node gives jobs
// cgroups.
type containment struct {
	mu  sync.Mutex
	why error // why not: the first reason found (nil: groups work, so far)
}

// groupsOff records why this node's jobs get no cgroup from now on.
func (d *Daemon) groupsOff(why error) {
	d.contain.mu.Lock()
	defer d.contain.mu.Unlock()
	if d.contain.why == nil {
		d.contain.why = why
		trace.Mark("no job cgroups on %s (%v): a job's leftovers are found by %s in their environment",
			d.cfg.Name, why, sessiondir.SessionEnv)
	}
}

// cgroupParent is where the jobs' groups go (a variable for the tests of
// the fallback).
var cgroupParent = cgroup.Parent

// makeGroup gives the shell's job a cgroup, unless the node gives none:
// then the job's end searches by environment (sh.marked). A node without
// a place for groups (Parent's error) gives none to any later job either;
// a group that cannot be made (a full descendants limit, no descriptor)
// only this job lacks.
func (sh *shell) makeGroup() {
	d := sh.d
	d.contain.mu.Lock()
	off := d.contain.why != nil
	d.contain.mu.Unlock()
	if !off {
		parent, err := cgroupParent()
		if err != nil {
			d.groupsOff(err)
		} else {
			// Named after the session directory, so that the next prun
			// finds the groups of a daemon that died (sessiondir.CleanStale).
			g, err := cgroup.New(parent, d.cfg.Session.ID()+"."+sh.plan.Nspace)
			if err == nil {
				sh.group = g
				return
			}
			trace.Mark("%s: no cgroup for job %s (%v): its leftovers are found by their environment",
				d.cfg.Name, sh.plan.Nspace, err)
		}
	}
	sh.marked.Store(true)
}

// startedOutside records that a rank was started outside the job's group
// (why: the kernel refused it there), so that the job's end also searches
// by environment, and later jobs get no group.
func (sh *shell) startedOutside(why error) {
	sh.d.groupsOff(fmt.Errorf("a process cannot be created in a job's cgroup: %w", why))
	sh.marked.Store(true)
}

// endLeftovers ends whatever the job's ranks left running on this node
// (every rank has exited) and reports what it could not end.
func (sh *shell) endLeftovers() {
	g, marked := sh.group, sh.marked.Load()
	var left []cgroup.Proc
	if g != nil {
		left = g.End(leftoverWait)
	}
	if marked {
		pids := sessiondir.KillMarked(os.Getuid(), leftoverWait,
			sessiondir.SessionEnv+"="+sh.d.cfg.Session.ID(), sessiondir.NspaceEnv+"="+sh.plan.Nspace)
		for _, pid := range pids {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			left = append(left, cgroup.Proc{Pid: pid, Comm: strings.TrimSpace(string(comm))})
		}
	}
	if len(left) > 0 {
		sh.d.up.Event(Event{Kind: Leftover, Nspace: sh.plan.Nspace, Node: sh.nodeName(), Msg: leftoverMsg(left, g)})
	}
}

// leftoverMsg names what a job's end could not end.
func leftoverMsg(left []cgroup.Proc, g *cgroup.Group) string {
	const most = 8
	names := make([]string, 0, most)
	for i, p := range left {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(left)-most))
			break
		}
		names = append(names, p.String())
	}
	what := "process"
	if len(left) > 1 {
		what = "processes"
	}
	msg := fmt.Sprintf("could not end %d %s the job left: %s, still there %v after SIGKILL", len(left), what,
		strings.Join(names, ", "), leftoverWait)
	if g != nil {
		msg += " (cgroup " + g.Path() + ")"
	}
	return msg
}
