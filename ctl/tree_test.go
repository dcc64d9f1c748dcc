package ctl

import (
	"slices"
	"testing"
)

func TestTree(t *testing.T) {
	for _, k := range []int{1, 2, 3, 8, 64} {
		for n := 1; n <= 40; n++ {
			seen := map[int]bool{}
			for _, v := range Subtree(0, k, n)[1:] {
				if seen[v] {
					t.Fatalf("k=%d n=%d: %d twice", k, n, v)
				}
				seen[v] = true
				if p := Parent(v, k); !slices.Contains(Children(p, k, n), v) {
					t.Fatalf("k=%d n=%d: %d not a child of its parent %d", k, n, v, p)
				}
				// Walking NextHop from the root reaches v.
				at, hops := 0, 0
				for at != v {
					at = NextHop(at, v, k)
					if at < 0 || hops > n {
						t.Fatalf("k=%d n=%d: no route to %d", k, n, v)
					}
					hops++
				}
			}
			if len(seen) != n {
				t.Fatalf("k=%d n=%d: tree has %d vertices", k, n, len(seen))
			}
		}
	}
	if NextHop(2, 1, 2) != -1 || NextHop(1, 2, 2) != -1 {
		t.Fatal("NextHop to a vertex outside the subtree")
	}
}
