package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
	"prun/names"
)

// publisher starts a job (prun, or mpiexec.hydra) whose rank 0 publishes
// service as value and holds it until release is called; release with
// "keep" ends the job without unpublishing.
func publisher(t *testing.T, hydra bool, prog, ns, service, value string) (release func(line string) *result) {
	t.Helper()
	args := []string{"-nameserver", ns, "-n", "1", prog, "publish", service, value}
	if !hydra {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() }) // a failed test must not leave the copy to stdin waiting
		p := startPrun(t, opts{args: args, stdin: pr})
		p.waitOutput(20*time.Second, "nsname: published "+service)
		return func(line string) *result {
			pw.Write([]byte(line + "\n"))
			pw.Close()
			return p.wait()
		}
	}
	// mpiexec.hydra 4.0 dies of SIGPIPE, or exits 255, when its stdin ends
	// after its job has (seen on a loaded machine): its stdin stays open
	// until it has exited.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdinW.Close() })
	cmd := exec.Command("mpiexec.hydra", args...)
	cmd.Stdin = stdinR
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	stdinR.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 256)
	n, _ := io.ReadAtLeast(out, buf, len("nsname: published "+service))
	if !strings.Contains(string(buf[:n]), "nsname: published "+service) {
		t.Fatalf("mpiexec.hydra's publisher said %q", buf[:n])
	}
	return func(line string) *result {
		stdinW.Write([]byte(line + "\n"))
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return &result{code: code, stderr: cmd.ProcessState.String() + "\n" + stderr.String()}
	}
}

// expectConnected checks nsconnect's two launches: a client job of two
// ranks, each answered by the server job's rank 0.
func expectConnected(t *testing.T, client, server *result) {
	t.Helper()
	expectCode(t, client, 0)
	expectContains(t, "stdout", client.stdout, "nsconnect: client 0 got 0\n")
	expectContains(t, "stdout", client.stdout, "nsconnect: client 1 got 10\n")
	expectCode(t, server, 0)
	expectContains(t, "stdout", server.stdout, "nsconnect: server got 1\n")
}

// Hydra's -nameserver: names published in one launch are found in another,
// prun's and mpiexec.hydra's alike, through Debian's hydra_nameserver; MPICH
// connects across launches through them; Open MPI's cross-launch connection
// is refused in one line; what a launch leaves is taken back.
func TestNameServer(t *testing.T) {
	ns := ctest.HydraNameserver(t)
	server := names.HydraServer{Addr: ns}
	ompiNS := filepath.Join(ompi(t, "nsname.c"))
	mpichNS := filepath.Join(mpich(t, "nsname.c"))

	lookup := func(t *testing.T, hydra bool, prog, service, want string) {
		t.Helper()
		args := []string{"-nameserver", ns, "-n", "2", prog, "lookup", service}
		var out string
		if hydra {
			b, err := exec.Command("mpiexec.hydra", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("mpiexec.hydra lookup: %v\n%s", err, b)
			}
			out = string(b)
		} else {
			r := run(t, opts{args: args})
			expectCode(t, r, 0)
			out = r.stdout
		}
		for _, rank := range []string{"0", "1"} {
			if w := "nsname: rank " + rank + " found " + want + "\n"; !strings.Contains(out, w) {
				t.Errorf("no %q in\n%s", w, out)
			}
		}
	}
	t.Run("prun-to-prun", func(t *testing.T) {
		release := publisher(t, false, ompiNS, ns, "prun-a", "tag#0$port#1$")
		lookup(t, false, ompiNS, "prun-a", "tag#0$port#1$")
		expectCode(t, release("done"), 0)
		if v, err := server.Lookup("prun-a"); !errors.Is(err, names.ErrNotFound) {
			t.Errorf("still published: %q %v", v, err)
		}
	})
	t.Run("hydra-to-prun", func(t *testing.T) {
		release := publisher(t, true, mpichNS, ns, "from-hydra", "h1")
		lookup(t, false, ompiNS, "from-hydra", "h1") // an Open MPI job finds an MPICH job's name
		if r := release("done"); r.code != 0 {
			t.Errorf("mpiexec.hydra's publisher exited %d (%s)", r.code, r.stderr)
		}
	})
	t.Run("prun-to-hydra", func(t *testing.T) {
		release := publisher(t, false, mpichNS, ns, "from-prun", "p1")
		lookup(t, true, mpichNS, "from-prun", "p1")
		expectCode(t, release("done"), 0)
	})
	t.Run("left-behind", func(t *testing.T) {
		release := publisher(t, false, ompiNS, ns, "kept", "k")
		expectCode(t, release("keep"), 0) // the job ends without unpublishing
		if v, err := server.Lookup("kept"); !errors.Is(err, names.ErrNotFound) {
			t.Errorf("a name the job left is still published: %q %v", v, err)
		}
	})

	// MPI_Comm_connect between two launches: MPICH's ch3 processes make
	// their own connection; Open MPI's would need one PMIx server for both.
	t.Run("mpich-connect", func(t *testing.T) {
		dir, prog := built(t, ctest.MPICHCh3, "nsconnect.c")
		p := startPrun(t, opts{args: []string{"-nameserver", ns, "-n", "1", prog, "server", "ch3-svc"}, dir: dir})
		r := run(t, opts{args: []string{"-nameserver", ns, "-n", "2", prog, "client", "ch3-svc"}, dir: dir})
		expectConnected(t, r, p.wait())
	})
	t.Run("ompi-connect-refused", func(t *testing.T) {
		dir, prog := ompi(t, "nsconnect.c")
		p := startPrun(t, opts{args: []string{"--timeout", "10", "-nameserver", ns, "-n", "1", prog, "server", "ompi-svc"}, dir: dir})
		// Whichever launch reaches the connection first refuses it. Usually
		// the client's; when it is the server's (seen on a loaded machine),
		// the server's rank aborts and the client waits for a name the
		// server never publishes, until its --timeout.
		r := run(t, opts{args: []string{"-q", "--timeout", "10", "-nameserver", ns, "-n", "2", prog, "client", "ompi-svc"}, dir: dir})
		if r.code == 0 {
			t.Errorf("the connection across launches succeeded?\n%s", r)
		}
		p.signal(syscall.SIGINT) // its accept waits for a connection that will not come
		server := p.wait()
		const refused = "which another launch runs, is refused: Open MPI connects the jobs of one launch only"
		if !strings.Contains(r.stderr, refused) && !strings.Contains(server.stderr, refused) {
			t.Errorf("neither launch refused the connection:\n--- client\n%s\n--- server\n%s", r, server)
		}
	})

	t.Run("errors", func(t *testing.T) {
		r := run(t, opts{args: []string{"-nameserver", "a:b:c", "-n", "1", "true"}})
		expectCode(t, r, 2)
		expectContains(t, "stderr", r.stderr, `prun: -nameserver "a:b:c": want HOST or HOST:PORT`)
		r = run(t, opts{args: []string{"-q", "-nameserver", "127.0.0.1:1", "-n", "1", ompiNS, "publish", "x", "y"}})
		expectCode(t, r, 3) // the program aborts when it cannot publish
		expectContains(t, "stderr", r.stderr, "prun: -nameserver: name server 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused\n")
	})
}
