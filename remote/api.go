package remote

import "prun/remote/wire"

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
