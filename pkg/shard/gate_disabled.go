//go:build anchorage_bench_nogate

package shard

// gateEnforced is false only under the anchorage_bench_nogate tag, which never ships:
// admission stops checking validity, admitted work is no longer bounded by it, the hub
// writer no longer refuses, and neither a lapse nor a Lease naming another holder
// closes a holding: a replica that wakes from a pause goes on believing it owns its
// projects. bench/ builds this variant to prove its smoke gate reports the late writes
// and overlaps that follow.
const gateEnforced = false
