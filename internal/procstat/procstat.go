// Package procstat reads what Linux's /proc tells about one process (its
// scheduler state, CPU time, resident memory, the kernel function it waits
// in) and computes CPU use between two samples.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
)

// TicksPerSecond is Linux's USER_HZ, the unit of /proc's CPU times: 100 on
// every architecture Linux supports (sysconf(_SC_CLK_TCK) reports it).
const TicksPerSecond = 100

// Stat is one sample of a process.
type Stat struct {
	Pid     int
	Comm    string
	State   byte   // R, S, D, T, t, Z, X, I, ...
	UTime   uint64 // ticks in user mode
	STime   uint64 // ticks in the kernel
	Start   uint64 // start time in ticks after boot: with Pid, who this is
	Threads int
	RSS     int64  // resident memory, bytes
	Wchan   string // the kernel function it sleeps in, "" if none or hidden
	When    time.Time
}

// ErrGone is returned for a process that no longer exists.
var ErrGone = errors.New("no such process")

// errSRCH is what a read of a process's file gives once it has died.
var errSRCH = syscall.ESRCH

// Read samples process pid.
func Read(pid int) (Stat, error) {
	return ReadAt("/proc", pid)
}

// ReadAt samples pid under another procfs mount (a container's).
func ReadAt(proc string, pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("procstat: bad pid %d", pid)
	}
	dir := proc + "/" + strconv.Itoa(pid)
	now := time.Now()
	b, err := os.ReadFile(dir + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errSRCH) {
		return Stat{}, fmt.Errorf("procstat: pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return Stat{}, fmt.Errorf("procstat: %v", err)
	}
	s, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("procstat: pid %d: %v", pid, err)
	}
	s.When = now
	// wchan reads "0" when the process runs, and always "0" when the
	// kernel hides addresses from this user: either way nothing to show.
	if w, err := os.ReadFile(dir + "/wchan"); err == nil && len(w) > 0 && string(w) != "0" {
		s.Wchan = string(bytes.TrimSpace(w))
	}
	return s, nil
}

// Parse reads the contents of /proc/PID/stat. The command name sits in
// parentheses and may hold anything, spaces and ')' included, so the fields
// after it are counted from the last ')'.
func Parse(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	cl := bytes.LastIndexByte(b, ')')
	if open <= 0 || cl < open {
		return Stat{}, errors.New("malformed stat: no (comm)")
	}
	var s Stat
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, errors.New("malformed stat: bad pid")
	}
	s.Pid = pid
	s.Comm = string(b[open+1 : cl])
	f := bytes.Fields(b[cl+1:])
	// Fields from state (field 3 of proc(5)) on: we need up to rss (24).
	if len(f) < 22 || len(f[0]) != 1 {
		return Stat{}, errors.New("malformed stat: too few fields")
	}
	s.State = f[0][0]
	num := func(i int) (uint64, error) {
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed stat: field %d", i+3)
		}
		return v, nil
	}
	var threads, rss int64
	if s.UTime, err = num(11); err != nil {
		return Stat{}, err
	}
	if s.STime, err = num(12); err != nil {
		return Stat{}, err
	}
	if threads, err = strconv.ParseInt(string(f[17]), 10, 64); err != nil {
		return Stat{}, errors.New("malformed stat: field 20")
	}
	if s.Start, err = num(19); err != nil {
		return Stat{}, err
	}
	if rss, err = strconv.ParseInt(string(f[21]), 10, 64); err != nil {
		return Stat{}, errors.New("malformed stat: field 24")
	}
	s.Threads = int(threads)
	s.RSS = max(rss, 0) * int64(os.Getpagesize())
	return s, nil
}

// CPU is the process's total CPU time so far.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * (time.Second / TicksPerSecond)
}

// Same reports whether two samples are of the same process (a pid can be
// reused; its start time cannot repeat).
func (s Stat) Same(o Stat) bool {
	return s.Pid == o.Pid && s.Start == o.Start
}

// CPUPercent is the CPU used between two samples of the same process, in
// percent of one CPU (a process with two busy threads shows 200). It is 0
// when the samples are not of the same process or not in time order.
func CPUPercent(prev, cur Stat) float64 {
	dt := cur.When.Sub(prev.When)
	if !prev.Same(cur) || dt <= 0 || cur.UTime+cur.STime < prev.UTime+prev.STime {
		return 0
	}
	used := cur.CPU() - prev.CPU()
	return 100 * used.Seconds() / dt.Seconds()
}

// StateName says what a state letter means, in the words of prun top.
func StateName(state byte) string {
	switch state {
	case 'R':
		return "running"
	case 'S':
		return "sleeping"
	case 'D':
		return "disk sleep"
	case 'T':
		return "stopped"
	case 't':
		return "tracing stop"
	case 'Z':
		return "zombie"
	case 'X':
		return "dead"
	case 'I':
		return "idle"
	case 'P':
		return "parked"
	case 'W':
		return "waking"
	}
	return "unknown"
}
