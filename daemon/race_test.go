//go:build race

package daemon

// raceEnabled: this test binary runs under the race detector, whose shadow
// memory inflates the Go heap (not libpmix's).
const raceEnabled = true
