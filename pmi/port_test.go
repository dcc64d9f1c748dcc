package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A PMI-2 client of a PMI port: init, then a fullinit naming its rank.
func TestServeNamedV2(t *testing.T) {
	serve := func(t *testing.T, claim func(int) error) (client net.Conn, r *bufio.Reader, done chan error, job *fakeJob) {
		a, b := net.Pipe()
		job = newFake()
		done = make(chan error, 1)
		go func() {
			br := bufio.NewReader(b)
			line, err := br.ReadString('\n')
			if err != nil {
				done <- err
				return
			}
			done <- ServeNamedV2(b, br, strings.TrimRight(line, "\n"), job, V1|V2, claim)
		}()
		a.SetDeadline(time.Now().Add(5 * time.Second))
		return a, bufio.NewReader(a), done, job
	}
	send2 := func(c net.Conn, body string) { fmt.Fprintf(c, "%-6d%s", len(body), body) }
	read2 := func(t *testing.T, r *bufio.Reader) string {
		hdr := make([]byte, 6)
		if _, err := io.ReadFull(r, hdr); err != nil {
			t.Fatalf("reading a reply: %v", err)
		}
		var n int
		fmt.Sscanf(string(hdr), "%d", &n)
		body := make([]byte, n)
		io.ReadFull(r, body)
		return string(body)
	}

	for _, key := range []string{"pmiid", "pmirank"} {
		claimed := -1
		c, r, done, job := serve(t, func(rank int) error { claimed = rank; return nil })
		io.WriteString(c, "cmd=init pmi_version=2 pmi_subversion=0\n")
		if line, _ := r.ReadString('\n'); !strings.Contains(line, "response_to_init") || !strings.Contains(line, "pmi_version=2") {
			t.Fatalf("%s: init answered %q", key, line)
		}
		send2(c, "cmd=fullinit;"+key+"=2;threaded=FALSE;")
		if reply := read2(t, r); !strings.Contains(reply, "fullinit-response") || !strings.Contains(reply, "rank=2;") || !strings.Contains(reply, "size=4;") {
			t.Errorf("%s: fullinit answered %q", key, reply)
		}
		send2(c, "cmd=finalize;")
		if reply := read2(t, r); !strings.Contains(reply, "finalize-response") {
			t.Errorf("%s: finalize answered %q", key, reply)
		}
		c.Close()
		if err := <-done; err != nil || claimed != 2 || !job.connected || !job.finalized {
			t.Errorf("%s: err %v, claimed %d, connected %v, finalized %v", key, err, claimed, job.connected, job.finalized)
		}
	}

	refused := errors.New("that rank is connected already")
	for _, c := range []struct {
		name, init, fullinit string
		claim                error
		want                 string
	}{
		{"pmi-1 init", "cmd=init pmi_version=1 pmi_subversion=1\n", "", nil, "want a PMI-2 init first"},
		{"no rank", "cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=fullinit;threaded=FALSE;", nil, "names no rank"},
		{"bad rank", "cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=fullinit;pmiid=-3;", nil, "names no rank"},
		{"not fullinit", "cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=job-getid;", nil, "want fullinit after init"},
		{"refused", "cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=fullinit;pmiid=1;", refused, "connected already"},
	} {
		conn, r, done, _ := serve(t, func(int) error { return c.claim })
		io.WriteString(conn, c.init)
		if c.fullinit != "" {
			r.ReadString('\n')
			send2(conn, c.fullinit)
		}
		err := <-done
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
		// The connection is closed: the client reads EOF.
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, rerr := io.ReadAll(r); rerr != nil {
			t.Errorf("%s: the connection was left open (%v)", c.name, rerr)
		}
		conn.Close()
	}
}
