package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReportLauncherRSS: --report's launcher.max_rss_kib is prun's own peak,
// not that of the process that started it. Go's os/exec starts prun by
// vfork, and Linux keeps across execve the high-water mark of the memory
// the process had: getrusage said 542 MiB for prun started by this test
// binary once it had grown so.
func TestReportLauncherRSS(t *testing.T) {
	big := make([]byte, 400<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	file := filepath.Join(t.TempDir(), "report.json")
	r := run(t, opts{args: []string{"--report", file, "-n", "1", "true"}})
	runtime.KeepAlive(big)
	expectCode(t, r, 0)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Launcher struct {
			MaxRSSKiB int64 `json:"max_rss_kib"`
		} `json:"launcher"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if kib := rep.Launcher.MaxRSSKiB; kib <= 0 || kib > 200<<10 {
		t.Errorf("the launcher's peak RSS %d KiB; want prun's own (tens of MiB), not its starter's 400 MiB", kib)
	}
}
