package launcher

import (
	"syscall"
	"testing"

	"prun/pmixsrv"
)

func TestJobExit(t *testing.T) {
	for _, c := range []struct {
		procs  []procRecord
		code   int
		status pmixsrv.Status
	}{
		{[]procRecord{{}, {}}, 0, pmixsrv.Success},
		{[]procRecord{{}, {exitCode: 3}, {exitCode: 4}}, 3, pmixsrv.ErrJobAborted},
		{[]procRecord{{signal: syscall.SIGKILL}, {exitCode: 3}}, 137, pmixsrv.ErrJobAborted},
		{[]procRecord{{exitCode: -1}}, -1, pmixsrv.ErrJobAborted}, // its node was lost
	} {
		code, status := jobExit(&job{procs: c.procs})
		if code != c.code || status != c.status {
			t.Errorf("%+v: %d %v, want %d %v", c.procs, code, status, c.code, c.status)
		}
	}
}
