// Package wire is what both sides of prun's tree of daemons share: the
// frames and message types and their encoding, replies matched by id,
// batches, the bootstrap, the byte windows of stdin, preloads and output,
// and the combination of collectives, gathers and hellos that every vertex
// runs, the launcher's (remote) and each daemon's (remote/nodeside).
package wire
