// Command prun-ssh is prun's built-in SSH client, in a process of its own:
// prun starts it (from beside its own binary) when a launch first needs a
// connection to another node, and drives it through its descriptor 3
// (package rsh/sshproto). It is not meant to be run by hand.
package main

import (
	"os"

	"prun/rsh/sshclient"
)

func main() {
	os.Exit(sshclient.Main())
}
