//go:build !anchorage_bench_nogate

package shard

// gateEnforced is true in every build that ships. The bench harness builds the manager
// once with the anchorage_bench_nogate tag (gate_disabled.go) to show that its smoke
// check fails when admission and the hub writer stop checking validity.
const gateEnforced = true
