package ctl

// The launch tree. The launcher is vertex 0 and the daemons are 1..n; with
// fanout k, vertex v's children are v*k+1 .. v*k+k, so a message finds its
// way down by arithmetic alone, and the depth is log_k(n).

// Parent is v's parent in a tree of fanout k (v > 0).
func Parent(v, k int) int { return (v - 1) / k }

// Children are v's children among vertices 1..n.
func Children(v, k, n int) []int {
	var out []int
	for c := v*k + 1; c <= v*k+k && c <= n; c++ {
		out = append(out, c)
	}
	return out
}

// NextHop is the child of v through which dest (a descendant of v) is
// reached, or -1 when dest is not below v.
func NextHop(v, dest, k int) int {
	for dest > v {
		p := Parent(dest, k)
		if p == v {
			return dest
		}
		dest = p
	}
	return -1
}

// Subtree lists v and every vertex below it among 1..n.
func Subtree(v, k, n int) []int {
	out := []int{v}
	for i := 0; i < len(out); i++ {
		out = append(out, Children(out[i], k, n)...)
	}
	return out
}
