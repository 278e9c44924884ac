// Package layers holds the test that keeps heureka's imports pointing one
// way (docs/design.md, "Packages"): each package may import only the
// heureka packages listed for it. It owns only that test and imports nothing
// of heureka.
package layers
