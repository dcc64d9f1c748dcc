package wire

import (
	"time"
)

// Bootstrap is what a daemon reads, as one JSON line, from its standard
// input: the SSH session is the only channel the launch secret travels.
type Bootstrap struct {
	Secret []byte
	Vertex int      // this daemon's vertex, 1..len(Hosts)
	Hosts  []string // vertex v runs on Hosts[v-1], named as the user named it
	// Logins[v-1], when Logins is not empty, is the user and SSH port of
	// vertex v as its host list gave them: every daemon starts its children
	// with them, so a login reaches the grandchildren of the launcher too.
	Logins []Login `json:",omitempty"`
	Fanout int
	// The parent's listener: its port, and its addresses to try after the
	// one the SSH connection came from (SSH_CONNECTION).
	ParentPort  int
	ParentAddrs []string
	Exe         string // prun on every node
	// CopyExe: where Exe is missing, send a copy of prun over SSH (the
	// launcher's own path was not found; an explicit --prefix is not).
	CopyExe bool
	// How daemons reach their own children (tree spawn).
	Home           string
	Rsh            string
	ConnectTimeout time.Duration
	IfInclude      string   // the control network, when the user chose one
	Ports          [][2]int // the listeners' port ranges, when the user chose some
	Env            []string // the launcher's settings for daemons and ranks (MCA variables, ...)
	OutWindow      int      // output bytes a node may send unacknowledged (output.go; 0: outWindow(len(Hosts)))
	// Agent is how the launcher started the daemons: "" (SSH or --rsh) or
	// AgentSlurm (one srun step: every daemon is the launcher's child,
	// finds its vertex by its node name, and has no SSH session to fall
	// back on for its link).
	Agent string `json:",omitempty"`

	Hint string // the parent's likely address, tried first (not sent)
}

// Login is how a node is logged in to, beyond its name: the host list's
// user@host or user=, and port= (the node's SSH port). Zero values: the
// defaults (ssh_config's, else the local user and 22).
type Login struct {
	User string `json:",omitzero"`
	Port int    `json:",omitzero"`
}

// Login is vertex v's Login.
func (b Bootstrap) Login(v int) Login {
	if v-1 < len(b.Logins) {
		return b.Logins[v-1]
	}
	return Login{}
}

// connectTimeout bounds a daemon's connection to its parent.
func (b Bootstrap) ConnectWait() time.Duration {
	if b.ConnectTimeout > 0 {
		return b.ConnectTimeout
	}
	return 5 * time.Second
}

// HelloWait bounds a vertex's wait for its children's hellos, from its own.
// It must end well before its parent's watch of it (ConnectTimeout + 10 s
// from its session's start), which it does by the 10 s less the daemon's
// own start.
func (b Bootstrap) HelloWait() time.Duration { return b.ConnectWait() }

// Launch agents: how a vertex starts its children's daemons.
const (
	AgentSSH   = "ssh"   // one SSH (or --rsh) session per child, a tree of them
	AgentSlurm = "slurm" // one Slurm step (srun) for every daemon, all children of the launcher
)
