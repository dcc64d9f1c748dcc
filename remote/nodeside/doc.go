// Package nodeside is every daemon's side of prun's tree: Serve, behind
// `prun daemon --ctl`, links to its parent, starts its children, hosts the
// node's daemon.Daemon (whose Upstream is the control plane) and obeys the
// launcher until it goes. The launcher's side is remote.
package nodeside
