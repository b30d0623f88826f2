//go:build anchorage_bench_nogate

package shard

// gateEnforced is false only under the anchorage_bench_nogate tag, which never ships:
// admission stops checking validity, admitted work is no longer bounded by it, the hub
// writer no longer refuses, and a lapse no longer closes the holdings. bench/ builds
// this variant to prove its smoke gate reports the overlaps that follow.
const gateEnforced = false
