package timerslack

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// slack is the calling thread's timer slack.
func slack(t *testing.T) int {
	t.Helper()
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// childSlack is the slack a child forked from the calling thread starts with.
func childSlack(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("cat", "/proc/self/timerslack_ns").Output()
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEveryThreadWide(t *testing.T) {
	if os.Getenv("TIMERSLACK_CHILD") != "" {
		t.Skip("run as the child of TestWiderSlackStays")
	}
	if Original() == 0 {
		t.Fatalf("the test started with a slack of 1 ms or more (%s); run it from a shell", readSelf(t))
	}
	// Threads the runtime makes now, long after start-up, inherit it too.
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own: the goroutine exits locked, and the thread ends with it
			got[i] = slack(t)
		}()
	}
	wg.Wait()
	for i, v := range got {
		if v != Wide {
			t.Errorf("thread %d: slack %d ns, want %d", i, v, Wide)
		}
	}
}

func TestForkHandsOriginal(t *testing.T) {
	if os.Getenv("TIMERSLACK_CHILD") != "" {
		t.Skip("run as the child of TestWiderSlackStays")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if got := childSlack(t); got != Wide {
		t.Errorf("a child forked outside Fork starts with %d ns, want the launcher's %d", got, Wide)
	}
	got, _ := Fork(func() (int, error) { return childSlack(t), nil })
	if got != Original() {
		t.Errorf("a child forked in Fork starts with %d ns, want the original %d", got, Original())
	}
	if v := slack(t); v != Wide {
		t.Errorf("after Fork the thread's slack is %d ns, want %d", v, Wide)
	}
}

// A process started with a slack already that wide or wider keeps it.
func TestWiderSlackStays(t *testing.T) {
	if os.Getenv("TIMERSLACK_CHILD") != "" {
		if Original() != 0 || slack(t) != 3*Wide {
			t.Fatalf("Original %d, slack %d: want 0 and %d", Original(), slack(t), 3*Wide)
		}
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 3*Wide, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, Wide, 0, 0, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWiderSlackStays$", "-test.v")
	cmd.Env = append(os.Environ(), "TIMERSLACK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWiderSlackStays") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func readSelf(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
