package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"prun/daemon"
	"prun/hostfile"
	"prun/internal/progpath"
	"prun/jobspec"
	"prun/mapper"
	"prun/mpir"
)

func (r *run) nspace(index int) string {
	return r.nsBase + "." + strconv.Itoa(index+1)
}

// jobID is the job's PMIx job id: the namespace without its prefix.
func (r *run) jobID(index int) string {
	return strings.TrimPrefix(r.nspace(index), "prun.")
}

// launch hands a plan to the daemons and starts tracking the job.
func (r *run) launch(plan *daemon.Plan) error {
	r.jobs.add(plan)
	r.rte.own(r, plan.Nspace)
	for _, n := range plan.Map.Nodes {
		if len(n.Procs) > 0 && r.up.node(n.Name) == nil {
			return fmt.Errorf("no daemon on %s", n.Name)
		}
	}
	// Every daemon registers the job, ranks there or not: a process may ask
	// its server about any job (a spawned one's size, nodes, peers).
	for _, n := range r.up.nodes() {
		if err := n.Launch(plan); err != nil {
			return err
		}
	}
	return nil
}

// launchWatched sends what the plan preloads to the other nodes, then
// launches. The sending (a large file takes a while) is given up at a
// terminating signal or at the job's deadline; it returns the signals
// caught meanwhile.
func (r *run) launchWatched(plan *daemon.Plan, sigs <-chan os.Signal, deadline time.Time, timeout time.Duration) ([]os.Signal, error) {
	if r.tree == nil || len(plan.Programs) == 0 && len(plan.Files) == 0 {
		return nil, r.launch(plan)
	}
	var why error
	stop := watchStart(sigs, deadline, timeout, func(a startupAbort) {
		if why == nil {
			a.while = "the preloaded files were sent"
			why = a
			r.tree.StopPreload()
		}
	})
	sums, err := r.tree.Preload(plan)
	pending := stop()
	switch {
	case why != nil:
		return pending, why
	case err != nil:
		return pending, err
	}
	for _, fs := range [][]daemon.File{plan.Programs, plan.Files} {
		for i := range fs {
			fs[i].Sum = sums[fs[i].ID]
		}
	}
	return pending, r.launch(plan)
}

// onSpawn starts a job that a rank asked for (PMIx_Spawn, PMI spawn). It is
// mapped onto the allocation's free slots; an implicit allocation lets it
// oversubscribe, as it does the user's job.
func (r *run) onSpawn(req daemon.SpawnRequest) {
	done := req.Done
	req.Done = func(nspace string, err error) {
		if err != nil && !r.pol.ended() {
			var cmds []string
			for _, a := range req.Apps {
				cmds = append(cmds, a.Cmd)
			}
			msg := fmt.Sprintf("spawn of %s by %s refused: %v", strings.Join(cmds, " : "),
				r.rankDesc(req.Parent.Nspace, int(req.Parent.Rank)), err)
			if req.FailJobOnRefusal {
				r.fail(msg, ExitFailure)
			} else {
				// The MPI library reports only that its spawn failed.
				r.errorf("%s", msg)
			}
		}
		done(nspace, err)
	}
	if r.pol.ended() {
		req.Done("", errors.New("the job is ending"))
		return
	}
	parent := r.jobs.get(req.Parent.Nspace)
	if parent == nil {
		req.Done("", fmt.Errorf("spawn from unknown namespace %s", req.Parent.Nspace))
		return
	}
	pj := parent.plan.Job
	job := &jobspec.Job{TagOutput: pj.TagOutput, PMI: pj.PMI}
	var cmdline []string
	for _, a := range req.Apps {
		wdir := a.Cwd
		if wdir == "" {
			wdir = pj.Apps[parent.plan.Map.Procs[int(req.Parent.Rank)%len(parent.plan.Map.Procs)].App].Wdir
		}
		exe, err := spawnProgram(a.Cmd, a.Path, wdir)
		if err != nil {
			req.Done("", err)
			return
		}
		hosts, err := spawnHosts(a.Hosts, a.Hostfile, wdir) // each app its own, as a context's --host
		if err != nil {
			req.Done("", err)
			return
		}
		if a.NP <= 0 {
			req.Done("", fmt.Errorf("%d processes of %s asked for", a.NP, a.Cmd))
			return
		}
		job.Apps = append(job.Apps, jobspec.App{Argv: a.Argv, Exe: exe, NP: a.NP, Env: a.Env, Wdir: wdir, Hosts: hosts})
		cmdline = append(cmdline, jobspec.ArgvString(a.Argv))
	}
	job.CmdLine = strings.Join(cmdline, " : ")
	free := r.freeSlots()
	localAppHosts(job.Apps, free, pj.Place.LocalHost)
	m, err := mapper.PlaceWith(job, free, r.topos.of, mapper.Options{LocalHost: r.mapOpts.LocalHost,
		SlotsFromCores: r.mapOpts.SlotsFromCores})
	if err != nil {
		req.Done("", err)
		return
	}
	index := len(r.jobs.list)
	plan := &daemon.Plan{
		Nspace:     r.nspace(index),
		JobID:      r.jobID(index),
		Index:      index,
		Submission: r.sub,
		Job:        job,
		Map:        m,
		UnivSize:   r.univ,
		Stdin:      daemon.StdinNone,
		Parent:     &req.Parent,
		ParentKVS:  "kvs_" + req.Parent.Nspace,
		Preput:     req.Preput,
		DebugStop:  mpir.BeingDebugged(), // held for the debugger, as the user's job
	}
	if err := r.launch(plan); err != nil {
		r.fail(fmt.Sprintf("spawn of %s failed: %v", job.CmdLine, err), ExitFailure)
		req.Done("", err) // after the failure: its message is the one line
		return
	}
	req.Done(plan.Nspace, nil)
}

// spawnProgram finds a spawned program: in the directories of path (the
// spawn's "path" info, a colon list) when given and the name has no slash,
// else as on the command line.
func spawnProgram(cmd, path, wdir string) (string, error) {
	if path == "" || strings.Contains(cmd, "/") {
		return progpath.Resolve(cmd, wdir, nil)
	}
	for _, dir := range filepath.SplitList(path) {
		if exe, err := progpath.Resolve(filepath.Join(dir, cmd), wdir, nil); err == nil {
			return exe, nil
		}
	}
	return "", fmt.Errorf("%s not found in path %s", cmd, path)
}

// freeSlots is the allocation less the ranks that still run on it.
func (r *run) freeSlots() hostfile.Allocation {
	used := r.jobs.used()
	free := hostfile.Allocation{Implicit: r.alloc.Implicit}
	for _, h := range r.alloc.Hosts {
		free.Hosts = append(free.Hosts, hostfile.Host{Name: h.Name, Slots: max(h.Slots-used[h.Name], 0)})
	}
	if free.Slots() == 0 && free.Implicit {
		free.Hosts[0].Slots = 1 // oversubscribe from the first host on
	}
	return free
}

// preloads describes what the job sends to every node with its plan, each
// file once; the contents go apart (remote.Tree.Preload), in chunks.
func preloads(job *jobspec.Job) (programs, files []daemon.File, err error) {
	byPath := map[string]daemon.File{}
	describe := func(path string) (daemon.File, error) {
		if f, ok := byPath[path]; ok {
			return f, nil
		}
		f, err := daemon.FileOf(path)
		if err != nil {
			return f, err
		}
		f.ID = len(byPath)
		byPath[path] = f
		return f, nil
	}
	if job.PreloadBinary {
		programs = make([]daemon.File, len(job.Apps))
		for i, app := range job.Apps {
			if programs[i], err = describe(app.Exe); err != nil {
				return nil, nil, fmt.Errorf("--preload-binary: %w", err)
			}
		}
	}
	for _, path := range job.PreloadFiles {
		f, err := describe(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--preload-files: %w", err)
		}
		files = append(files, f)
	}
	return programs, files, nil
}
