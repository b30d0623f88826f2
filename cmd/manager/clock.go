//go:build !anchorage_bench_skew

package main

import "k8s.io/utils/clock"

// replicaClock is the clock every part of the replica runs on: nil, the real one, in
// every build that ships. The bench harness's skew build (clock_skew.go) offsets it.
func replicaClock() (clock.WithTicker, error) { return nil, nil }
