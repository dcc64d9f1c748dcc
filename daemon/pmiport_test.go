package daemon

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"prun/jobspec"
	"prun/pmi"
)

func TestParseInitack(t *testing.T) {
	for line, want := range map[string]int{"cmd=initack pmiid=0\n": 0, "cmd=initack pmiid=12": 12, " cmd=initack  pmiid=3 \r\n": 3} {
		if got, err := parseInitack(line); err != nil || got != want {
			t.Errorf("parseInitack(%q) = %d, %v; want %d", line, got, err, want)
		}
	}
	for _, line := range []string{"", "cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=initack\n", "cmd=initack pmiid=-1\n",
		"cmd=initack pmiid=x\n", "cmd=initack pmiid=1 extra=2\n", "cmd=initack rank=1\n"} {
		if _, err := parseInitack(line); err == nil {
			t.Errorf("parseInitack(%q): no error", line)
		}
	}
}

// FuzzInitack: no first line may panic; a rank is never negative, and an
// error says what was expected.
func FuzzInitack(f *testing.F) {
	for _, s := range []string{"cmd=initack pmiid=0\n", "cmd=initack pmiid=99999999999999999999", "cmd=initack pmiid=\n", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		n, err := parseInitack(line)
		if err != nil {
			if n != -1 || !strings.Contains(err.Error(), "pmiid") {
				t.Fatalf("parseInitack(%q) = %d, %v", line, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("parseInitack(%q) = %d", line, n)
		}
	})
}

// TestPMIPortClaims: a connection that names a rank of this node gets the
// PMI-1 handshake's answer; one that names it again, or names a rank not
// here, is closed and reported; a closed port takes no connection.
func TestPMIPortClaims(t *testing.T) {
	d, up := sharedDaemon(t)
	up.reset()
	p := shPlan(t, "pmiport-claims", 2, "true", func(j *jobspec.Job) { j.PMI, j.PMIPort = jobspec.PMI1, true })
	sh := newShell(d, p, 0)
	sh.ranks.add([]int{0, 1})
	if err := sh.listenPMI(pmi.V1); err != nil {
		t.Fatal(err)
	}
	addr := sh.pmi.port.addr()
	dial := func(rank int) (*bufio.Reader, net.Conn) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "cmd=initack pmiid=%d\n", rank)
		return bufio.NewReader(c), c
	}
	r, _ := dial(1)
	var got []string
	for range 4 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the handshake's answer after %q: %v", got, err)
		}
		got = append(got, strings.TrimSpace(line))
	}
	if want := "cmd=initack|cmd=set size=2|cmd=set rank=1|cmd=set debug=0"; strings.Join(got, "|") != want {
		t.Errorf("handshake answer %q, want %q", got, want)
	}
	for _, c := range []struct {
		rank int
		why  string
	}{{1, "connected already"}, {7, "no such rank"}} {
		r, _ := dial(c.rank)
		if line, err := r.ReadString('\n'); err == nil {
			t.Errorf("pmiid %d: answered %q", c.rank, line)
		}
		select {
		case e := <-up.ch:
			if e.Kind != ProtocolError || !strings.Contains(e.Msg, c.why) {
				t.Errorf("pmiid %d: event %+v, want a protocol error saying %q", c.rank, e, c.why)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("pmiid %d: no protocol error", c.rank)
		}
	}
	sh.closePMI()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the closed port took a connection")
	}
}
