//go:build anchorage_bench_skew

package main

import (
	"os"

	"k8s.io/utils/clock"

	"anchorage/internal/benchclock"
)

// replicaClock, under the anchorage_bench_skew tag only (never shipped), is the local
// clock moved by $ANCHORAGE_BENCH_CLOCK_OFFSET: bench's skew scenario runs replicas
// whose clocks are a minute ahead and behind.
func replicaClock() (clock.WithTicker, error) { return benchclock.FromEnv(os.Getenv) }
