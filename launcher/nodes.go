package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"prun/daemon"
	"prun/hostfile"
	"prun/jobspec"
	"prun/remote"
	"prun/rsh"
)

// nodeLost says a remote node's daemon is gone.
type nodeLost struct {
	host string
	err  error
	at   time.Time // reported: a persistent runtime drops a report older than the node's return (DVM.Add)
}

// remoteHosts are the hosts of the allocation that are not this node
// (which -localhost may call alias).
func remoteHosts(a hostfile.Allocation, alias string) []string {
	var out []string
	for _, h := range a.Hosts {
		if !isLocal(h.Name, alias) {
			out = append(out, h.Name)
		}
	}
	return out
}

// logins are the users and SSH ports the allocation gives hosts, in their
// order; nil when it gives none.
func logins(a hostfile.Allocation, hosts []string) []remote.Login {
	by := map[string]remote.Login{}
	for _, h := range a.Hosts {
		if h.User != "" || h.Port != 0 {
			by[h.Name] = remote.Login{User: h.User, Port: h.Port}
		}
	}
	if len(by) == 0 {
		return nil
	}
	out := make([]remote.Login, len(hosts))
	for i, h := range hosts {
		out[i] = by[h]
	}
	return out
}

// forwardedEnv is what the launcher's environment passes to remote daemons
// and their ranks besides -x: the MPI libraries' and PMIx's settings, as
// mpirun forwards OMPI_MCA_*; everything else is the node's own login
// environment. With all (Hydra's -genvall), every variable but those of
// the launcher's host, login session and place in an outer job.
func forwardedEnv(env []string, all bool) []string {
	prefixes := []string{"OMPI_MCA_", "PMIX_MCA_", "PRTE_MCA_", "MPIR_CVAR_", "UCX_", "FI_", "PRUN_DEBUG_"}
	var out []string
	if all {
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); !hostOwn[k] && !strings.HasPrefix(k, "SSH_") &&
				(!strings.HasPrefix(k, "PRUN_") || strings.HasPrefix(k, "PRUN_DEBUG_")) && daemon.Inherited(kv) {
				out = append(out, kv)
			}
		}
		return out
	}
	for _, kv := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// hostOwn are the variables that describe the launcher's host and login
// session: another node has its own.
var hostOwn = map[string]bool{"HOSTNAME": true, "HOST": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
	"HOME": true, "TMPDIR": true, "DISPLAY": true, "XAUTHORITY": true, "TERM": true, "TERMCAP": true, "MAIL": true}

// startWatched starts the other nodes' daemons (start). Until they are all
// up, a terminating signal or the job's --timeout (at deadline) gives the
// start up at once rather than after the slowest host's connect timeout.
// Other signals that arrive meanwhile, and a terminating one that lost the
// race with the last hello, are returned for the job to handle once it runs.
func startWatched(job *jobspec.Job, sigs <-chan os.Signal, deadline time.Time,
	start func(context.Context) (*remote.Tree, error)) (*remote.Tree, []os.Signal, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if !deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, deadline, startupAbort{timeout: job.Timeout})
		defer stop()
	}
	stop := watchStart(sigs, time.Time{}, 0, func(a startupAbort) { cancel(a) })
	tree, err := start(ctx)
	return tree, stop(), err
}

// watchStart watches, while a long step of the start runs, for a
// terminating signal and for the deadline (unless zero) of the job's
// --timeout, and passes either to abort (from its own goroutine). stop ends
// the watch and returns the signals caught, to be handled once the job runs.
func watchStart(sigs <-chan os.Signal, deadline time.Time, timeout time.Duration, abort func(startupAbort)) (stop func() []os.Signal) {
	var pending []os.Signal
	var timer *time.Timer
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer = time.NewTimer(time.Until(deadline))
		expired = timer.C
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case s := <-sigs:
				if g, ok := s.(submitterGone); ok {
					abort(startupAbort{gone: g.String()})
				} else {
					switch sig := s.(syscall.Signal); sig {
					case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
						abort(startupAbort{sig: sig})
					}
				}
				pending = append(pending, s)
			case <-expired:
				expired = nil
				abort(startupAbort{timeout: timeout})
			case <-done:
				return
			}
		}
	}()
	return func() []os.Signal {
		close(done)
		<-watched
		if timer != nil {
			timer.Stop()
		}
		return pending
	}
}

// startTree starts the daemons of hosts, the other nodes of alloc, as a
// tree whose links n.up serves (a lost one queued as nodeLost); env is the
// launcher's, onHello (if set) hears each hello.
func (n *daemons) startTree(ctx context.Context, job *jobspec.Job, hosts []string, env []string, alloc hostfile.Allocation,
	onHello func(up, of int)) (*remote.Tree, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if job.Launch.Prefix != "" {
		exe = filepath.Join(job.Launch.Prefix, "bin", "prun")
	}
	agent, err := remote.ChooseAgent(job.Launch.Agent, job.Launch.Rsh, env)
	if err != nil {
		return nil, err
	}
	up := n.up
	return remote.Start(ctx, remote.Config{
		Agent:          agent,
		LaunchEnv:      env,
		Root:           up.root,
		Hosts:          hosts,
		Logins:         logins(alloc, hosts),
		Exe:            exe,
		CopyExe:        job.Launch.Prefix == "", // an explicit --prefix is not second-guessed
		Home:           homeOf(env),
		Rsh:            job.Launch.Rsh,
		ConnectTimeout: 5 * time.Second,
		Fanout:         job.Launch.Fanout,
		IfInclude:      job.Launch.IfInclude,
		Ports:          job.Launch.Ports,
		Env:            forwardedEnv(env, job.EnvAll),
		OnHello:        onHello,
	}, up, func(host string, err error) { up.queue.push(nodeLost{host, err, time.Now()}) })
}

// homeOf is env's HOME (the last one), where the SSH client finds ~/.ssh.
func homeOf(env []string) string {
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	return home
}

// lookupTimeout bounds checkNames: a name not answered by then is left to
// its session.
const lookupTimeout = 5 * time.Second

// checkNames refuses a launch to another node whose name does not resolve,
// before anything starts, in one line naming the host and where the job
// named it: otherwise the map could fail first for another reason (-H
// nosuchhost -n 2 said that nosuchhost has 1 slot, and with
// --oversubscribe failed on its name), or daemons would start on the other
// nodes before one failed. Only the other nodes' names are looked up
// (remoteHosts: not localhost, nor this node's names or addresses), each
// once and all at once, as the built-in SSH client dials them (rsh.Lookup:
// through ssh_config), in the prun-ssh that then starts the daemons.
// Slurm starts daemons on the nodes it allocated, and an external remote
// shell (--rsh) may know names no lookup here does: not looked up then.
// env is the launcher's.
func checkNames(job *jobspec.Job, alloc hostfile.Allocation, source string, env []string) error {
	hosts := remoteHosts(alloc, job.Place.LocalHost)
	if len(hosts) == 0 || job.Launch.Rsh != "" {
		return nil
	}
	if agent, err := remote.ChooseAgent(job.Launch.Agent, job.Launch.Rsh, env); err != nil || agent != remote.AgentSSH {
		return nil // an error: startRemote says it
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	why := rsh.Lookup(ctx, hosts, rsh.Options{Home: homeOf(env)})
	var bad []string
	for _, h := range hosts {
		if why[h] != "" {
			bad = append(bad, h)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("host %s (%s) does not resolve: %s", bad[0], hostOrigin(job.Place, job.Apps, bad[0], source), why[bad[0]])
	switch n := len(bad) - 1; {
	case n == 1:
		msg += fmt.Sprintf(" (nor does %s)", bad[1])
	case n > 1 && n <= 3:
		msg += fmt.Sprintf(" (nor do %s)", strings.Join(bad[1:], ", "))
	case n > 3:
		msg += fmt.Sprintf(" (nor do %s and %d more)", strings.Join(bad[1:4], ", "), n-3)
	}
	return errors.New(msg)
}

// progressStep says whether --show-progress reports n of total: each tenth
// of the way, and the last.
func progressStep(n, total int) bool {
	return n == total || n*10/total != (n-1)*10/total
}

// stoppablePipe is this node's end of the stdin fan-out: when its ranks
// read no more, the fan-out stops writing to it (and the other nodes get
// the rest) instead of blocking on it.
type stoppablePipe struct{ *io.PipeReader }

func (p stoppablePipe) StopReading() { p.CloseWithError(errors.New("no rank reads stdin here")) }

// fanStdin opens nspace's stdin stream on the remote nodes and starts
// copying in to them; with local, this node's ranks get their copy through
// the returned reader (else nil). The streams are opened before the job
// launches, so that what a node says of it (its ranks read no more) is
// never before it is open.
func fanStdin(in io.Reader, local bool, remotes []*remote.Node, nspace string) io.Reader {
	var pw *io.PipeWriter
	var localIn io.Reader
	if local {
		pr, w := io.Pipe()
		pw, localIn = w, stoppablePipe{pr}
	}
	for _, rn := range remotes {
		rn.OpenStdin(nspace)
	}
	go stdinFanout(in, pw, remotes, nspace)
	return localIn
}

// stdinFanout reads the launcher's stdin once for job nspace's ranks on
// several nodes: chunks go down the control plane to remote nodes (each
// waits while its node's ranks are a window behind), and through a pipe to
// this node's daemon. It stops reading when no reader is left.
func stdinFanout(in io.Reader, local *io.PipeWriter, remotes []*remote.Node, nspace string) {
	buf := make([]byte, 64<<10)
	for local != nil || len(remotes) > 0 {
		n, err := in.Read(buf)
		if n > 0 {
			if local != nil {
				if _, werr := local.Write(buf[:n]); werr != nil {
					local = nil
				}
			}
			remotes = slices.DeleteFunc(remotes, func(rn *remote.Node) bool { return rn.Stdin(nspace, buf[:n]) != nil })
		}
		if err != nil {
			break
		}
	}
	if local != nil {
		local.Close()
	}
	for _, rn := range remotes {
		rn.Stdin(nspace, nil)
	}
}
