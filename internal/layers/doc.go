// Package layers holds the test that keeps the package graph in the layers
// docs/architecture.md lists: a package imports only lower layers.
package layers
