//go:build !anchorage_bench_suspectexpires

package shard

// suspectHoldsOn is true in every build that ships: a member this coordinator has seen
// no change of for a Lease duration still holds on to its projects until the
// conditional clear of its member Lease succeeds (issue 19, finding 1). A stalled watch
// makes every member look like that.
const suspectHoldsOn = true
