package daemon

import (
	"strings"
	"testing"
)

func TestParseInitack(t *testing.T) {
	for line, want := range map[string]int{"cmd=initack pmiid=0\n": 0, "cmd=initack pmiid=12": 12, " cmd=initack  pmiid=3 \r\n": 3} {
		if got, err := parseInitack(line); err != nil || got != want {
			t.Errorf("parseInitack(%q) = %d, %v; want %d", line, got, err, want)
		}
	}
	for _, line := range []string{"", "cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=initack\n", "cmd=initack pmiid=-1\n",
		"cmd=initack pmiid=x\n", "cmd=initack pmiid=1 extra=2\n", "cmd=initack rank=1\n"} {
		if _, err := parseInitack(line); err == nil {
			t.Errorf("parseInitack(%q): no error", line)
		}
	}
}

// FuzzInitack: no first line may panic; a rank is never negative, and an
// error says what was expected.
func FuzzInitack(f *testing.F) {
	for _, s := range []string{"cmd=initack pmiid=0\n", "cmd=initack pmiid=99999999999999999999", "cmd=initack pmiid=\n", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		n, err := parseInitack(line)
		if err != nil {
			if n != -1 || !strings.Contains(err.Error(), "pmiid") {
				t.Fatalf("parseInitack(%q) = %d, %v", line, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("parseInitack(%q) = %d", line, n)
		}
	})
}
