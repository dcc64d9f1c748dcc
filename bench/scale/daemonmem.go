package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"prun/bench/internal/benchutil"
)

// daemonMem samples the memory of the simulated nodes' daemons (`prun
// daemon --ctl` processes of the prun binary under test) from /proc while a
// launch runs: per daemon its anonymous RSS at the last sample (after the
// launch: the rank runs), its peak RSS (VmHWM), and its peak anonymous
// memory estimated as VmHWM less the file-backed and shared RSS at the last
// sample (the kernel keeps no peak of the anonymous part alone). The
// transient of a registration is short, so a sampled RssAnon would miss it;
// VmHWM does not.
type daemonMem struct {
	prun string
	seen map[int]bool // pid -> is one of our daemons
	last map[int]procMem
	// The machine's MemAvailable before the launch and its lowest while
	// it ran: what the whole launch took at its peak (daemons, their
	// shells and ranks, the launcher; and whatever else ran meanwhile).
	availBefore, availMin int64
}

type procMem struct{ anon, file, hwm int64 }

func newDaemonMem(prun string) *daemonMem {
	a := availKiB()
	return &daemonMem{prun: prun, seen: map[int]bool{}, last: map[int]procMem{}, availBefore: a, availMin: a}
}

// sample reads every daemon's figures once.
func (d *daemonMem) sample() {
	if a := availKiB(); a > 0 && a < d.availMin {
		d.availMin = a
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		is, known := d.seen[pid]
		if !known {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			args := bytes.Split(b, []byte{0})
			is = len(args) > 2 && string(args[0]) == d.prun && string(args[1]) == "daemon" && string(args[2]) == "--ctl"
			d.seen[pid] = is
		}
		if !is {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		kib := func(k string) int64 {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(benchutil.Field(string(b), k), " kB")), 10, 64)
			return v
		}
		m := procMem{anon: kib("RssAnon"), file: kib("RssFile") + kib("RssShmem"), hwm: kib("VmHWM")}
		if m.hwm > 0 {
			d.last[pid] = m
		}
	}
}

// usedKiB is how much of the machine's available memory the launch took
// at its lowest sample.
func (d *daemonMem) usedKiB() int64 { return d.availBefore - d.availMin }

// run samples every interval until stop is closed.
func (d *daemonMem) run(stop <-chan struct{}, interval time.Duration) {
	for {
		d.sample()
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
	}
}

// medians returns the daemons' median anonymous RSS after the launch, peak
// RSS and estimated peak anonymous memory, in KiB, and how many daemons
// were seen.
func (d *daemonMem) medians() (anon, hwm, peakAnon int64, n int) {
	var as, hs, ps []int64
	for _, m := range d.last {
		as = append(as, m.anon)
		hs = append(hs, m.hwm)
		ps = append(ps, m.hwm-m.file)
	}
	med := func(xs []int64) int64 {
		if len(xs) == 0 {
			return 0
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		return xs[len(xs)/2]
	}
	return med(as), med(hs), med(ps), len(as)
}
