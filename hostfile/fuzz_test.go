package hostfile

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// oneLineErr fails unless err is a single line.
func oneLineErr(t *testing.T, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("multi-line error: %q", err)
	}
}

// filePrefix fails unless a file parser's error starts "NAME:LINE: " with
// LINE within the input.
func filePrefix(t *testing.T, err error, name, in string) {
	t.Helper()
	oneLineErr(t, err)
	m := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `:([0-9]+): \S`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error without %s:LINE: prefix: %q", name, err)
	}
	var line int
	fmt.Sscan(m[1], &line)
	if line < 1 || line > strings.Count(in, "\n")+1 {
		t.Fatalf("line %d outside the input: %q", line, err)
	}
}

// checkEntries holds what every parsed entry list must satisfy.
func checkEntries(t *testing.T, es []Entry) {
	t.Helper()
	keys := map[string]bool{}
	for _, e := range es {
		if e.Kind != Named {
			if e.Name != "" || e.Index < 0 || e.Count < 0 {
				t.Fatalf("bad relative entry %+v", e)
			}
			continue
		}
		if _, msg := checkHost(bracket(e.Name)); msg != "" {
			t.Fatalf("entry with bad name %q: %s", e.Name, msg)
		}
		if e.Slots < 0 || e.SlotsFromCores && e.Slots != 0 || e.MaxSlots != 0 && e.MaxSlots < e.Slots {
			t.Fatalf("bad slots %+v", e)
		}
		k := fmt.Sprint(e.Exclude, hostKey(e.Name))
		if keys[k] && !e.Exclude {
			t.Fatalf("host %q twice", e.Name)
		}
		keys[k] = true
	}
}

func FuzzHostfile(f *testing.F) {
	for _, s := range []string{
		"a slots=4\nb\n",
		"# c\nu@n1.example slots=2 max_slots=4 port=22 # x\n",
		"a count=1\na cpu=2\n^b\n",
		"::1 slots=1\n[fe80::1%eth0] max-slots=3\n10.0.0.1\n",
		"+n0\n+e:2\n+e\n",
		"a slots = 4\r\n\tb\tmax_slots =2\n",
		"a:4\n", "a slots=abc\n", "a slots=4 max_slots=2\n", "^a slots=1\n",
		"rank 0=a slot=0\n", "a user=x\na user=y\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		es, err := ParseHostfile("fz.txt", strings.NewReader(in))
		if err != nil {
			filePrefix(t, err, "fz.txt", in)
			return
		}
		checkEntries(t, es)
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.String())
			b.WriteByte('\n')
		}
		again, err := ParseHostfile("fz.txt", strings.NewReader(b.String()))
		if err != nil || !reflect.DeepEqual(again, es) {
			t.Fatalf("round trip of %q via %q: %+v, %v; had %+v", in, b.String(), again, err, es)
		}
		// a context's hostfile joining another's (or itself)
		for _, other := range [][]Entry{es, {named("a", 3), cores("b"), {Name: "c", Slots: 1, MaxSlots: 2, User: "u", Port: 22}}} {
			u, err := Union(es, other)
			if err != nil {
				oneLineErr(t, err)
				continue
			}
			checkEntries(t, u)
			if len(u) > len(es)+len(other) {
				t.Fatalf("Union grew: %+v", u)
			}
		}
	})
}

func FuzzHostList(f *testing.F) {
	for _, s := range []string{
		"a:4,b,c:*", "[::1]:2,fe80::1", "+n0,+n2", "+e,+e:3", "^a,u@b:2,b",
		"a,,b", "a:x", "[::1]2", "a:*,a", "^+n0", "u@a,v@c:2,+n1",
	} {
		f.Add(s)
	}
	base := []Entry{named("a", 2), cores("b"), named("c", 4), named("::1", 1)}
	f.Fuzz(func(t *testing.T, in string) {
		es, err := ParseHostList(in)
		if err != nil {
			oneLineErr(t, err)
			if !strings.HasPrefix(err.Error(), "--host: ") {
				t.Fatalf("error without --host: prefix: %q", err)
			}
			return
		}
		checkEntries(t, es)
		s := FormatHostList(es)
		again, err := ParseHostList(s)
		if err != nil || !reflect.DeepEqual(again, es) {
			t.Fatalf("round trip of %q via %q: %+v, %v; had %+v", in, s, again, err, es)
		}
		sel, err := Select(base, es)
		if err != nil {
			oneLineErr(t, err)
			return
		}
		seen := map[string]bool{}
		users := map[string]string{} // the list's users of named hosts: Select keeps them
		for _, e := range es {
			if e.Kind == Named && !e.Exclude {
				users[hostKey(e.Name)] = e.User
			}
		}
		for _, e := range sel {
			if indexOf(base).find(e.Name) < 0 || seen[e.Name] || e.Exclude || e.Kind != Named {
				t.Fatalf("Select(%q) = %+v", in, sel)
			}
			if u := users[hostKey(e.Name)]; u != "" && e.User != u {
				t.Fatalf("Select(%q) = %+v: host %s lost user %s", in, sel, e.Name, u)
			}
			seen[e.Name] = true
		}
	})
}

func FuzzRankfile(f *testing.F) {
	for _, s := range []string{
		"rank 0=aa slot=1:0-2\nrank 1=bb slot=0:0,1\nrank 2=cc slot=1-2\n",
		"rank 3=+n1 slot=0:1;1:2 # c\n\nrank 4 = [::1] slot = 0,2-3\n",
		"rank 0=a slot=0\nrank 0=b slot=1\n", "rank 0=a\n", "rank 0=a slot=1;2\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rs, err := ParseRankfile("rf.txt", strings.NewReader(in))
		if err != nil {
			filePrefix(t, err, "rf.txt", in)
			return
		}
		var b strings.Builder
		for i, r := range rs {
			if i > 0 && rs[i-1].Rank >= r.Rank {
				t.Fatalf("ranks not sorted and unique: %+v", rs)
			}
			if (r.Host == "") != (r.Node >= 0) {
				t.Fatalf("host and node index: %+v", r)
			}
			if len(r.Slot.CPUs) == 0 && len(r.Slot.Cores) == 0 {
				t.Fatalf("empty slot: %+v", r)
			}
			b.WriteString(r.String())
			b.WriteByte('\n')
		}
		again, err := ParseRankfile("rf.txt", strings.NewReader(b.String()))
		if err != nil || !reflect.DeepEqual(again, rs) {
			t.Fatalf("round trip of %q via %q: %+v, %v", in, b.String(), again, err)
		}
	})
}

func FuzzNodelist(f *testing.F) {
	for _, s := range []string{
		"node[01-04,7],gpu[1-2]", "a,b", "r[1-2]n[1-2]", "n[098-100]", "n[1-", "n[]", "n[4-2]", "a,,b",
	} {
		f.Add(s, "2(x3),1")
	}
	f.Fuzz(func(t *testing.T, nodelist, tasks string) {
		names, err := ExpandNodelist(nodelist)
		if err != nil {
			oneLineErr(t, err)
		} else {
			if len(names) == 0 || len(names) > maxNodes {
				t.Fatalf("%q expands to %d names", nodelist, len(names))
			}
			for _, n := range names {
				if n == "" || strings.ContainsAny(n, "[],") {
					t.Fatalf("%q expands to name %q", nodelist, n)
				}
			}
			// the expansion is itself a nodelist that expands to itself
			again, err := ExpandNodelist(strings.Join(names, ","))
			if err != nil || !reflect.DeepEqual(again, names) {
				t.Fatalf("re-expanding %q: %v", nodelist, err)
			}
		}
		counts, err := ParseTasksPerNode(tasks)
		if err != nil {
			oneLineErr(t, err)
		} else {
			for _, c := range counts {
				if c < 1 {
					t.Fatalf("%q gives count %d", tasks, c)
				}
			}
		}
		es, _, ok, err := Detect(env{"SLURM_JOB_NODELIST": nodelist, "SLURM_TASKS_PER_NODE": tasks}.get, nil)
		if err != nil {
			oneLineErr(t, err)
			if !strings.HasPrefix(err.Error(), "SLURM_") {
				t.Fatalf("error not naming the variable: %q", err)
			}
			return
		}
		if nodelist != "" && (!ok || len(es) != len(names)) {
			t.Fatalf("Detect: %d entries, ok %v, for %d names", len(es), ok, len(names))
		}
	})
}
