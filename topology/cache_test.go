package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocalKeepsTheSyntheticFormBesideTheXML(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c, ok := Cache()
	if !ok {
		t.Fatal("no cache location")
	}
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	xml := lstopo(t, "--of", "xml", "-")
	if err := os.WriteFile(c.Path, xml, 0o644); err != nil {
		t.Fatal(err)
	}

	fromXML, b, err := Local()
	if err != nil || b == nil {
		t.Fatalf("first Local: xml %d bytes, %v; want the XML parsed", len(b), err)
	}
	if strings.HasPrefix(fromXML.Synthetic(), "asymmetric") {
		// No synthetic description says it all: the XML stays the only form.
		if _, err := os.Stat(c.syntheticPath()); err == nil {
			t.Fatal("a synthetic form was written for an asymmetric machine")
		}
		return
	}
	if _, err := os.Stat(c.syntheticPath()); err != nil {
		t.Fatalf("no synthetic form beside the XML: %v", err)
	}
	fromSynth, b, err := Local()
	if err != nil || b != nil {
		t.Fatalf("second Local: xml %d bytes, %v; want the synthetic form", len(b), err)
	}
	if !fromSynth.Equal(fromXML) {
		t.Fatalf("synthetic form %q differs from the XML's topology %q", fromSynth.Synthetic(), fromXML.Synthetic())
	}

	// A replaced XML is read again, never through the old synthetic form.
	if err := os.WriteFile(c.Path, append(xml, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, b, _ := Local(); b == nil {
		t.Fatal("Local used the synthetic form of a replaced XML")
	}
	// A damaged synthetic form is ignored.
	if err := os.WriteFile(c.syntheticPath(), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, b, err := Local(); err != nil || b == nil || !got.Equal(fromXML) {
		t.Fatalf("with a damaged synthetic form: xml %d bytes, %v", len(b), err)
	}
}

func TestPruneRemovesThisHostsEarlierBoots(t *testing.T) {
	dir := t.TempDir()
	c := &XMLCache{Path: filepath.Join(dir, "topology-aaaa1111-bbbb2222-0123456789abcdef.xml")}
	old := time.Now().Add(-40 * 24 * time.Hour)
	files := map[string]bool{ // name: kept
		"topology-aaaa1111-bbbb2222-0123456789abcdef.xml":           true, // this entry
		"topology-aaaa1111-bbbb2222-ffffffffffffffff.xml":           true, // this boot, other CPUs
		"topology-aaaa1111-bbbb2222-0123456789abcdef.xml.tmp.1234":  true, // a fill under way
		"topology-aaaa1111-cccc3333-0123456789abcdef.xml":           false,
		"topology-aaaa1111-cccc3333-0123456789abcdef.xml.synthetic": false,
		"topology-dddd4444-cccc3333-0123456789abcdef.xml":           true,  // another host (shared home)
		"topology-0123456789abcdef.xml":                             false, // earlier format, old
		"topology-fedcba9876543210.xml":                             true,  // earlier format, recent
		"notes.txt":                                                 true,
	}
	for name := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "topology-0123456789abcdef.xml" {
			os.Chtimes(p, old, old)
		}
	}
	c.prune()
	for name, kept := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v", name, got, kept)
		}
	}
}
