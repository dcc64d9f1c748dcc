package nodeside

import (
	"fmt"
	"os"
	"prun/remote/spawn"
	"prun/remote/wire"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"prun/daemon"
	"prun/hostfile"
	"prun/internal/sigcatch"
)

// slurmSignals makes a daemon of a Slurm step end cleanly when Slurm ends
// the step (scancel, the time limit, a failed node of the job: SIGCONT and
// SIGTERM to every process of the step, SIGKILL after KillWait): it tells
// the launcher first, so that prun's exit names Slurm rather than the
// ranks' deaths by the same SIGTERM, then kills its ranks and removes its
// session directory. The launcher ends the step by closing its stdin.
func (n *node) slurmSignals() {
	k, err := sigcatch.Catch(4, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err != nil {
		return
	}
	go func() {
		sig := (<-k.C).(syscall.Signal)
		why := fmt.Sprintf("%s (%s: scancel, the job's time limit or a failed node)", spawn.SlurmEndedStep, unix.SignalName(sig))
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: why})
		close(n.slurmTerm)
		n.end(why)
	}()
}

// holdSlurmKill holds back, a short while, the news of a rank killed by
// SIGTERM in a Slurm step: Slurm signals the daemon and its ranks at once,
// and the daemon's own word (slurmSignals) must reach the launcher first.
func (n *node) holdSlurmKill(ev daemon.Event) {
	if n.slurmTerm == nil || ev.Kind != daemon.ProcExited || ev.Signal != syscall.SIGTERM {
		return
	}
	select {
	case <-n.slurmTerm:
	case <-time.After(500 * time.Millisecond):
	}
}

// slurmDaemonEnv prepares a daemon started by the step: it finds its
// vertex by its Slurm node name, drops every SLURM_* variable of the step
// but its node's own, and appends these to b.Env after the job's (Serve
// sets b.Env's variables in order: the node's win).
func slurmDaemonEnv(b *wire.Bootstrap) error {
	b.Hint = os.Getenv("SLURM_LAUNCH_NODE_IPADDR") // the launcher's node, as SSH_CONNECTION says for SSH
	name := os.Getenv("SLURMD_NODENAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	for i, h := range b.Hosts {
		if h == name {
			b.Vertex = i + 1
		}
	}
	var own []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "SLURM_") {
			continue
		}
		if spawn.SlurmNodeVar(k) && k != "SLURM_NODEID" { // the step's node ids count the step's nodes
			own = append(own, kv)
		}
		os.Unsetenv(k)
	}
	list := ""
	for _, kv := range b.Env {
		if v, ok := strings.CutPrefix(kv, "SLURM_NODELIST="); ok {
			list = v
		}
	}
	if nodes, err := hostfile.ExpandNodelist(list); err == nil {
		for i, n := range nodes {
			if n == name {
				own = append(own, fmt.Sprintf("SLURM_NODEID=%d", i))
			}
		}
	}
	b.Env = append(b.Env, own...)
	if b.Vertex == 0 {
		return fmt.Errorf("this node (%s) is not among the daemons' hosts", name)
	}
	return nil
}
