package remote

import (
	"prun/remote/spawn"
	"prun/remote/wire"
)

// What the launcher names of the wire through remote: its own API, so that
// it imports the launcher's side alone.
type (
	// Login is a node's SSH login (user, port), in the bootstrap.
	Login = wire.Login
	// Gathered is a gather's answer: samples or a merged tree, and who did
	// not answer.
	Gathered = wire.Gathered
)

// AgentSSH and AgentSlurm start the daemons (Config.Agent).
const (
	AgentSSH   = wire.AgentSSH
	AgentSlurm = wire.AgentSlurm
)

// DaemonArgs and CleanupArgs are the words after prun's path that start a
// node's daemon (`prun daemon --ctl`, nodeside.Serve) and clean up after one.
var (
	DaemonArgs  = spawn.DaemonArgs
	CleanupArgs = spawn.CleanupArgs
)

// ChooseAgent picks what starts the daemons: ssh, or a Slurm step inside
// an allocation (spawn.ChooseAgent).
func ChooseAgent(want, rshCmd string, env []string) (string, error) {
	return spawn.ChooseAgent(want, rshCmd, env)
}
