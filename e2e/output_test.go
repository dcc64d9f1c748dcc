package e2e

import (
	"fmt"
	"strings"
	"testing"
)

func TestTagOutput(t *testing.T) {
	t.Parallel()
	script := writeScript(t, t.TempDir(), "two.sh", `echo "first $PRUN_RANK"
echo "second $PRUN_RANK"
echo "err $PRUN_RANK" >&2
`)
	r := run(t, opts{args: []string{"--tag-output", "-n", "2", script}})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	if len(got) != 4 {
		t.Errorf("stdout has %d lines, want 4\n%s", len(got), r)
	}
	for _, l := range got {
		if !strings.HasPrefix(l, "[0,0]<stdout>:") && !strings.HasPrefix(l, "[0,1]<stdout>:") {
			t.Errorf("untagged stdout line %q", l)
		}
	}
	for rank := 0; rank < 2; rank++ {
		for _, w := range []string{"first", "second"} {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("[0,%d]<stdout>:%s %d\n", rank, w, rank))
		}
		expectContains(t, "stderr", r.stderr, fmt.Sprintf("[0,%d]<stderr>:err %d\n", rank, rank))
	}
}

// manyLines writes LINES lines of 200 bytes (newline included) in chunks of
// 4093 bytes, so that most writes end in the middle of a line.
const manyLinesC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINES 2000
#define LEN 200

int main(void)
{
    const char *r = getenv("PRUN_RANK");
    int rank = r ? atoi(r) : -1;
    char *buf = malloc(LINES * LEN), *p = buf;
    for (int i = 0; i < LINES; i++, p += LEN) {
        int n = snprintf(p, LEN, "rank %d line %05d ", rank, i);
        memset(p + n, 'a' + (rank + i) % 26, LEN - 1 - n);
        p[LEN - 1] = '\n';
    }
    size_t total = LINES * LEN, off = 0;
    while (off < total) {
        size_t n = total - off < 4093 ? total - off : 4093;
        ssize_t w = write(1, buf + off, n);
        if (w <= 0)
            return 1;
        off += (size_t)w;
    }
    return 0;
}
`

func expectedLine(rank, i int) string {
	head := fmt.Sprintf("rank %d line %05d ", rank, i)
	return head + strings.Repeat(string(rune('a'+(rank+i)%26)), 199-len(head))
}

func TestLineIntegrity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	compileC(t, dir, "manylines", manyLinesC, false)
	r := run(t, opts{args: []string{"-n", "4", "./manylines"}, dir: dir})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	if len(got) != 8000 {
		t.Errorf("stdout has %d lines, want 8000", len(got))
	}
	next := make([]int, 4) // each rank's lines arrive in order
	bad := 0
	for _, l := range got {
		var rank, i int
		if _, err := fmt.Sscanf(l, "rank %d line %d ", &rank, &i); err != nil || rank < 0 || rank > 3 ||
			l != expectedLine(rank, i) || i != next[rank] {
			if bad++; bad <= 5 {
				t.Errorf("mangled or out-of-order line (%d bytes): %.80q...", len(l), l)
			}
			continue
		}
		next[rank]++
	}
	if bad > 5 {
		t.Errorf("... %d bad lines in all", bad)
	}
	for rank, n := range next {
		if n != 2000 {
			t.Errorf("rank %d: %d intact lines, want 2000", rank, n)
		}
	}
	if !strings.HasSuffix(r.stdout, "\n") {
		t.Errorf("stdout does not end with a newline")
	}
}

func TestFinalPartialLine(t *testing.T) {
	t.Parallel()
	r := prun(t, "-n", "1", "printf", "abc")
	expectCode(t, r, 0)
	if r.stdout != "abc" {
		t.Errorf("stdout = %q, want %q", r.stdout, "abc")
	}
	// Two ranks: both partial lines arrive, neither glued to the other.
	r = prun(t, "-n", "2", "printf", "abc")
	expectCode(t, r, 0)
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); len(got) != 2 || got[0] != "abc" ||
		got[1] != "abc" {
		t.Errorf("stdout = %q, want abc and abc on separate lines", r.stdout)
	}
}

func TestStdinToRank0(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"-n", "2", "cat"}, stdin: strings.NewReader("hello\n")})
	expectCode(t, r, 0)
	if r.stdout != "hello\n" {
		t.Errorf("stdout = %q, want %q (rank 0 gets stdin, rank 1 /dev/null)", r.stdout, "hello\n")
	}
	// Tagged, to see who printed it.
	r = run(t, opts{args: []string{"--tag-output", "-n", "2", "cat"}, stdin: strings.NewReader("hello\n")})
	expectCode(t, r, 0)
	if r.stdout != "[0,0]<stdout>:hello\n" {
		t.Errorf("stdout = %q, want only rank 0's hello", r.stdout)
	}
	// A longer stream reaches rank 0 whole.
	var b strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&b, "input line %d\n", i)
	}
	r = run(t, opts{args: []string{"-n", "2", "cat"}, stdin: strings.NewReader(b.String())})
	expectCode(t, r, 0)
	if r.stdout != b.String() {
		t.Errorf("stdin of %d bytes came out as %d bytes (%d lines)", b.Len(), len(r.stdout), len(lines(r.stdout)))
	}
}
