package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ptyBuf collects what the terminal shows.
type ptyBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (p *ptyBuf) Write(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.b.Write(b) }
func (p *ptyBuf) String() string              { p.mu.Lock(); defer p.mu.Unlock(); return p.b.String() }

func (p *ptyBuf) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(p.String(), want) {
			return
		}
	}
	t.Fatalf("terminal never showed %q; it shows %q", want, p.String())
}

// TestInteractiveRank runs prun on a terminal: rank 0 gets a pseudo-terminal
// of its own (a shell prompt answers typed keys, Ctrl-C reaches it), rank 1
// keeps pipes, and prun's terminal settings are restored at the end.
func TestInteractiveRank(t *testing.T) {
	t.Parallel()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, t.TempDir(), "who.sh", `if [ "$PRUN_RANK" = 0 ]; then
  [ -t 0 ] && echo "rank0 stdin is a terminal"
  PS1='prompt> ' exec sh -i
fi
[ -t 0 ] || echo "rank1 stdin is not a terminal"
`)
	cmd := exec.Command(prunBin, "-n", "2", script)
	cmd.Env = append(baseEnv(), "TMPDIR="+t.TempDir(), "NO_COLOR=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen ptyBuf
	go io.Copy(&screen, master)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()

	screen.waitFor(t, "rank0 stdin is a terminal")
	screen.waitFor(t, "rank1 stdin is not a terminal")
	screen.waitFor(t, "prompt> ")
	io.WriteString(master, "echo $((6*7))\r")
	screen.waitFor(t, "42")
	// Ctrl-C goes to the rank's shell (which survives it), not to prun.
	io.WriteString(master, "sleep 30\r")
	time.Sleep(300 * time.Millisecond)
	io.WriteString(master, "\x03")
	io.WriteString(master, "echo after-ctrl-c\r")
	screen.waitFor(t, "after-ctrl-c")
	// A window-size change reaches the rank's terminal.
	if err := pty.Setsize(master, &pty.Winsize{Rows: 41, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGWINCH)
	time.Sleep(200 * time.Millisecond)
	io.WriteString(master, "stty size\r")
	screen.waitFor(t, "41 101")
	io.WriteString(master, "exit 0\r")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("prun: %v\n%s", err, screen.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("prun did not end\n%s", screen.String())
	}
	// prun's terminal is as it was (the slave side outlives prun here only
	// through the master we hold: reopen it by name).
	name, err := ptsName(master)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag != after.Lflag || before.Iflag != after.Iflag || before.Cflag != after.Cflag {
		t.Errorf("terminal not restored: lflag %#x -> %#x, iflag %#x -> %#x", before.Lflag, after.Lflag, before.Iflag, after.Iflag)
	}
}

func ptsName(master *os.File) (string, error) {
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		return "", err
	}
	return "/dev/pts/" + itoa(n), nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
