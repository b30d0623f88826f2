//go:build anchorage_bench_suspectexpires

package shard

// suspectHoldsOn is false only under the anchorage_bench_suspectexpires tag, which
// never ships: it puts back the rule issue 19's finding 1 removed (a suspect member's
// projects count as orphaned and are reassigned in the same pass), so that bench-smoke
// and the integration tests can show they catch the second owner a stalled watch then
// makes.
const suspectHoldsOn = false
