package gateway

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// releaseCounter admits every project and counts the releases.
type releaseCounter struct{ released *int }

func (a releaseCounter) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	return ctx, func() { *a.released++ }, nil
}

// TestAdmitAndRun: the phases run in order until one is done or fails; the finish step
// runs after them however they ended, sees their error, and its own error is joined with
// theirs; its result counts only when the reconcile ends without error. Nothing runs for
// a scope that is not loaded, and admission is always released.
func TestAdmitAndRun(t *testing.T) {
	errPhase, errFinish := errors.New("phase failed"), errors.New("finish failed")
	type scope struct{ ran []string }
	step := func(name string, done bool, err error) phase[scope] {
		return func(_ context.Context, s *scope) (bool, error) {
			s.ran = append(s.ran, name)
			return done, err
		}
	}
	requeue := reconcile.Result{RequeueAfter: 5 * time.Second}
	cases := []struct {
		reason    string
		loadErr   error
		noScope   bool
		phases    []phase[scope]
		finish    bool
		finishErr error
		wantRan   []string // phases, then "finish(<the error it saw>)"
		wantRes   reconcile.Result
		wantErrs  []error // each must be in the returned error; none: no error
		exactErr  error   // when set, the error must be this one, not a wrapping of it
	}{
		{reason: "all phases pass, then finish decides the result",
			phases: []phase[scope]{step("a", false, nil), step("b", false, nil)}, finish: true,
			wantRan: []string{"a", "b", "finish(<nil>)"}, wantRes: requeue},
		{reason: "a done phase ends the phases; finish still runs",
			phases: []phase[scope]{step("a", true, nil), step("b", false, nil)}, finish: true,
			wantRan: []string{"a", "finish(<nil>)"}, wantRes: requeue},
		{reason: "a failed phase ends the phases; finish sees its error; no result",
			phases: []phase[scope]{step("a", true, errPhase), step("b", false, nil)}, finish: true,
			wantRan: []string{"a", "finish(phase failed)"}, wantErrs: []error{errPhase}, exactErr: errPhase},
		{reason: "both fail: the errors are joined",
			phases: []phase[scope]{step("a", false, errPhase)}, finish: true, finishErr: errFinish,
			wantRan: []string{"a", "finish(phase failed)"}, wantErrs: []error{errPhase, errFinish}},
		{reason: "only finish fails",
			phases: []phase[scope]{step("a", false, nil)}, finish: true, finishErr: errFinish,
			wantRan: []string{"a", "finish(<nil>)"}, wantErrs: []error{errFinish}},
		{reason: "without finish, a done phase ends the reconcile with no result",
			phases:  []phase[scope]{step("a", true, nil), step("b", false, nil)},
			wantRan: []string{"a"}},
		{reason: "without finish, a phase's error is returned",
			phases:  []phase[scope]{step("a", false, errPhase)},
			wantRan: []string{"a"}, wantErrs: []error{errPhase}, exactErr: errPhase},
		{reason: "nothing loaded: nothing runs",
			noScope: true, phases: []phase[scope]{step("a", false, nil)}, finish: true},
		{reason: "a project not held while loading: nothing runs, quietly",
			loadErr: fmt.Errorf("reaching project: %w", multicluster.ErrClusterNotFound), phases: []phase[scope]{step("a", false, nil)}, finish: true},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			s := &scope{}
			steps := reconcileSteps[scope]{
				load: func(context.Context, mcreconcile.Request) (*scope, error) {
					if tc.noScope || tc.loadErr != nil {
						return nil, tc.loadErr
					}
					return s, nil
				},
				phases: tc.phases,
			}
			if tc.finish {
				steps.finish = func(_ context.Context, s *scope, phasesErr error) (reconcile.Result, error) {
					s.ran = append(s.ran, fmt.Sprintf("finish(%v)", phasesErr))
					return requeue, tc.finishErr
				}
			}
			released := 0
			res, err := admitAndRun(context.Background(), releaseCounter{released: &released}, mcreconcile.Request{ClusterName: "proj"}, steps)
			if !reflect.DeepEqual(s.ran, tc.wantRan) {
				t.Errorf("ran %v, want %v", s.ran, tc.wantRan)
			}
			if res != tc.wantRes {
				t.Errorf("result %+v, want %+v", res, tc.wantRes)
			}
			if len(tc.wantErrs) == 0 && err != nil {
				t.Errorf("error %v, want none", err)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("error %v, want it to hold %v", err, want)
				}
			}
			if tc.exactErr != nil && err != tc.exactErr {
				t.Errorf("error %#v, want exactly %v", err, tc.exactErr)
			}
			if released != 1 {
				t.Errorf("admission released %d times, want once", released)
			}
		})
	}
}
