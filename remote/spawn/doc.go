// Package spawn starts a vertex's children in prun's tree of daemons, as
// the launcher (remote) and every daemon with children (remote/nodeside)
// do: `prun daemon --ctl` over SSH (rsh) with its bootstrap on stdin, the
// binary sent ahead where prun is missing, or one Slurm step for all; then
// it accepts and serves the children's links.
package spawn
