// Waiting: poll, and the errors that end it at once.

package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// permanentError ends a poll at once.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// permanent marks an error that no amount of waiting repairs.
func permanent(err error) error { return permanentError{err} }

// poll calls cond until it reports done, returns a permanent error, or within passes.
// Other errors are retried: the API servers of a busy machine may answer slowly.
func poll(ctx context.Context, within time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		done, err := cond(ctx)
		if err == nil && done {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return fmt.Errorf("waiting for %s: %w", what, p.error)
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}
