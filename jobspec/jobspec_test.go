package jobspec

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePorts(t *testing.T) {
	for spec, want := range map[string][][2]int{
		"50000:50010":       {{50000, 50010}},
		"50000-50010":       {{50000, 50010}},
		"7":                 {{7, 7}},
		" 1-2 , 9:9,65535 ": {{1, 2}, {9, 9}, {65535, 65535}},
	} {
		got, err := ParsePorts(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", spec, got, err, want)
		}
	}
	for spec, msg := range map[string]string{
		"":                     "empty port range",
		"a:b":                  "want LOW:HIGH, LOW-HIGH or a port",
		"5:3":                  "the lower first",
		"0-10":                 "want ports from 1 to 65535",
		"1,70000":              `"70000": want ports from 1 to 65535`,
		"1,,2":                 "empty port range",
		"1:2:3":                "want LOW:HIGH",
		"-5":                   "want LOW:HIGH",
		"99999999999999999999": "want LOW:HIGH",
	} {
		if _, err := ParsePorts(spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", spec, err, msg)
		}
	}
}

func FuzzParsePorts(f *testing.F) {
	for _, s := range []string{"50000:50010", "1-2,3", "5:3", "", "a", "1,,2", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ports, err := ParsePorts(spec)
		if err != nil {
			if strings.ContainsRune(err.Error(), '\n') {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(ports) == 0 {
			t.Fatalf("%q: no ranges and no error", spec)
		}
		for _, r := range ports {
			if r[0] < 1 || r[1] > 65535 || r[0] > r[1] {
				t.Fatalf("%q: bad range %v", spec, r)
			}
		}
	})
}

func TestParseXterm(t *testing.T) {
	for spec, want := range map[string]Xterm{
		"-1":      {All: true},
		"-1!":     {All: true, Hold: true},
		"0":       {Ranks: []int{0}},
		"0,2-3!":  {Ranks: []int{0, 2, 3}, Hold: true},
		" 3, 1-3": {Ranks: []int{3, 1, 2}},
	} {
		got, err := ParseXterm(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, %v; want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"", "!", "a", "3-1", "-2", "1,,2", "0-99999999", "0-65536"} {
		if _, err := ParseXterm(bad); err == nil || !strings.Contains(err.Error(), "want ranks") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	x := Xterm{Ranks: []int{2}}
	if x.Has(1) || !x.Has(2) || !(Xterm{All: true}).Has(7) || (Xterm{}).Has(0) {
		t.Error("Has")
	}
}

func FuzzParseXterm(f *testing.F) {
	for _, s := range []string{"-1", "-1!", "0,2-3!", "3-1", "a", "", "0-5,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		x, err := ParseXterm(spec)
		if err != nil {
			if strings.ContainsRune(err.Error(), '\n') {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if x.All == (len(x.Ranks) > 0) {
			t.Fatalf("%q: %+v", spec, x)
		}
		seen := map[int]bool{}
		for _, r := range x.Ranks {
			if r < 0 || seen[r] {
				t.Fatalf("%q: ranks %v", spec, x.Ranks)
			}
			seen[r] = true
		}
	})
}
