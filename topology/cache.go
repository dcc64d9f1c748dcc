// Package topology knows the node's hardware topology. Today that means one
// thing: a cached hwloc XML description of this node, so that libpmix does
// not rediscover the machine at every launch (discovery is most of
// PMIx_server_init's cost; see docs/benchmarks.md).
package topology

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// XMLCache is the cached topology of this node.
type XMLCache struct {
	Path string // where the XML is (or will be) stored
}

// Cache locates this node's cache entry. The key covers what can change the
// topology without a change of cache directory: a reboot (boot id), the host
// and the CPUs this process may use (a cgroup or container). The name starts
// with short hashes of the host and the boot, so that a host's entries of
// earlier boots can be told apart and removed (see Fill): a home directory
// may be shared by many hosts.
func Cache() (*XMLCache, bool) {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return nil, false
		}
		dir = filepath.Join(home, ".cache")
	}
	name, ok := cacheName()
	if !ok {
		return nil, false
	}
	return &XMLCache{Path: filepath.Join(dir, "prun", name)}, true
}

// cacheName is this process's cache file name; a launch asks for it more
// than once, and it reads three files.
var cacheName = sync.OnceValues(func() (string, bool) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false
	}
	host, _ := os.Hostname()
	h := sha256.New()
	h.Write(boot)
	h.Write([]byte(host))
	h.Write([]byte(allowedCPUs()))
	short := func(s string) string { x := sha256.Sum256([]byte(s)); return hex.EncodeToString(x[:4]) }
	return "topology-" + short(host) + "-" + short(string(boot)) + "-" + hex.EncodeToString(h.Sum(nil))[:16] + ".xml", true
})

// oldFormatAge is when a cache file without host and boot in its name (an
// earlier prun's) is removed.
const oldFormatAge = 30 * 24 * time.Hour

// prune removes the cache files of this host's earlier boots, and old ones
// in an earlier format; other hosts' files stay.
func (c *XMLCache) prune() {
	dir, name := filepath.Split(c.Path)
	f := strings.SplitN(name, "-", 4) // "topology", host, boot, rest
	if len(f) != 4 {
		return
	}
	hostPrefix, bootPrefix := f[0]+"-"+f[1]+"-", f[0]+"-"+f[1]+"-"+f[2]+"-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		switch {
		case !strings.HasPrefix(n, "topology-"):
		case strings.HasPrefix(n, hostPrefix):
			if !strings.HasPrefix(n, bootPrefix) {
				os.Remove(filepath.Join(dir, n))
			}
		case strings.Count(strings.SplitN(n, ".", 2)[0], "-") == 1: // topology-HASH.xml...
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > oldFormatAge {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
}

// allowedCPUs is the cache key's form of the CPUs this process may use.
func allowedCPUs() string { return processCPUs().String() }

// processCPUs is the set of CPUs this process may use: its main thread's
// affinity, which is what Cpus_allowed_list of /proc/self/status shows,
// without the kernel writing out that whole file (read twice a launch).
// nil means no restriction known.
var processCPUs = sync.OnceValue(func() CPUSet {
	var set unix.CPUSet
	if unix.SchedGetaffinity(os.Getpid(), &set) == nil {
		var s CPUSet
		for cpu := 0; cpu < len(set)*64; cpu++ {
			if set.IsSet(cpu) {
				s = append(s, cpu)
			}
		}
		if len(s) > 0 {
			return s
		}
	}
	s, _ := allowedCPUSet("/proc/self/status") // more CPUs than unix.CPUSet holds
	return s
})

// Valid reports whether the cached XML exists.
func (c *XMLCache) Valid() bool {
	_, ok := c.stat()
	return ok
}

// stat is the cached XML's file information, if there is one to read.
func (c *XMLCache) stat() (os.FileInfo, bool) {
	st, err := os.Stat(c.Path)
	return st, err == nil && st.Mode().IsRegular() && st.Size() > 0
}

// Fill starts hwloc's lstopo writing the XML; wait reaps it. It is meant to
// run beside a job whose server discovered the topology the slow way, so
// that the next launch is fast. Failure only means no cache.
func (c *XMLCache) Fill(env []string) (wait func()) {
	lstopo, err := exec.LookPath("lstopo-no-graphics")
	if err != nil {
		if lstopo, err = exec.LookPath("lstopo"); err != nil {
			return func() {}
		}
	}
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
		return func() {}
	}
	tmp := c.Path + ".tmp." + randSuffix()
	cmd := exec.Command(lstopo, "--of", "xml", "-f", tmp)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return func() {}
	}
	return func() {
		if cmd.Wait() == nil {
			os.Rename(tmp, c.Path)
			c.prune()
		}
		os.Remove(tmp)
	}
}

func randSuffix() string {
	b := make([]byte, 4)
	f, err := os.Open("/dev/urandom")
	if err == nil {
		f.Read(b)
		f.Close()
	}
	return hex.EncodeToString(b)
}

// Local is this node's topology as this process may use it: from the cached
// hwloc XML when there is one (fast; and the XML is what libpmix and the
// ranks read), else from sysfs. hwloc takes the allowed CPUs from the
// cgroup, not from the process's affinity (taskset), so a cache that shows
// more PUs than the affinity allows gives way to sysfs, which honours both.
// xml is the cache's content when it was parsed; it is nil when the
// topology came from the cache's synthetic form, which says it all.
func Local() (t *Topology, xml []byte, err error) {
	if c, ok := Cache(); ok {
		if st, ok := c.stat(); ok {
			allowed := processCPUs()
			fits := func(t *Topology) bool { return allowed == nil || t.NumPUs() <= len(allowed) }
			if t := c.readSynthetic(st); t != nil && fits(t) {
				return t, nil, nil
			}
			if b, err := os.ReadFile(c.Path); err == nil {
				if t, err := ParseXML(bytes.NewReader(b)); err == nil && fits(t) {
					c.writeSynthetic(st, t)
					return t, b, nil
				}
			}
		}
	}
	t, err = Discover()
	return t, nil, err
}

// Parsing the XML is a noticeable part of a local launch; the synthetic
// form (when the machine has one) is one line. The synthetic file sits
// beside the XML and names the XML's size and modification time, so that a
// replaced XML is never read through a stale synthetic form.

func (c *XMLCache) syntheticPath() string { return c.Path + ".synthetic" }

func xmlStamp(st os.FileInfo) string {
	return fmt.Sprintf("%d %d\n", st.Size(), st.ModTime().UnixNano())
}

func (c *XMLCache) readSynthetic(xmlStat os.FileInfo) *Topology {
	b, err := os.ReadFile(c.syntheticPath())
	if err != nil {
		return nil
	}
	spec, ok := strings.CutPrefix(string(b), xmlStamp(xmlStat))
	if !ok {
		return nil
	}
	t, err := ParseSynthetic(strings.TrimSpace(spec))
	if err != nil {
		return nil
	}
	return t
}

// writeSynthetic stores t's synthetic form if it describes t exactly.
func (c *XMLCache) writeSynthetic(xmlStat os.FileInfo, t *Topology) {
	spec := t.Synthetic()
	if spec == "" || strings.HasPrefix(spec, "asymmetric") {
		return
	}
	back, err := ParseSynthetic(spec)
	if err != nil || !back.Equal(t) {
		return
	}
	tmp := c.syntheticPath() + ".tmp." + randSuffix()
	if os.WriteFile(tmp, []byte(xmlStamp(xmlStat)+spec+"\n"), 0o644) == nil {
		os.Rename(tmp, c.syntheticPath())
	}
	os.Remove(tmp)
}
