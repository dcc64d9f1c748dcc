package nodeside

import (
	"bytes"
	"encoding/json"
	"testing"

	"prun/daemon"
)

// A relay reads, of the events it passes up, those that begin as a
// ProcExited event's body does (exitedPrefix), and only those.
func TestExitedPrefix(t *testing.T) {
	for k := daemon.ProcStarted; k <= daemon.Refused; k++ {
		b, err := json.Marshal(&daemon.Event{Kind: k, Nspace: "j", Rank: 3})
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.HasPrefix(b, exitedPrefix); got != (k == daemon.ProcExited) {
			t.Errorf("kind %d (%s): prefix %v", k, b, got)
		}
	}
}
